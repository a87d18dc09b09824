"""Base class for tool-use environments: tools as methods, user instructions with state predicates.

A designer writes a subclass of :class:`ToolUseEnv` that

* defines tools as methods ``tool_<name>(self, **kwargs) -> str`` with annotated parameters and a Google-style
  docstring (first line: what the tool does; ``Args:`` section: one line per parameter). :meth:`ToolUseEnv.tools`
  derives the OpenAI-format schemas from them, so names and types cannot drift apart. ``typing.Literal`` gives
  an ``enum``; a parameter with a default is optional. A tool reports an expected failure by raising
  :class:`~spade_envs.envs.errors.ToolError`; the agent sees ``Error: <message>`` and the episode goes on;
* implements :meth:`ToolUseEnv.setup`: build the hidden world from ``self.rng`` and return the user's request as
  one :class:`Instruction` or, in multi-turn instruction mode, 3-5 of them, revealed one at a time;
* implements ``solution()``: the raw agent turns (see :func:`tool_call`) that win, computed from the world state.

The agent acts natively (the runtime parses its tool calls and calls :meth:`ToolUseEnv.step_calls`) or in raw
text (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, handled by :meth:`ToolUseEnv.step`),
and finishes each request with ``<answer>...</answer>``. An instruction with a ``state`` predicate is complete as
soon as the world satisfies it (checked after every tool call); one with an ``answer`` predicate is complete
when the agent answers correctly. When every instruction is complete the next ``<answer>`` wins (reward 1) if
every state predicate still holds. An answer before that ends the episode with the fraction completed.
"""

from __future__ import annotations

import inspect
import json
import random
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spade_envs.envs.contract import StepResult
from spade_envs.envs.errors import ToolError

__all__ = ["Instruction", "ToolError", "ToolUseEnv", "match_answer", "parse_agent_text", "tool_call"]

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
ALL_DONE = "All requests are complete. Reply <answer>done</answer> to finish."


@dataclass(frozen=True)
class Instruction:
    """One user request. ``state()`` is true once the world reflects it; ``answer(text)`` checks a reply.

    Give at least one of the two. With both, the request needs the right reply *and* the state.
    """

    text: str
    state: Callable[[], bool] | None = None
    answer: Callable[[str], bool] | None = None

    def __post_init__(self) -> None:
        if self.state is None and self.answer is None:
            raise ValueError(f"instruction {self.text!r} needs a state predicate, an answer check, or both")


