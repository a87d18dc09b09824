"""The designer's, hint writer's and auditor's prompts, rendered from the templates in ``templates/`` beside this.

All prompt text lives in the template files (``string.Template`` syntax: ``${name}``, ``$$`` for a dollar), so a
prompt can be read and edited in one place and this module holds only the logic: which template, which values,
and argument checks. Each renderer returns chat messages, ``[{"role": ..., "content": ...}]``.

Roles: the **designer** writes an environment from a document (:func:`designer_messages`); the **hint writer**
reads only the environment's source (:func:`hint_messages`). The **agent**'s prompt lives where the agent is played
(``spade_envs.play.prompts``).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from spade_envs.builtin import builtin_source
from spade_envs.design.ast_hash import without_comments
from spade_envs.envs.skills import DOMAINS, SKILLS
from spade_envs.envs.spec import SETTINGS
from spade_envs.play.prompts import Message, TemplateFolder

__all__ = [
    "TASK_VARIANTS",
    "VARIANT_WEIGHTS",
    "Exemplar",
    "audit_messages",
    "audit_verdict",
    "builtin_example",
    "exemplar_cuts",
    "concept_ideas",
    "designer_messages",
    "hint_messages",
    "render",
]

_TEMPLATES = TemplateFolder(__package__)

#: Tool-use task variants, each described to the designer by ``templates/variant_<name>.md``.
TASK_VARIANTS = ("execute", "read_then_write", "missing_parameter", "irrelevant_request")
#: The reference's sampling weights of the variants (3:2:1:1); the designer loop may use its own.
VARIANT_WEIGHTS: dict[str, float] = {
    "execute": 3 / 7,
    "read_then_write": 2 / 7,
    "missing_parameter": 1 / 7,
    "irrelevant_request": 1 / 7,
}
#: The built-in shown as the worked example in designer prompts, per setting.
EXAMPLE_BUILTINS = {"games": "VaultCodeEnv", "tool_use": "SmartHomeSceneEnv"}


@dataclass(frozen=True)
class Exemplar:
    """An environment from memory shown to the designer.

    Positives (worked well) are shown with their code; negatives (agents almost always or never won) as one line
    with the reason, so the designer learns what to avoid without copying it.

    Attributes:
        source_snippet: the environment's code (or its start); required for positives.
        skill: the skill it was designed for.
        win_rate: share of agents' no-hint plays of it that were won, in [0, 1].
        regret: the credited regret: hinted minus unhinted (or placebo) win rate.
        kind: ``"positive"`` or ``"negative"``.
        reason: why a negative failed; required for negatives.
    """

    source_snippet: str
    skill: str
    win_rate: float
    regret: float
    kind: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("positive", "negative"):
            raise ValueError(f"exemplar kind must be 'positive' or 'negative', got {self.kind!r}")
        if not 0.0 <= self.win_rate <= 1.0:
            raise ValueError(f"exemplar win_rate must be in [0, 1], got {self.win_rate!r}")
        if not math.isfinite(self.regret):
            raise ValueError(f"exemplar regret must be finite, got {self.regret!r}")
        if self.kind == "positive" and not self.source_snippet.strip():
            raise ValueError("a positive exemplar needs a source_snippet")
        if self.kind == "negative" and not self.reason.strip():
            raise ValueError("a negative exemplar needs a reason")


def render(name: str, **values: str) -> str:
    """Render ``templates/<name>.md``. Values must match its placeholders exactly, so templates and code agree."""
    return _TEMPLATES.render(name, **values)


def _fenced(code: str, language: str = "python") -> str:
    """A fenced code block whose fence is longer than any backtick run inside ``code``."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{code.strip(chr(10))}\n{fence}"


def _section(text: str) -> str:
    """An optional section: empty, or its text followed by the blank line the next heading needs."""
    return text.strip() + "\n\n" if text.strip() else ""


def _check_setting(setting: str) -> None:
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; known: {', '.join(SETTINGS)}")


def _check_choice(kind: str, value: object, known: Sequence[str]) -> None:
    if value not in known:
        raise ValueError(f"unknown {kind} {value!r}; known: {', '.join(known)}")


def builtin_example(setting: str) -> str:
    """Source of the built-in used as the designer's worked example (VaultCodeEnv or SmartHomeSceneEnv)."""
    _check_setting(setting)
    return builtin_source(EXAMPLE_BUILTINS[setting])


def _exemplar_items(exemplars: Sequence[Exemplar]) -> list[str]:
    items = []
    for ex in exemplars:
        if not isinstance(ex, Exemplar):
            raise TypeError(f"exemplars must be Exemplar instances, got {type(ex).__name__}")
        stats = {"skill": ex.skill, "win_rate": f"{ex.win_rate:.2f}"}
        if ex.kind == "positive":
            items.append(
                render("exemplar_positive", **stats, regret=f"{ex.regret:.2f}", code_block=_fenced(ex.source_snippet))
            )
        else:
            items.append(render("exemplar_negative", **stats, reason=" ".join(ex.reason.split())))
    return items


def _exemplar_section(exemplars: Sequence[Exemplar]) -> str:
    items = _exemplar_items(exemplars)
    return _section(render("exemplars", items="\n\n".join(items))) if items else ""


