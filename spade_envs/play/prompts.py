"""The agent's prompt: how it is told to play, and where a privileged hint goes (hinted plays only).

Its text lives in ``spade_envs/play/templates/`` (``string.Template``: ``${name}``, ``$$`` for a dollar). The same
checked renderer serves the designer's templates (``spade_envs.design.prompts``), each package its own folder.
"""

from __future__ import annotations

import string
from importlib import resources

from spade_envs.envs.spec import SETTINGS

__all__ = ["Message", "TemplateFolder", "agent_messages", "agent_system_prompt", "first_turn", "render", "with_hint"]

Message = dict[str, str]


class TemplateFolder:
    """The ``templates/`` folder of one package, rendered with placeholders checked both ways."""

    def __init__(self, package: str) -> None:
        self.package = package
        self._loaded: dict[str, string.Template] = {}

    def template(self, name: str) -> string.Template:
        """The parsed ``templates/<name>.md`` (read once)."""
        if name not in self._loaded:
            self._loaded[name] = self._read(name)
        return self._loaded[name]

    def _read(self, name: str) -> string.Template:
        path = resources.files(self.package).joinpath("templates").joinpath(f"{name}.md")
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise FileNotFoundError(f"prompt template {name}.md is missing from {self.package}/templates") from None
        return string.Template(text.removesuffix("\n"))

    def render(self, name: str, **values: str) -> str:
        """Render ``templates/<name>.md``. Values must match its placeholders exactly, so templates and code agree."""
        template = self.template(name)
        expected = _identifiers(name, template)
        if set(values) != expected:
            raise ValueError(
                f"template {name}.md takes {sorted(expected)}; got {sorted(values)} "
                f"(missing {sorted(expected - set(values))}, unexpected {sorted(set(values) - expected)})"
            )
        return template.substitute(values)


def _identifiers(name: str, template: string.Template) -> set[str]:
    """Placeholder names in ``template`` (``Template.get_identifiers`` needs Python 3.11)."""
    found = set()
    for match in template.pattern.finditer(template.template):
        if match.group("invalid") is not None:
            offset = match.start("invalid")
            raise ValueError(f"invalid placeholder in template {name}.md at offset {offset}; write $$ for $")
        placeholder = match.group("named") or match.group("braced")
        if placeholder:
            found.add(placeholder)
    return found


_TEMPLATES = TemplateFolder(__package__)


def render(name: str, **values: str) -> str:
    """Render ``spade_envs/play/templates/<name>.md`` (placeholders checked both ways)."""
    return _TEMPLATES.render(name, **values)


def _check_setting(setting: str) -> None:
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; known: {', '.join(SETTINGS)}")


def agent_system_prompt(setting: str) -> str:
    r"""How the agent plays: games, reason then command in ``\boxed{}``; tool use, call tools, then ``<answer>``."""
    _check_setting(setting)
    return render(f"agent_{setting}_system")


def with_hint(observation: str, hint: str) -> str:
    r"""Append ``"\n\nHINT: <hint>"`` to an observation. Use it on the first observation of hinted plays only."""
    if not hint.strip():
        raise ValueError("hint is empty")
    return render("hint_suffix", observation=observation, hint=hint.strip())


def first_turn(setting: str, observation: str) -> str:
    """The agent's first user message: the environment's first observation in the setting's wrapping."""
    _check_setting(setting)
    return render(f"agent_{setting}_first_turn", observation=observation)


def agent_messages(setting: str, first_observation: str, hint: str | None = None) -> list[Message]:
    """The agent's opening messages; ``hint`` (hinted plays only) is appended to the observation before wrapping."""
    observation = first_observation if hint is None else with_hint(first_observation, hint)
    return [
        {"role": "system", "content": agent_system_prompt(setting)},
        {"role": "user", "content": first_turn(setting, observation)},
    ]
