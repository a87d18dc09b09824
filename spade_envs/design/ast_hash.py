"""``normalized_ast_hash``: one identity for environment code that differs only in cosmetics.

The designer often re-emits a memory exemplar with new comments, docstrings, formatting or local variable names.
Those copies teach nothing new, so the memory deduplicates them by this hash instead of the raw-text sha256.

Normal form (then the sha256 of ``ast.dump`` without positions):

- comments and formatting vanish with parsing; every statement that is only a string constant (docstrings and
  "comment strings") is removed, an emptied body becoming ``pass`` -- unless the code reads docstrings
  (``__doc__``, ``getdoc``), because then their text is part of what the env does (a game that shows
  ``self.__doc__`` as its rules); the docstring of a ``tool_*`` method always stays: ``ToolUseEnv.tools()`` builds
  the tool description the agent reads from it, so two tools that differ only there do different things;
- inside each function and lambda, its arguments and the names it binds (assignment, ``for``/``with``/``except``
  targets, comprehension targets, walrus, ``match`` captures, ``del``) are renamed ``_v0``, ``_v1``, ... in order of
  first appearance (arguments in signature order, then depth-first source order), with one counter for the whole
  module so that names in different functions never collide; references from nested functions follow the
  rename; ``global`` names are kept. An argument keeps its name when a call anywhere in the module passes that
  name as a keyword (``pay(a=5, b=3)`` binds by name, so ``def pay(a, b)`` and ``def pay(b, a)`` differ) and
  in ``tool_*`` methods (the agent calls tools by parameter name);
- dead code is dropped, in a module that defines an ``*Env`` class: a module-level constant (a name assigned only
  literals, containers and arithmetic of them) that nothing references, and a method of a module class that nothing
  references by name (an attribute, a name or a string anywhere, its own body included), repeated until nothing
  more goes (a dead method may be the only user of another). Never dropped: entry points (``reset``, ``step``,
  ``solution``, ``tools``, ``close``, every member of :class:`~spade_envs.envs.tooluse.ToolUseEnv`: its hooks such as
  ``setup`` and ``_judge``), ``tool_*`` and dunder methods, methods with a decorator other than ``staticmethod``,
  ``classmethod`` and ``property``, methods of a class with a base the module does not define (other than
  ``object`` and ``ToolUseEnv``), a metaclass or a class decorator other than ``dataclass``; and nothing at all in
  a module that looks names up dynamically (``getattr`` and friends with a computed name, ``globals``, ``vars``,
  ``dir``, ``eval``, ``exec``, ``__dict__``, ``inspect``, ``importlib``, ...);
- everything else is kept: module- and class-level names, function, class and method names, attribute names,
  keyword-argument names at call sites, imports, constants and annotations.

Source that does not parse hashes its text with blank lines dropped and each line stripped.
"""

from __future__ import annotations

import ast
import hashlib

from spade_envs.envs.ast_parse import parse_source
from spade_envs.envs.loader import REQUIRED_METHODS
from spade_envs.envs.tooluse import ToolUseEnv

__all__ = ["normalized_ast_hash", "without_comments"]

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
#: Methods the runtime or ``ToolUseEnv`` calls without the module naming them: never dead.
_ENTRY_POINTS = frozenset({*REQUIRED_METHODS, "tools", "close", *vars(ToolUseEnv)})
#: Names (called or read) and attributes through which code reaches a definition without naming it.
_REFLECTION = frozenset({"vars", "dir", "globals", "locals", "eval", "exec", "compile", "__import__", "__dict__",
                         "__getattribute__", "getmembers", "methodcaller", "attrgetter", "import_module"})  # fmt: skip
_REFLECTION_ATTRS = _REFLECTION - {"compile"} | {"modules"}  # re.compile is no reflection; sys.modules is
_BY_NAME = frozenset({"getattr", "hasattr", "setattr", "delattr"})
_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property"})
_PURE = (ast.Constant, ast.Name, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.UnaryOp, ast.BinOp, ast.BoolOp,
         ast.Compare, ast.Load, ast.unaryop, ast.operator, ast.boolop, ast.cmpop)  # fmt: skip


