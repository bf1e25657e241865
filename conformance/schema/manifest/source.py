"""Build a manifest from Python source without importing it (`manifest extract --source`).

The catalogue module and the modules of the same tree it imports are read with `ast` (nothing
is imported, so a tree whose other modules need CUDA-only packages extracts on any machine).
The result is the manifest import-mode extraction (extract.py) builds from the live classes:
the same roots, union, roles, struct options, field order, types and defaults. What cannot be
followed statically stops with an error naming struct, field and the expression.
"""

from __future__ import annotations

import ast
import platform
from pathlib import Path
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

from conformance.schema.manifest.messages import message_union, struct_role
from conformance.schema.manifest.model import ALIASES, Manifest, StructSpec
from conformance.schema.manifest.source_reader import ClassReader, SourceError
from conformance.schema.manifest.source_resolve import Alias, External, Function, TreeClass, Unresolvable
from conformance.schema.manifest.source_tree import locate

__all__ = ["SourceError", "extract_source"]

_PRIMITIVES = ("int", "float", "bool", "str", "bytes")
_UnionItem = Union[TreeClass, str]  # a class, or a primitive's name


def extract_source(
    path: Union[str, Path],
    *,
    module: Optional[str] = None,
    implementation: Optional[str] = None,
    version: Optional[str] = None,
    array_typecode: str = "q",
    union_attr: str = "_all_types",
    exclude: Sequence[str] = (),
) -> Manifest:
    """The manifest of the catalogue module in `path`: an io_struct.py file, a package or
    checkout directory, or a wheel. `module` names the catalogue module when it is not
    sglang.srt.managers.io_struct (or the given file); implementation and version default to
    the top-level package (a wheel: its distribution name, so a fork keeps its own) and the
    version the wheel or the tree's version file states, else the one git gives the checkout
    (git_version.py); `extracted_with["version_from"]` says which. `exclude` leaves structs out
    of the union (and out of the manifest unless a field reaches them)."""
    located = locate(Path(path), module)
    catalogue = _Catalogue(ClassReader(located.tree, array_typecode), located.module, union_attr)
    union, primitives, classes = catalogue.union(set(exclude))
    specs = catalogue.specs(union)
    enums = {name: catalogue.reader.enum_spec(cls) for name, cls in sorted(catalogue.reader.enums.items())}
    how: dict[str, str] = {"source": "static", "from": Path(path).name, "python": platform.python_version()}
    aliases = catalogue.aliases(set(specs))
    if aliases:
        how[ALIASES] = aliases
    if version is None and located.version_from:
        how["version_from"] = located.version_from
    elif version is None:
        how["version_from"] = "unknown: no version file, no git checkout"
    manifest = Manifest(
        implementation=implementation or located.distribution or located.module.split(".")[0],
        version=version or located.version or "0",
        module=located.module,
        structs=dict(sorted(specs.items())),
        enums=enums,
        union=sorted(c.name for c in union) + primitives,
        extracted_with=how,
    )
    if version is None and located.dirty and "+" in manifest.version:
        # uncommitted changes: the commit does not name this content, its digest does (a tree on a
        # release tag gets its digest from own_identity when it differs from the release)
        from conformance.schema.manifest.identity import DIGEST_CHARS, content_digest

        manifest.version += "." + content_digest(manifest)[:DIGEST_CHARS]
    return manifest