def exemplar_cuts(exemplars: Sequence[Exemplar]) -> list[str]:
    """Texts to remove, in order, from a designer prompt built with ``exemplars`` to drop them one at a time.

    The last exemplar goes first; the last cut removes the section with the first one. A prompt that does not fit
    ``rollout.prompt_length`` even without its document sheds these (``recipe/spade/prompt_fit.py``).
    """
    items = _exemplar_items(exemplars)
    return ["\n\n" + item for item in reversed(items[1:])] + ([_exemplar_section(exemplars[:1])] if items else [])


def designer_messages(
    setting: str,
    document: str | None,
    skill: str,
    *,
    domain: str | None = None,
    variant: str | None = None,
    multi_turn: bool = False,
    exemplars: Sequence[Exemplar] = (),
    example_source: str | None = None,
    concepts: Sequence[str] = (),
) -> list[Message]:
    """The designer's system and user messages.

    Args:
        setting: ``"games"`` or ``"tool_use"``.
        document: the (truncated) corpus document the environment is built from. Required for games; optional
            flavour for tool use (``None`` leaves the section out).
        skill: a skill of ``setting`` (:data:`spade_envs.envs.skills.SKILLS`).
        domain: tool use only, required: one of :data:`spade_envs.envs.skills.DOMAINS`.
        variant: tool use only, required: one of :data:`TASK_VARIANTS`.
        multi_turn: tool use only: ask for 3-5 instructions revealed one at a time.
        exemplars: memory exemplars to show (positives with code, negatives as one line).
        example_source: a complete environment to show as the worked example (see :func:`builtin_example`), or
            ``None`` for no example.
        concepts: games only, used when ``document`` is ``None``: concept ideas (:func:`concept_ideas`) with do's and
            don'ts instead of a document (the paper's no-corpus ablation; show an example the game must differ from).
    """
    _check_setting(setting)
    _check_choice(f"{setting} skill", skill, tuple(SKILLS[setting]))
    if example_source is not None and not example_source.strip():
        raise ValueError("example_source is empty; pass None to leave the example out")
    common = {
        "skill": skill,
        "skill_description": SKILLS[setting][skill],
        "exemplars": _exemplar_section(exemplars),
    }
    if setting == "games":
        if domain is not None or variant is not None or multi_turn:
            raise ValueError("domain, variant and multi_turn apply to tool_use only")
        if document is not None and document.strip():
            grounding = render("designer_games_document", document=document.strip())
        elif concepts:
            grounding = render("designer_games_concepts", concepts="\n".join(f"- {c}" for c in concepts))
        else:
            raise ValueError("games designer prompts need a non-empty document (or concept ideas: the no-corpus mode)")
        example = render("example", kind="game", code_block=_fenced(example_source)) if example_source else ""
        user = render("designer_games_user", **common, grounding=grounding, example=_section(example))
        return [
            {"role": "system", "content": render("designer_games_system")},
            {"role": "user", "content": user},
        ]
    _check_choice("domain", domain, DOMAINS)
    _check_choice("variant", variant, TASK_VARIANTS)
    doc = render("tool_use_document", document=document.strip()) if document and document.strip() else ""
    example = render("example", kind="environment", code_block=_fenced(example_source)) if example_source else ""
    user = render(
        "designer_tool_use_user",
        **common,
        domain=str(domain),
        document_section=_section(doc),
        variant=str(variant),
        variant_description=render(f"variant_{variant}"),
        instruction_mode=render("instructions_multi" if multi_turn else "instructions_single"),
        example=_section(example),
    )
    return [
        {"role": "system", "content": render("designer_tool_use_system")},
        {"role": "user", "content": user},
    ]


def audit_messages(env_source: str) -> list[Message]:
    r"""The optional validator audit of a tool-use env: can its task be completed at all? (``\boxed{yes|no}``)."""
    if not env_source.strip():
        raise ValueError("env_source is empty")
    return [{"role": "user", "content": render("audit_tool_use_user", code_block=_fenced(env_source))}]


def audit_verdict(text: str) -> bool:
    r"""``False`` only when the last ``\boxed{}`` of ``text`` says no: the audit rejects impossible envs only."""
    boxes = re.findall(r"\\boxed\{\s*([A-Za-z]+)\s*\}", text)
    return not (boxes and boxes[-1].lower() == "no")


def concept_ideas(rng: random.Random, k: int = 3) -> list[str]:
    """``k`` distinct concept ideas for a no-corpus games designer prompt (``templates/designer_concepts.txt``)."""
    text = resources.files(__package__).joinpath("templates", "designer_concepts.txt").read_text(encoding="utf-8")
    ideas = [line.strip() for line in text.splitlines() if line.strip()]
    return rng.sample(ideas, min(k, len(ideas)))


def hint_messages(setting: str, env_source: str) -> list[Message]:
    """The hint writer's messages: it sees the environment's code and nothing else (no instance, no document).

    The code comes without comments and docstrings (:func:`~spade_envs.design.ast_hash.without_comments`): what the
    designer
    wrote beside the code could plant an instance's answer for the hint to repeat.
    """
    _check_setting(setting)
    if not env_source.strip():
        raise ValueError("env_source is empty")
    code = without_comments(env_source)
    return [
        {"role": "system", "content": render(f"hint_{setting}_system")},
        {"role": "user", "content": render(f"hint_{setting}_user", code_block=_fenced(code))},
    ]
