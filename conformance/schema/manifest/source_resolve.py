"""Names in a source tree, resolved without importing: what a name in a module is bound to,
following the tree's own imports (relative ones too) to the class, alias or function that
defines it, or to the import path of a name from outside the tree."""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

from conformance.schema.manifest.source_tree import SourceTree


class Unresolvable(Exception):
    """A name or expression the static reader cannot follow; the message says why."""


@dataclass(frozen=True)
class External:
    """A name from outside the tree, by its import path (typing.Optional, torch.Tensor)."""

    qualname: str


@dataclass(frozen=True)
class ModuleRef:
    module: str


@dataclass(frozen=True)
class TreeClass:
    module: str
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return self.node.name

    def __hash__(self) -> int:
        return hash((self.module, self.node.name))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TreeClass) and (self.module, self.name) == (other.module, other.name)


@dataclass(frozen=True, eq=False)
class Alias:
    """A module-level assignment: a type alias, a constant, the union list."""

    module: str
    name: str
    value: ast.expr


@dataclass(frozen=True)
class Function:
    module: str
    name: str


Symbol = Union[External, ModuleRef, TreeClass, Alias, Function]
# What a module binds a name to: a definition, or ("from", module, name) / ("module", name).
_Binding = Union[ast.AST, "Alias", Tuple[str, ...]]

_SAME_AS = {"typing_extensions": "typing"}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class Resolver:
    def __init__(self, tree: SourceTree):
        self.tree = tree
        self._bindings: Dict[str, Tuple[Dict[str, _Binding], List[str]]] = {}

    # -- what a module binds -------------------------------------------------
    def bindings(self, module: str) -> Tuple[Dict[str, _Binding], List[str]]:
        """Names bound at module level, as they are at run time (the `else` of `if
        TYPE_CHECKING:`; its body only for names nothing else binds), and star imports."""
        if module not in self._bindings:
            found: Dict[str, _Binding] = {}
            fallback: Dict[str, _Binding] = {}
            stars: List[str] = []
            self._collect(module, self.tree.parse(module).body, found, fallback, stars, first_wins=False)
            self._bindings[module] = ({**fallback, **found}, stars)
        return self._bindings[module]

    def _collect(self, module: str, body: List[ast.stmt], found: Dict[str, _Binding],
                 fallback: Dict[str, _Binding], stars: List[str], first_wins: bool) -> None:
        def bind(name: str, what: _Binding) -> None:
            if not (first_wins and name in found):
                found[name] = what

        for stmt in body:
            if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                bind(stmt.name, stmt)
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        bind(target.id, Alias(module, target.id, stmt.value))
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                bind(stmt.target.id, Alias(module, stmt.target.id, stmt.value))
            elif type(stmt).__name__ == "TypeAlias":  # `type X = ...` (3.12)
                bind(stmt.name.id, Alias(module, stmt.name.id, stmt.value))  # type: ignore[attr-defined]
            elif isinstance(stmt, ast.Import):
                for a in stmt.names:
                    if a.asname:
                        bind(a.asname, ("module", a.name))
                    else:
                        bind(a.name.split(".")[0], ("module", a.name.split(".")[0]))
            elif isinstance(stmt, ast.ImportFrom):
                source = self._absolute(module, stmt)
                for a in stmt.names:
                    if a.name == "*":
                        stars.append(source)
                    else:
                        bind(a.asname or a.name, ("from", source, a.name))
            elif isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
                self._collect(module, stmt.orelse, found, fallback, stars, first_wins)
                self._collect(module, stmt.body, fallback, {}, stars, first_wins=True)
            elif isinstance(stmt, ast.If):
                self._collect(module, stmt.body, found, fallback, stars, first_wins)
                self._collect(module, stmt.orelse, found, fallback, stars, first_wins=True)
            elif isinstance(stmt, ast.Try):
                self._collect(module, stmt.body + stmt.orelse + stmt.finalbody, found, fallback, stars, first_wins)
                for handler in stmt.handlers:
                    self._collect(module, handler.body, found, fallback, stars, first_wins=True)

    def _absolute(self, module: str, stmt: ast.ImportFrom) -> str:
        if not stmt.level:
            return stmt.module or ""
        package = module if self.tree.is_package(module) else module.rpartition(".")[0]
        for _ in range(stmt.level - 1):
            package = package.rpartition(".")[0]
        return f"{package}.{stmt.module}" if stmt.module else package

    # -- resolving -----------------------------------------------------------
    def lookup(self, module: str, name: str, _seen: Optional[set[Any]] = None) -> Symbol:
        """What `name` is in `module`."""
        if module not in self.tree:
            if f"{module}.{name}" in self.tree:
                return ModuleRef(f"{module}.{name}")
            top = module.split(".")[0]
            return External(f"{_SAME_AS.get(top, top)}{module[len(top):]}.{name}")
        seen = _seen if _seen is not None else set()
        if (module, name) in seen:
            raise Unresolvable(f"{name} is imported in a cycle through {module}")
        seen.add((module, name))
        found, stars = self.bindings(module)
        binding = found.get(name)
        if binding is None:
            for star in stars:
                if star not in self.tree or name in self.bindings(star)[0]:
                    return self.lookup(star, name, seen)
            if f"{module}.{name}" in self.tree:
                return ModuleRef(f"{module}.{name}")
            if hasattr(builtins, name):
                return External(f"builtins.{name}")
            raise Unresolvable(f"{name} is not defined or imported in {module}")
        if isinstance(binding, tuple):
            if binding[0] == "module":
                return ModuleRef(binding[1])
            return self.lookup(binding[1], binding[2], seen)
        if isinstance(binding, ast.ClassDef):
            return TreeClass(module, binding)
        if isinstance(binding, Alias):
            return binding
        return Function(module, binding.name)  # type: ignore[attr-defined]

    def resolve(self, module: str, expr: ast.expr) -> Symbol:
        """A Name or a dotted Attribute chain in `module`."""
        if isinstance(expr, ast.Name):
            return self.lookup(module, expr.id)
        if isinstance(expr, ast.Attribute):
            return self.attribute(self.resolve(module, expr.value), expr.attr, ast.unparse(expr))
        raise Unresolvable(f"{ast.unparse(expr)} is not a name")

    def attribute(self, owner: Symbol, attr: str, text: str) -> Symbol:
        if isinstance(owner, ModuleRef):
            if owner.module in self.tree:
                return self.lookup(owner.module, attr)
            return External(f"{_SAME_AS.get(owner.module, owner.module)}.{attr}")
        if isinstance(owner, External):
            return External(f"{owner.qualname}.{attr}")
        if isinstance(owner, Alias) and isinstance(owner.value, (ast.Name, ast.Attribute)):
            return self.attribute(self.resolve(owner.module, owner.value), attr, text)
        raise Unresolvable(f"{text}: an attribute of {type(owner).__name__.lower()} {getattr(owner, 'name', '')}")
