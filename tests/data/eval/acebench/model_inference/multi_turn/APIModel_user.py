"""The simulated user's instructions (test fixture). The real file imports openai; spade-eval only parses it."""

import openai  # noqa: F401  (never imported by spade-eval)

SYSTEM_PROMPT_TRAVEL_EN = """You play a traveller talking to an airline agent.

Instruction: {instruction}
"""

SYSTEM_PROMPT_BASE_EN = """You play a phone user talking to an assistant.

Instruction: {instruction}

Say one line at a time. When your task is done, say 'finish conversation'.
"""
