"""Leak forms a review found paying regret instead of the ``hint_leak`` penalty, each through the real check.

Every case is vetted as the pipeline vets a hint (:func:`spade_envs.design.measure.vet_hint_on_seeds`: token rules, then
replay in the sandbox) on a small env whose solution needs a value the hint writes in another form: an ordinal
(``the third lever``), a percentage (``15%`` for a rate of 0.15), digits or letters of another script in the
solution's own move, a word or number in pieces (``O R C H I D``, ``48-21``), cents in words, and a number split over
two tool calls or moves.
Each leak has an honest control on the same env that must stay clean.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spade_envs.design.hint_reading import hint_says, tokens
from spade_envs.design.leak_replay import swapped
from spade_envs.design.measure import vet_hint_on_seeds
from spade_envs.design.number_words import spoken_numbers
from spade_envs.sandbox import SandboxConfig, WorkerPool

SEEDS = [11, 12]  # two seeds tell a constant from an instance value
REPLAY_ENVS = json.loads((Path(__file__).parents[1] / "data" / "leak_replay_cases.json").read_text())["envs"]

LEVERS = """
class LeverEnv:
    max_turns = 6

    def reset(self, seed=None):
        self.pulled = None
        return "Six levers, numbered 1 to 6, and a door. Commands: pull N, open.", {}

    def step(self, action):
        w = action.strip().lower().split()
        if len(w) == 2 and w[0] == "pull":
            self.pulled = w[1]
            return "Clunk.", 0.0, False, False, {}
        if w == ["open"]:
            return ("Open!", 1.0, True, False, {}) if self.pulled == "LEVER" else ("Stuck.", 0.0, True, False, {})
        return "Unknown.", 0.0, False, False, {}

    def solution(self):
        return ["pull LEVER", "open"]
"""

KEYPAD = """
import unicodedata

class KeypadEnv:
    max_turns = 6

    def reset(self, seed=None):
        self.said = False
        return "A guard, a keypad. Words: alpha, bravo, delta. Codes: 1234, 4821, 7777. Commands: say W, enter N.", {}

    def step(self, action):
        w = unicodedata.normalize("NFKC", action).strip().lower().split()
        if len(w) == 2 and w[0] == "say":
            self.said = w[1] == "bravo"
            return "The guard nods.", 0.0, False, False, {}
        if len(w) == 2 and w[0] == "enter" and w[1].isdecimal():
            won = self.said and int(w[1]) == 4821
            return ("Open!", 1.0, True, False, {}) if won else ("Buzz.", 0.0, True, False, {})
        return "Unknown.", 0.0, False, False, {}

    def solution(self):
        return ["say WORD", "enter CODE"]
"""

SPLIT_GAME = """
class SplitDialEnv:
    max_turns = 6

    def reset(self, seed=None):
        self.parts = []
        return "A safe with a two-part dial. Commands: dial N (twice), open.", {}

    def step(self, action):
        w = action.strip().lower().split()
        if len(w) == 2 and w[0] == "dial":
            self.parts.append(w[1])
            return "Click.", 0.0, False, False, {}
        if w == ["open"]:
            return ("Open!", 1.0, True, False, {}) if self.parts == ["48", "21"] else ("Shut.", 0.0, True, False, {})
        return "Unknown.", 0.0, False, False, {}

    def solution(self):
        return ["dial 48", "dial 21", "open"]