def tool_call(name: str, /, **arguments: Any) -> str:
    """Render one raw-text tool call, the form ``solution()`` returns: ``<tool_call>{json}</tool_call>``."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def match_answer(given: str, expected: str | float) -> bool:
    """Case- and space-insensitive text match, or numeric match within 0.01 after dropping ``$``, ``,`` and ``%``."""
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        try:
            return abs(float(re.sub(r"[\s$,%]", "", given)) - float(expected)) <= 0.01
        except ValueError:
            return False
    norm = lambda s: " ".join(str(s).lower().split()).strip(" .")  # noqa: E731
    return norm(given) == norm(expected)


def parse_agent_text(text: str) -> tuple[list[tuple[str, Any]], str | None, list[str]]:
    """Split raw agent text into ``(tool calls, answer or None, parse errors)``.

    Each call is ``(name, arguments)`` exactly as written; :meth:`ToolUseEnv.call_tool` checks them.
    """
    calls: list[tuple[str, Any]] = []
    errors: list[str] = []
    for body in _TOOL_CALL.findall(text):
        try:
            payload = json.loads(body)
        except json.JSONDecodeError as exc:
            errors.append(f"could not parse tool call as JSON ({exc.msg} at char {exc.pos})")
            continue
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            errors.append('a tool call must be a JSON object {"name": <tool>, "arguments": {...}}')
            continue
        calls.append((payload["name"], payload.get("arguments", {})))
    answers = _ANSWER.findall(text)
    return calls, (answers[-1].strip() if answers else None), errors


def _json_schema(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):  # ``X | None``: optionality comes from the default value
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _json_schema(members[0])
    if origin is typing.Literal:
        values = list(typing.get_args(annotation))
        return {"type": _JSON_TYPES.get(type(values[0]), "string"), "enum": values}
    if origin in (list, tuple):
        args = typing.get_args(annotation)
        return {"type": "array", "items": _json_schema(args[0]) if args else {}}
    if origin is dict or annotation is dict:
        return {"type": "object"}
    if annotation is list:
        return {"type": "array"}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    raise TypeError(f"unsupported tool parameter type {annotation!r}; use str, int, float, bool, list, dict, Literal")


def _docstring_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    lines = inspect.cleandoc(doc or "").splitlines()
    summary = lines[0].strip() if lines else ""
    params: dict[str, str] = {}
    in_args = False
    for line in lines[1:]:
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
        elif in_args and re.match(r"^\s+(\w+)\s*(\(.*?\))?\s*:", line):
            name, rest = line.strip().split(":", 1)
            params[name.split("(")[0].strip()] = rest.strip()
        elif in_args and line.strip() and not line.startswith(" "):
            in_args = False
    return summary, params


def _signature(function: dict[str, Any]) -> str:
    """``- name(a: string, b?: integer): summary`` -- what a raw-text agent needs to call the tool."""
    params = function["parameters"]
    args = ", ".join(
        f"{k}{'' if k in params['required'] else '?'}: {'|'.join(map(str, v['enum'])) if 'enum' in v else v['type']}"
        for k, v in params["properties"].items()
    )
    return f"- {function['name']}({args}): {function['description']}"


def _type_ok(value: Any, schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    checks: dict[str, Callable[[Any], bool]] = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    if kind in checks and not checks[kind](value):
        return False
    return "enum" not in schema or value in schema["enum"]


class ToolUseEnv:
    """Base of every tool-use environment; see the module docstring for what a subclass provides."""

    max_turns: int = 20
    #: The domain the world models (retail, travel, telecom, banking, calendar, filesystem, cart, CRM, ...).
    domain: str = ""

    # -- what a subclass writes ---------------------------------------------------------------------------------
    def setup(self) -> Instruction | list[Instruction]:
        """Build the hidden world from ``self.rng`` and return the user's request(s)."""
        raise NotImplementedError(f"{type(self).__name__} must implement setup()")

    def solution(self) -> list[str]:
        """Raw agent turns (tool calls via :func:`tool_call`, then ``<answer>...</answer>``) that win."""
        raise NotImplementedError(f"{type(self).__name__} must implement solution()")

    # -- the contract -------------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode: seed ``self.rng``, build the world, show the first request and the tools."""
        self.rng = random.Random(seed)
        self.turn = 0
        made = self.setup()
        self._instructions: list[Instruction] = [made] if isinstance(made, Instruction) else list(made)
        if not self._instructions:
            raise ValueError(f"{type(self).__name__}.setup() returned no instructions")
        self._completed = 0
        self._finished = False
        listing = "\n".join(_signature(t["function"]) for t in self.tools())
        obs = (
            f"{self._instructions[0].text}\n\nTools:\n{listing}\n\n"
            'Call a tool with <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>. '
            "When the request is complete, reply <answer>...</answer>."
        )
        return obs, self._info()

    def step(self, action: str) -> StepResult:
        """One agent turn in raw text: run its ``<tool_call>`` blocks, then judge its ``<answer>``, if any."""
        calls, answer, errors = parse_agent_text(action)
        return self._turn(calls, answer, errors)

    def step_calls(self, calls: list[dict[str, Any]], answer: str | None = None) -> StepResult:
        """One agent turn of natively parsed calls (``{"name", "arguments"}`` dicts), optionally with an answer."""
        parsed = [(c.get("name", ""), c.get("arguments", {})) for c in calls]
        return self._turn(parsed, answer, [])

    def tools(self) -> list[dict[str, Any]]:
        """OpenAI-format schemas of every ``tool_<name>`` method, derived from signatures and docstrings."""
        cls = type(self)
        if "_tool_schemas" not in cls.__dict__:  # per class, not inherited: derived once, used on every call
            cls._tool_schemas = self._derive_tool_schemas()
        return cls._tool_schemas

    def _derive_tool_schemas(self) -> list[dict[str, Any]]:
        schemas = []
        for attr in sorted(dir(type(self))):
            if not attr.startswith("tool_") or not callable(getattr(type(self), attr)):
                continue
            method = getattr(self, attr)
            hints = typing.get_type_hints(method)
            summary, docs = _docstring_parts(method.__doc__)
            properties: dict[str, Any] = {}
            required: list[str] = []
            for name, param in inspect.signature(method).parameters.items():
                if name not in hints:
                    raise TypeError(f"{type(self).__name__}.{attr}: parameter {name!r} needs a type annotation")
                properties[name] = {**_json_schema(hints[name]), "description": docs.get(name, "")}
                if param.default is inspect.Parameter.empty:
                    required.append(name)
            schemas.append(
                {
                    "type": "function",
                    "function": {
                        "name": attr[len("tool_") :],
                        "description": summary,
                        "parameters": {"type": "object", "properties": properties, "required": required},
                    },
                }
            )
        return schemas

    def call_tool(self, name: str, arguments: Any) -> str:
        """Run one tool call; malformed calls get a helpful ``Error: ...`` string, never an exception."""
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in self.tools()}
        if name not in schemas:
            return f"Error: unknown tool {name!a}. Available tools: {', '.join(sorted(schemas))}."
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError:
                return f"Error: arguments of {name} must be a JSON object, got unparseable text."
        if not isinstance(arguments, dict):
            return f"Error: arguments of {name} must be a JSON object, got {type(arguments).__name__}."
        params = schemas[name]
        unknown = sorted(set(arguments) - set(params["properties"]))
        if unknown:
            return f"Error: {name} has no parameter {unknown[0]!a}. Parameters: {', '.join(params['properties'])}."
        missing = [p for p in params["required"] if p not in arguments]
        if missing:
            return f"Error: {name} is missing required parameter {missing[0]!r}."
        for key, value in arguments.items():
            schema = params["properties"][key]
            if not _type_ok(value, schema):
                allowed = f" one of {schema['enum']}" if "enum" in schema else f" of type {schema['type']}"
                return f"Error: parameter {key!r} of {name} must be{allowed}, got {json.dumps(value)}."
        try:
            result = getattr(self, "tool_" + name)(**arguments)
        except ToolError as exc:
            return f"Error: {exc}"
        return str(result) + self._advance_by_state()

    # -- internals ----------------------------------------------------------------------------------------------
    def _info(self) -> dict[str, Any]:
        return {
            "instruction_index": self._completed,
            "num_instructions": len(self._instructions),
            "completed": self._completed,
        }

    def _advance_by_state(self) -> str:
        """Advance past state-only instructions that now hold; return what the user says next, if anything."""
        said = ""
        while self._completed < len(self._instructions):
            current = self._instructions[self._completed]
            if current.answer is not None or current.state is None or not current.state():
                break
            self._completed += 1
            said += "\n\n" + self._next_message()
        return said

    def _next_message(self) -> str:
        if self._completed < len(self._instructions):
            return "[User] " + self._instructions[self._completed].text
        return ALL_DONE

    def _turn(self, calls: list[tuple[str, Any]], answer: str | None, errors: list[str]) -> StepResult:
        if self._finished:
            return "The episode is over.", 0.0, True, False, self._info()
        self.turn += 1
        outputs = [f"Error: {e}" for e in errors] + [self.call_tool(n, a) for n, a in calls]
        obs = "\n\n".join(f"<tool_response>\n{o}\n</tool_response>" for o in outputs)
        reward, terminated = 0.0, False
        if answer is not None:
            reward, terminated, said = self._judge(answer)
            obs = (obs + "\n\n" + said).strip()
        elif not calls and not errors:
            obs = (
                'No tool call or answer found. Call a tool with <tool_call>{"name": "<tool>", "arguments": {...}}'
                "</tool_call>, or finish with <answer>...</answer>."
            )
        self._finished = terminated
        truncated = not terminated and self.turn >= self.max_turns
        info = self._info() | {"success": terminated and reward >= 1.0}
        return obs, reward, terminated, truncated, info

    def _judge(self, answer: str) -> tuple[float, bool, str]:
        """Return ``(reward, terminated, message)`` for an ``<answer>``."""
        total = len(self._instructions)
        if self._completed == total:
            holding = sum(1 for i in self._instructions if i.state is None or i.state())
            if holding == total:
                return 1.0, True, "All requests completed."
            return holding / total, True, "Some completed requests were undone before the end."
        current = self._instructions[self._completed]
        if current.answer is not None and current.answer(answer) and (current.state is None or current.state()):
            self._completed += 1
            if self._completed == total:
                return self._judge(answer)
            return 0.0, False, self._next_message() + self._advance_by_state()
        return self._completed / total, True, "That does not complete the request. The episode ends."