class _Catalogue:
    """Which classes are messages, as extract_with_classes decides it from the live module."""

    def __init__(self, reader: ClassReader, module: str, union_attr: str):
        self.reader, self.module, self.union_attr = reader, module, union_attr
        self.tree = reader.resolver.tree
        self.defined = self._classes_of(module)
        self.known = list(self.defined)  # where subclasses are looked for

    def _classes_of(self, module: str) -> List[TreeClass]:
        return [TreeClass(module, s) for s in self.tree.parse(module).body if isinstance(s, ast.ClassDef)]

    # -- the union -----------------------------------------------------------
    def union(self, exclude: set[Any]) -> Tuple[List[TreeClass], List[str], List[TreeClass]]:
        reader = self.reader
        listed = self._union_attr_items() + self._registered_elsewhere()
        registered = [c for c in listed if isinstance(c, TreeClass)
                      and (reader.is_struct(c) or reader.is_dataclass(c))]
        primitives = [p for p in listed if isinstance(p, str)] or ["int", "float", "bool", "bytes"]
        roots = self._tagged_roots()
        dataclass_catalogue = not roots and not registered
        if dataclass_catalogue:
            registered = self._dataclass_messages()
            roots = [b for c in registered for b in reader.mro(c)[1:]
                     if isinstance(b, TreeClass) and reader.is_dataclass(b)]
        if dataclass_catalogue or any(reader.is_dataclass(c) for c in [*roots, *registered]):
            reader.opaque = []
        for root in roots:
            reader.add_struct(root)
        union = message_union(roots, registered, self._all_subclasses, lambda c: c.name,
                              dataclass_catalogue=dataclass_catalogue, exclude=exclude)
        for cls in union:
            reader.add_struct(cls)
        return union, primitives, roots

    def specs(self, union: List[TreeClass]) -> dict[str, Any]:
        reader, names = self.reader, {c.name for c in union}
        specs: dict[str, StructSpec] = {}
        while reader.queue:
            cls = reader.queue.popleft()
            role = struct_role(cls.name, names, lambda: any(cls in reader.mro(s)[1:] for s in union))  # noqa: B023 - called at once, inside this iteration
            specs[cls.name] = reader.struct_spec(cls, role)
        return specs

    def aliases(self, structs: set[str]) -> str:
        """`Alias=Class, ...`: the catalogue module's other names for its structs
        (`LoadLoRAAdapterReqOutput = UnloadLoRAAdapterReqOutput = LoRAUpdateOutput`)."""
        found = []
        for name, bound in self.reader.resolver.bindings(self.module)[0].items():
            if isinstance(bound, Alias) and isinstance(bound.value, (ast.Name, ast.Attribute)):
                try:
                    target = self.reader.resolver.resolve(self.module, bound.value)
                except Unresolvable:
                    continue
                if isinstance(target, TreeClass) and target.name in structs and target.name != name:
                    found.append(f"{name}={target.name}")
        return ", ".join(sorted(found))

    def _tagged_roots(self) -> List[TreeClass]:
        """Tagged structs defined in the module whose parents are not tagged structs."""
        reader = self.reader
        tagged = [c for c in self.defined if reader.is_struct(c) and reader.struct_config(c)["tag"] is not None]
        return [c for c in tagged if not any(
            isinstance(b, TreeClass) and reader.is_struct(b) and reader.struct_config(b)["tag"] is not None
            for b in reader.mro(c)[1:])]

    def _all_subclasses(self, cls: TreeClass) -> Iterator[TreeClass]:
        for sub in self.known:
            if cls in self.reader.bases(sub):
                yield sub
                yield from self._all_subclasses(sub)

    def _union_attr_items(self) -> List[_UnionItem]:
        value = self.reader.resolver.bindings(self.module)[0].get(self.union_attr)
        if not isinstance(value, Alias):
            return []
        return self._items(self.module, value.value)

    def _items(self, module: str, expr: ast.expr) -> List[_UnionItem]:
        """Evaluate the union attribute's expression: tuples, lists, `+`, tuple(...) and
        comprehensions over them, and `Base.__subclasses__()` (within the module)."""
        where = f"{self.module}.{self.union_attr}"
        if isinstance(expr, (ast.Tuple, ast.List)):
            return [i for e in expr.elts for i in self._items(module, e)]
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return self._items(module, expr.left) + self._items(module, expr.right)
        if isinstance(expr, (ast.GeneratorExp, ast.ListComp)) and len(expr.generators) == 1:
            gen = expr.generators[0]
            if not gen.ifs and isinstance(expr.elt, ast.Name) and ast.unparse(gen.target) == expr.elt.id:
                return self._items(module, gen.iter)
        if isinstance(expr, ast.Call) and not expr.keywords:
            func = expr.func
            if isinstance(func, ast.Name) and func.id in ("tuple", "list") and len(expr.args) == 1:
                return self._items(module, expr.args[0])
            if isinstance(func, ast.Attribute) and func.attr == "__subclasses__" and not expr.args:
                owner = self._items(module, func.value)
                if len(owner) == 1 and isinstance(owner[0], TreeClass):
                    return [c for c in self.defined if owner[0] in self.reader.bases(c)]
        if isinstance(expr, (ast.Name, ast.Attribute)):
            try:
                sym = self.reader.resolver.resolve(module, expr)
            except Unresolvable as exc:
                raise SourceError(f"{where}: cannot resolve `{ast.unparse(expr)}` statically: {exc}") from None
            if isinstance(sym, TreeClass):
                return [sym]
            if isinstance(sym, Alias):
                return self._items(sym.module, sym.value)
            if isinstance(sym, External) and sym.qualname.startswith("builtins."):
                name = sym.qualname[9:]
                if name in _PRIMITIVES:
                    return [name]
            if isinstance(sym, External) and sym.qualname == "types.NoneType":
                return ["None"]
        raise SourceError(f"{where}: cannot evaluate `{ast.unparse(expr)}` statically")

    def _registered_elsewhere(self) -> List[_UnionItem]:
        """Types other modules of the tree add to the union at import, through a function of
        the catalogue module that rebinds it (`global _all_types`), e.g. hook_custom_types(X).
        Import mode sees them with --import; here every module of the tree is read."""
        registrars = [s.name for s in self.tree.parse(self.module).body
                      if isinstance(s, ast.FunctionDef) and any(
                          isinstance(g, ast.Global) and self.union_attr in g.names for g in ast.walk(s))]
        items: List[_UnionItem] = []
        for name in registrars:
            for other in self.tree.modules_mentioning(name + "("):
                if other == self.module:
                    continue
                for stmt in self.tree.parse(other).body:
                    call = stmt.value if isinstance(stmt, ast.Expr) else None
                    if not (isinstance(call, ast.Call) and isinstance(call.func, (ast.Name, ast.Attribute))):
                        continue
                    try:
                        target = self.reader.resolver.resolve(other, call.func)
                    except Unresolvable:
                        continue
                    if target == Function(self.module, name):
                        for arg in call.args:
                            items += [i for i in self._items(other, arg) if i not in items]
                        self.known += [c for c in self._classes_of(other) if c not in self.known]
        return items

    # -- dataclass catalogues --------------------------------------------------
    def _dataclass_messages(self) -> List[TreeClass]:
        """As extract.py: the module's dataclasses that no other one derives from, except those
        only reached through a field that have no dataclass base."""
        reader = self.reader
        defined = [c for c in self.defined if reader.is_dataclass(c)]
        leaves = [c for c in defined if not any(d != c and c in reader.mro(d) for d in defined)]
        reached: set[Any] = set()
        for cls in defined:
            reached |= self._dataclasses_in_hints(cls)
        return [c for c in leaves if c not in reached or any(
            isinstance(b, TreeClass) and reader.is_dataclass(b) for b in reader.mro(c)[1:])]

    def _dataclasses_in_hints(self, cls: TreeClass) -> set[Any]:
        """Dataclasses named anywhere in the annotations of the class and its bases; none when
        one of them cannot be resolved (import mode skips a class whose hints fail)."""
        found: set[Any] = set()
        reader = self.reader
        try:
            for klass in reader.mro(cls):
                if not isinstance(klass, TreeClass):
                    continue
                for stmt in klass.node.body:
                    if isinstance(stmt, ast.AnnAssign):
                        found |= self._dataclasses_named(klass.module, stmt.annotation, depth=0)
        except (Unresolvable, SourceError):
            return set()
        return found

    def _dataclasses_named(self, module: str, ann: ast.expr, depth: int) -> set[Any]:
        if depth > 50:  # an alias that names itself
            return set()
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            text = ann.value
            try:
                ann = ast.parse(text.strip(), mode="eval").body
            except SyntaxError:
                raise Unresolvable(text) from None
        if isinstance(ann, ast.BinOp):
            return self._dataclasses_named(module, ann.left, depth) | self._dataclasses_named(module, ann.right, depth)
        if isinstance(ann, ast.Tuple):
            return set().union(*(self._dataclasses_named(module, e, depth) for e in ann.elts))
        if isinstance(ann, ast.Subscript):
            origin = self.reader.resolver.resolve(module, ann.value)
            if origin == External("typing.Literal"):
                return set()
            args = [ann.slice.elts[0]] if origin == External("typing.Annotated") else [ann.slice]  # type: ignore
            return set().union(*(self._dataclasses_named(module, a, depth) for a in args))
        if not isinstance(ann, (ast.Name, ast.Attribute)):
            return set()
        sym = self.reader.resolver.resolve(module, ann)
        if isinstance(sym, TreeClass) and self.reader.is_dataclass(sym):
            return {sym}
        if isinstance(sym, Alias):
            return self._dataclasses_named(sym.module, sym.value, depth + 1)
        return set()