"""

TIP = '''
from spade_envs.envs.tooluse import Instruction, ToolUseEnv, tool_call


class TipEnv(ToolUseEnv):
    max_turns = 6

    def setup(self):
        self.total = round(self.rng.uniform(20, 90), 2)
        self.paid = None
        return Instruction(text="Pay the dinner bill with the house tip.", state=lambda: self.paid == RATE)

    def tool_bill(self) -> str:
        """Show the bill."""
        return f"Total ${self.total:.2f}."

    def tool_pay(self, amount: float, tip_rate: float) -> str:
        """Pay the bill.

        Args:
            amount: the bill total.
            tip_rate: the tip as a rate.
        """
        self.paid = tip_rate
        return "Paid."

    def solution(self):
        return [tool_call("bill"), tool_call("pay", amount=self.total, tip_rate=RATE), "<answer>Paid.</answer>"]
'''

CENTS = '''
from spade_envs.envs.tooluse import Instruction, ToolUseEnv, tool_call


class CentsRefundEnv(ToolUseEnv):
    max_turns = 6

    def setup(self):
        self.refunded = None
        return Instruction(text="Refund my broken kettle.", state=lambda: self.refunded == 1999)

    def tool_orders(self) -> str:
        """List the customer's orders."""
        return "kettle, delivered broken"

    def tool_refund(self, amount_cents: int) -> str:
        """Refund the customer.

        Args:
            amount_cents: the amount in cents.
        """
        self.refunded = amount_cents
        return "Refunded."

    def solution(self):
        return [tool_call("orders"), tool_call("refund", amount_cents=1999), "<answer>Refunded.</answer>"]
'''

SPLIT_TOOLS = '''
from spade_envs.envs.tooluse import Instruction, ToolUseEnv, tool_call


class SafeEnv(ToolUseEnv):
    max_turns = 6

    def setup(self):
        self.parts = []
        return Instruction(text="Open the safe.", state=lambda: self.parts == [48, 21])

    def tool_dial(self, part: int) -> str:
        """Turn the dial to one part of the code.

        Args:
            part: a two-digit part.
        """
        self.parts.append(part)
        return "Click."

    def solution(self):
        TURNS
