"""Review 3: a value written with look-alike letters of another script is the value, for both leak checks.

A hint that spells the needed password ``swordfish`` as Cyrillic ``ѕwоrdfіѕh`` reads as ``swordfish`` to the
agent, so the token rules (:mod:`spade_envs.design.leaks`) and the replay (:mod:`spade_envs.design.leak_replay`) must
read it so
too (:mod:`spade_envs.design.confusables`). Honest hints written in those scripts must stay clean.
"""

from __future__ import annotations

import pytest

from spade_envs.design.confusables import fold
from spade_envs.design.hint_reading import hint_says, tokens
from spade_envs.design.leaks import hint_leaks
from spade_envs.design.measure import vet_hint_on_seeds
from spade_envs.envs.tooluse import tool_call
from spade_envs.sandbox import SandboxConfig, WorkerPool

SEEDS = [11, 12]

#: The password is a constant (the same on every seed), so only the replay can tell the hint hands it over.
VAULT = """
class VaultEnv:
    max_turns = 4

    def reset(self, seed=None):
        self.logged_in, self.done = False, False
        return "A vault. A plaque reads: my name is a fish that carries a blade. Log in with login WORD, then open.", {}

    def step(self, action):
        if self.done:
            return "Closed.", 0.0, True, False, {}
        if action.strip() == "login swordfish":
            self.logged_in = True
            return "Logged in.", 0.0, False, False, {}
        if action.strip() == "open" and self.logged_in:
            self.done = True
            return "The vault opens.", 1.0, True, False, {}
        self.done = action.strip().startswith("login")
        return "Denied.", 0.0, self.done, False, {}

    def solution(self):
        return ["login swordfish", "open"]
"""

#: ``swordfish`` in look-alike letters: the agent reads each as the word.
LOOKALIKES = {
    "cyrillic": "\u0455w\u043erdf\u0456\u0455h",  # dze, o, byelorussian i
    "greek": "sw\u03bfrdf\u03b9sh",  # omicron, iota
    "armenian": "sw\u0585rdfis\u0570",  # oh, ho
    "cherokee_lisu_greek_capitals": "\u13da\u13b3\u039f\u13a1\u13a0\ua4dd\u13a5\u13da\u13bb",
    "latin_small_capitals": "\ua731\u1d21\u1d0frdf\u026a\ua731h",
    "accents": "sw\u00f3rdf\u00ed\u0161h",
    "combining_accents": "swo\u0301rdfi\u0308sh",
    "stroked_letters": "sw\u00f8rdfish",
    "zero_width_inside": "sword\u200bfi\u00adsh",
}


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(SandboxConfig(call_timeout_s=5.0, soft_timeout_s=2.0, pool_size=1)) as p:
        yield p


@pytest.mark.parametrize("word", LOOKALIKES.values(), ids=LOOKALIKES.keys())
def test_a_word_in_lookalike_letters_reads_as_the_word(word):
    assert tokens(f"The password is {word}.") == ("the", "password", "is", "swordfish")
    assert hint_says(f"Log in with {word}, then open.")(("swordfish",))


def test_an_i_shaped_letter_also_reads_as_l():
    # Cyrillic palochka and Greek iota capitals look like both I and l: "heӀӀo" is hello, "ΙNDEX" is index
    assert hint_says("Say he\u04c0\u04c0o to the guard.")(("hello",))
    assert hint_says("Open the \u0399NDEX.")(("index",))


def test_the_look_alike_password_of_the_review_is_a_leak_in_the_replay(pool):
    hint = f"The password is {LOOKALIKES['cyrillic']}: log in first, then open the vault."
    vetting = vet_hint_on_seeds(VAULT, hint, pool, "games", SEEDS)
    assert vetting.failure == "hint_leak" and "no longer wins" in vetting.reason, vetting.reason
    honest = "Read the plaque: the password is a fish named after a blade. Log in, then open the vault."
    assert vet_hint_on_seeds(VAULT, honest, pool, "games", SEEDS).failure is None


def test_a_look_alike_hidden_value_is_a_leak_in_the_token_rules():
    why = hint_leaks("Say \u043erc\u04bbid to the guard.", "games", solution_actions=["say orchid"],
                     visible_text="A guard.", other_solutions=[["say tulip"]])  # fmt: skip
    assert why is not None and "orchid" in why, why
    call = tool_call("pay", vendor="Northwind", amount=120)
    why = hint_leaks("Pay N\u043erthw\u0456nd.", "tool_use", solution_actions=[call], visible_text="{}")
    assert why is not None and "Northwind" in why, why


@pytest.mark.parametrize(
    "hint",
    ["Прочитайте табличку: пароль — рыба, названная в честь клинка. Войдите, затем откройте хранилище.",
     "Διαβάστε την πινακίδα: ο κωδικός είναι ένα ψάρι με όνομα λεπίδας. Συνδεθείτε και ανοίξτε.",
     "Կարդացեք ցուցանակը. գաղտնաբառը ձուկ է, որը կրում է սայր։ Մուտք գործեք, ապա բացեք։"],
    ids=["russian", "greek", "armenian"],
)  # fmt: skip
def test_an_honest_hint_in_another_script_is_no_leak(hint, pool):
    vetting = vet_hint_on_seeds(VAULT, hint, pool, "games", SEEDS)
    assert vetting.failure is None, vetting.reason


def test_folding_keeps_ascii_digits_and_other_letters():
    # ASCII is what the env reads: never re-read (l, I, 1, 0, O and rn stay); digits of other scripts stay digits
    assert fold("rn l I 1 0 O") == "rn l I 1 0 O"
    assert fold("\u0664\u0668 \u0437 \u0431") == "\u0664\u0668 \u0437 \u0431"  # Arabic-Indic 48, ze, be: no letters
    assert fold("\u0439\u0451 \u043a\u043b\u044e\u0447") == "\u0439e \u043a\u043b\u044e\u0447"  # й stays; ё is e
    assert fold("\uff33\uff37\U0001d428\U0001d42b\U0001d41d") == "SWord"  # NFKC: fullwidth and mathematical bold