def normalized_ast_hash(source: str) -> str:
    """Hex sha256 of the normal form of ``source`` (see the module docstring)."""
    try:
        tree = parse_source(source)
        if not _reads_docstrings(tree):
            _strip_string_statements(tree)
        _drop_dead_code(tree)
        keywords = {node.arg for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg}
        tree = _Renamer(keywords).visit(tree)
        dump = ast.dump(tree, annotate_fields=False, include_attributes=False)
    # ValueError: null bytes. RecursionError: code that compiles but nests deeper than these Python-level walks
    # recurse (a 600-term ``1+1+...``); valid code, admitted by validation, so it must never crash the caller (the
    # env pool's memory hashes every admitted env). Both keep the plain text's identity (no cosmetic merging).
    except (SyntaxError, ValueError, RecursionError):
        text = "\n".join(line.strip() for line in source.splitlines() if line.strip())
        return hashlib.sha256(b"text\0" + text.encode("utf-8", "surrogatepass")).hexdigest()
    return hashlib.sha256(b"ast\0" + dump.encode("utf-8", "surrogatepass")).hexdigest()


def without_comments(source: str) -> str:
    """``source`` as code only: comments and string statements (docstrings) removed, as the hash's normal form does.

    The hint writer reads this, not the designer's text: a designer could otherwise plant an instance's answer in a
    comment for the hint to repeat. Docstrings the code shows (``__doc__``) and ``tool_*`` docstrings (the agent's
    tool descriptions) stay, since the agent sees them anyway. Source that does not parse comes back unchanged.
    """
    try:
        tree = parse_source(source)
    except (SyntaxError, ValueError):
        return source
    if not _reads_docstrings(tree):
        _strip_string_statements(tree)
    return ast.unparse(tree) + "\n"


def _reads_docstrings(tree: ast.AST) -> bool:
    """Whether the code may read docstrings: ``__doc__`` (name, attribute or string) or ``getdoc``."""
    for node in ast.walk(tree):
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if name in ("__doc__", "getdoc"):
            return True
        if isinstance(node, ast.Constant) and node.value == "__doc__":
            return True
    return False


def _is_string_statement(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))  # fmt: skip