'''


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(SandboxConfig(call_timeout_s=5.0, soft_timeout_s=2.0, pool_size=1)) as p:
        yield p


def vet(source: str, hint: str, pool: WorkerPool, setting: str) -> str | None:
    """Why the pipeline's vetting rejects ``hint`` as a leak, or ``None``; any other failure is a broken case."""
    vetting = vet_hint_on_seeds(source, hint, pool, setting, SEEDS)
    assert vetting.failure in (None, "hint_leak"), (vetting.failure, vetting.reason)
    return vetting.reason if vetting.failure else None


@pytest.mark.parametrize(
    ("lever", "hint"),
    [("3", "Pull the third lever, then open."), ("2", "Press the second lever and open the door."),
     ("4", "Pull fourth from the left, then open.")],
)  # fmt: skip
def test_an_ordinal_naming_the_needed_value_is_a_leak(lever, hint, pool):
    why = vet(LEVERS.replace("LEVER", lever), hint, pool, "games")
    assert why is not None and "no longer wins" in why, why


@pytest.mark.parametrize(
    ("lever", "hint"),
    [("1", "Pull each lever first and listen, then open."), ("2", "Listen to every lever; opening is the second step."),
     ("3", "Try the levers in order and open in the third turn at the latest."),
     ("2", "Read the second clue of this advice: listen to each lever before you open."),
     ("3", "Mind the second tip, then the third: listen to each lever, then open.")],
)  # fmt: skip
def test_an_ordinal_of_the_procedure_is_no_leak(lever, hint, pool):
    assert vet(LEVERS.replace("LEVER", lever), hint, pool, "games") is None


def test_a_percentage_naming_the_needed_rate_is_a_leak(pool):
    why = vet(TIP.replace("RATE", "0.15"), "The house tip is fifteen per cent.", pool, "tool_use")
    assert why is not None and "0.15" in why, why
    # the other ways to write the rate are the same reading (one sandbox vet above shows the path end to end)
    for hint in ["Tip 15%.", "Tip 15 percent.", "Set the rate to zero point one five.", "Tip \uff11\uff15\uff05."]:
        assert hint_says(hint)(tokens("0.15")) and hint_says(hint)(tokens("15")), hint


def test_a_percentage_the_solution_does_not_need_is_no_leak(pool):
    assert vet(TIP.replace("RATE", "0.15"), "Read the bill first; never tip more than 30%.", pool, "tool_use") is None


@pytest.mark.parametrize(
    ("word", "code", "hint"),
    [("bravo", "\uff14\uff18\uff12\uff11", "Enter 4821 after greeting."),
     ("bravo", "\u0664\u0668\u0662\u0661", "Enter 4821 after greeting."),
     ("\uff42\uff52\uff41\uff56\uff4f", "4821", "Greet with bravo, then enter the code.")],
)  # fmt: skip
def test_a_games_replay_swaps_a_value_the_solution_writes_in_another_script(word, code, hint, pool):
    # both values are constants shown among distractors, so only the replay can tell the hint hands one over
    source = KEYPAD.replace("WORD", word).replace("CODE", code)
    why = vet(source, hint, pool, "games")
    assert why is not None and "no longer wins" in why, why


@pytest.mark.parametrize(
    ("env", "hint"),
    [("g_passphrase", "The passphrase is M A R I G O L D."), ("g_archive", "Speak o-r-c-h-i-d at the door."),
     ("g_passphrase", "Tell the guard mari-gold.")],
)  # fmt: skip
def test_a_word_spelled_letter_by_letter_is_a_leak(env, hint, pool):
    why = vet(REPLAY_ENVS[env]["source"], hint, pool, "games")
    assert why is not None, hint


def test_a_number_written_in_pieces_is_a_leak(pool):
    source = KEYPAD.replace("WORD", "bravo").replace("CODE", "4821")
    why = vet(source, "Greet with the word, then enter 48-21.", pool, "games")
    assert why is not None and "no longer wins" in why, why


def test_a_move_is_swapped_by_the_value_it_reads_as():
    # a rate reads as .15 (leading zero dropped) and a code in fullwidth digits as 4821: both are found and swapped
    # for another value of the same shape, never for letters
    assert swapped("set rate 0.15", (".15",)) == "set rate 5.60"
    assert swapped("enter \uff14\uff18\uff12\uff11 now", ("4821",)) == "enter 9376 now"
    assert swapped("pay 1,250 now", ("1250",)) == "pay 6,705 now"


def test_single_letters_that_spell_nothing_needed_are_no_leak(pool):
    source = REPLAY_ENVS["g_passphrase"]["source"]
    assert vet(source, "Inspect clues 1 to 4 first; the code reads a b c d in clue order.", pool, "games") is None


def test_cents_in_words_are_the_amount(pool):
    # the call carries 1999 (cents); the labelled set has the words against a call carrying 19.99 dollars
    why = vet(CENTS, "Refund nineteen dollars and ninety-nine cents.", pool, "tool_use")
    assert why is not None and "no longer wins" in why, why
    for hint in ["Refund $19 and 99 cents.", "Refund 19 dollars 99 cents.", "nineteen point nine nine"]:
        assert hint_says(hint)(tokens("19.99")), hint


def test_an_honest_amount_hint_in_words_is_no_leak(pool):
    assert vet(CENTS, "Refund the full price in cents; a few cents off is wrong.", pool, "tool_use") is None


@pytest.mark.parametrize("same_turn", [False, True])
def test_a_number_split_over_two_tool_calls_is_a_leak(same_turn, pool):
    first, second = 'tool_call("dial", part=48)', 'tool_call("dial", part=21)'
    turns = f'["\\n".join([{first}, {second}])' if same_turn else f"[{first}, {second}"
    source = SPLIT_TOOLS.replace("TURNS", f'return {turns}, "<answer>Open.</answer>"]')
    why = vet(source, "The code is 4821.", pool, "tool_use")
    assert why is not None and "no longer wins" in why, why
    if same_turn:  # the parts in another order are another number
        assert vet(source, "The code is 2148; dial it in two parts.", pool, "tool_use") is None


def test_a_number_split_over_two_moves_is_a_leak(pool):
    why = vet(SPLIT_GAME, "Dial 4821 in two halves, then open.", pool, "games")
    assert why is not None and "no longer wins" in why, why
    assert vet(SPLIT_GAME, "Dial the code in two halves, then open.", pool, "games") is None


def test_an_ordinal_after_a_number_word_ends_the_number_or_is_an_adverb():
    assert spoken_numbers(tokens("the twenty-first slot, one hundred and fifth")) == ("the", "21", "slot", "105")
    # "first" after a digit word is the adverb, not a digit: "four first" is not 41
    assert spoken_numbers(tokens("open door four first")) == ("open", "door", "four", "first")
