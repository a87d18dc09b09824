"""Issue 38: the packages are stages, and imports run only downward (docs/architecture.md).

Every ``import`` of our own code counts, at module level or inside a function (a lazy import is still an arrow).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from spade_envs.envs.public_names import PUBLIC_NAMES

ROOT = Path(__file__).resolve().parents[1]

#: Each room's rank: a module may import its own room or a room of lower rank, never a sibling of the same rank.
#: Keep in step with the picture in docs/architecture.md.
RANKS: dict[str, int] = {
    "spade_envs.envs": 0,
    "spade_envs.sandbox": 1,
    "spade_envs.builtin": 1,
    "spade_envs.rlve": 1,
    "spade_envs.browse": 1,
    "spade_envs.play": 2,
    "spade_envs.design": 3,
    "spade_envs.curriculum": 4,
    "spade_envs.simulate": 5,
    "spade_envs.evaluation": 5,
    "spade_envs.cli": 6,
    "recipe.spade.cpu": 7,
    "recipe.spade": 8,
    "recipe.spade.laptop": 9,
}
#: Package roots that only gather the public names of the rooms below them.
ROOTS = {"spade_envs"}


def modules() -> dict[str, Path]:
    found = {}
    for base in ("spade_envs", "recipe/spade"):
        for path in (ROOT / base).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def room(module: str) -> str:
    best = max((r for r in RANKS if module == r or module.startswith(r + ".")), key=len, default=None)
    assert best is not None or module in ROOTS, f"{module} belongs to no room: add it to RANKS and the docs"
    return best or module


def imports() -> dict[str, set[str]]:
    mods = modules()

    def resolve(target: str) -> str | None:
        for public, real in PUBLIC_NAMES.items():  # generated code's import name of the tool-use base
            if target == public or target.startswith(public + "."):
                target = real + target[len(public) :]
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target or None

    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                if target.startswith(("spade_envs", "recipe.spade")) and (found := resolve(target)) and found != name:
                    edges[name].add(found)
    return edges


def test_no_module_but_curriculum_stands_at_the_top_of_spade_envs():
    top = sorted(p.name for p in (ROOT / "spade_envs").glob("*.py"))
    assert top == ["__init__.py", "curriculum.py"]


def test_every_module_has_a_room_and_imports_run_only_downward():
    upward = []
    for module, targets in sorted(imports().items()):
        if module in ROOTS:
            continue
        source = room(module)
        for target in sorted(targets):
            dest = room(target)
            if dest in ROOTS:  # a parent package: ``import spade_envs`` or ``from recipe.spade import ...``
                dest = target
            if dest != source and (dest in ROOTS or RANKS[dest] >= RANKS[source]):
                upward.append(f"{module} ({source}) -> {target} ({dest})")
    assert not upward, "imports that run upward or sideways:\n" + "\n".join(upward)


def test_no_import_circle():
    edges = imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(modules()):
        if module not in index:
            visit(module)
    assert not circles, f"import circles: {circles}"