def _strip_string_statements(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                continue
            # a tool_* method's docstring is the tool description the agent reads (ToolUseEnv.tools()): it stays
            tool = name == "body" and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            tool = tool and node.name.startswith("tool_")
            kept = [s for i, s in enumerate(body) if (tool and i == 0) or not _is_string_statement(s)]
            if name == "body" and not kept:
                kept = [ast.Pass()]
            setattr(node, name, kept)


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _looks_up_names(tree: ast.Module) -> bool:
    """Whether the code may reach a definition without naming it (``getattr(self, name)``, ``globals()``, ...)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _REFLECTION:
            return True
        if isinstance(node, ast.Attribute) and node.attr in _REFLECTION_ATTRS:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] in ("inspect", "importlib") for m in modules):
                return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _BY_NAME:
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                return True
    return False


def _is_constant(statement: ast.stmt) -> bool:
    """A module-level assignment of literals (and containers and arithmetic of them) to plain names."""
    if isinstance(statement, ast.Assign):
        targets, value = statement.targets, statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        targets, value = [statement.target], statement.value
    else:
        return False
    plain = all(isinstance(t, ast.Name) and not _is_dunder(t.id) for t in targets)
    return plain and all(isinstance(n, _PURE) for n in ast.walk(value))


def _closed_classes(tree: ast.Module) -> list[ast.ClassDef]:
    """Module classes whose every method call the module can see: no unknown base, metaclass or class decorator."""
    known = {"object"}
    if any(isinstance(n, ast.ImportFrom) and n.module == "spade_envs.envs.tooluse"
           and any(a.name == "ToolUseEnv" and a.asname is None for a in n.names) for n in tree.body):  # fmt: skip
        known.add("ToolUseEnv")
    closed = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or node.keywords:
            continue
        decorators = [d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", None) for d in node.decorator_list]
        if all(isinstance(b, ast.Name) and b.id in known for b in node.bases) and set(decorators) <= {"dataclass"}:
            closed.append(node)
            known.add(node.name)
    return closed


def _dead_method(node: ast.stmt, used: set[str]) -> bool:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name in used:
        return False
    if _is_dunder(node.name) or node.name in _ENTRY_POINTS or node.name.startswith("tool_"):
        return False
    return all(isinstance(d, ast.Name) and d.id in _PLAIN_DECORATORS for d in node.decorator_list)


def _drop_dead_code(tree: ast.Module) -> None:
    """Drop unreferenced module constants and methods (module docstring), until none is left."""
    if not any(isinstance(n, ast.ClassDef) and n.name.endswith("Env") for n in tree.body) or _looks_up_names(tree):
        return
    classes = _closed_classes(tree)
    while True:
        constants = [s for s in tree.body if _is_constant(s)]
        own = {id(t) for s in constants for t in (s.targets if isinstance(s, ast.Assign) else [s.target])}
        used: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and id(node) not in own:
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                used.add(node.value)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                used.update(node.names)
        dead = [s for s in constants
                if all(t.id not in used for t in (s.targets if isinstance(s, ast.Assign) else [s.target]))]  # fmt: skip
        dropped = len(dead)
        tree.body = [s for s in tree.body if all(s is not d for d in dead)]
        for cls in classes:
            kept = [s for s in cls.body if not _dead_method(s, used)]
            dropped += len(cls.body) - len(kept)
            cls.body = kept or [ast.Pass()]
        if not dropped:
            return


def _bound_names(nodes: list[ast.AST]) -> tuple[list[str], set[str], set[str]]:
    """Names bound directly in a scope (depth-first, source order), plus its ``global`` and ``nonlocal`` names."""
    bound: dict[str, None] = {}
    globals_: set[str] = set()
    nonlocals: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.setdefault(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.setdefault(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.setdefault(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.setdefault(node.rest)
        elif isinstance(node, ast.Global):
            globals_.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            nonlocals.update(node.names)
        if isinstance(node, _SCOPES):
            return  # a nested scope binds its own names; its decorators/defaults are handled by the renamer
        for child in ast.iter_child_nodes(node):
            visit(child)

    for node in nodes:
        visit(node)
    return list(bound), globals_, nonlocals


class _Renamer(ast.NodeTransformer):
    """Renames function-local names; a scope is ``(is_class, old -> new)``, innermost last."""

    def __init__(self, keep: set[str] | None = None) -> None:
        self.scopes: list[tuple[bool, dict[str, str]]] = []
        self.counter = 0
        self.keep = keep or set()  # argument names some call passes by keyword

    def _lookup(self, name: str) -> str:
        for depth, (is_class, mapping) in enumerate(reversed(self.scopes)):
            if is_class and depth > 0:
                continue  # class namespaces are invisible to the methods nested in them
            if name in mapping:
                return mapping[name]
        return name

    def _function_scope(
        self, args: ast.arguments | None, body: list[ast.AST], keep_all: bool = False
    ) -> dict[str, str]:
        params = []
        if args is not None:
            every = [*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg]
            params = [a.arg for a in every if a is not None]
        bound, globals_, nonlocals = _bound_names(body)
        mapping = {name: name for name in globals_}
        mapping |= {name: name for name in params if keep_all or name in self.keep}
        for name in dict.fromkeys([*params, *bound]):
            if name not in mapping and name not in nonlocals:
                mapping[name] = f"_v{self.counter}"
                self.counter += 1
        return mapping

    def _visit_arguments_outside(self, args: ast.arguments) -> None:
        """Defaults and annotations are evaluated in the enclosing scope."""
        args.defaults = [self.visit(d) for d in args.defaults]
        args.kw_defaults = [None if d is None else self.visit(d) for d in args.kw_defaults]
        for a in [*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg]:
            if a is not None and a.annotation is not None:
                a.annotation = self.visit(a.annotation)

    def _rename_args(self, args: ast.arguments, mapping: dict[str, str]) -> None:
        for a in [*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg]:
            if a is not None:
                a.arg = mapping.get(a.arg, a.arg)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        self._visit_arguments_outside(node.args)
        if node.returns is not None:
            node.returns = self.visit(node.returns)
        mapping = self._function_scope(node.args, node.body, keep_all=node.name.startswith("tool_"))
        self._rename_args(node.args, mapping)
        self.scopes.append((False, mapping))
        node.body = [self.visit(s) for s in node.body]
        self.scopes.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        self._visit_arguments_outside(node.args)
        mapping = self._function_scope(node.args, [node.body])
        self._rename_args(node.args, mapping)
        self.scopes.append((False, mapping))
        node.body = self.visit(node.body)
        self.scopes.pop()
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        bound, _, _ = _bound_names(node.body)
        self.scopes.append((True, {name: name for name in bound}))
        node.body = [self.visit(s) for s in node.body]
        self.scopes.pop()
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._lookup(node.id)
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        if node.name:
            node.name = self._lookup(node.name)
        return self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> ast.AST:
        if node.name:
            node.name = self._lookup(node.name)
        return self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> ast.AST:
        if node.name:
            node.name = self._lookup(node.name)
        return node

    def visit_MatchMapping(self, node: ast.MatchMapping) -> ast.AST:
        if node.rest:
            node.rest = self._lookup(node.rest)
        return self.generic_visit(node)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> ast.AST:
        node.names = [self._lookup(n) for n in node.names]
        return node
