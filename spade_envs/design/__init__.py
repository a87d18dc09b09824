"""Stage 3, the designer's pipeline: corpus, prompts, extract, validate, hints, leaks, placebo, measure, rewards.

Also memory. Imports ``envs``, ``sandbox``, ``builtin`` and ``play``, never a stage above (docs/architecture.md).
"""
