"""Classes read from source: struct options, fields in wire order, types and defaults, each
as import-mode extraction (extract.py) reads them from the live class. What cannot be
followed statically stops with a SourceError naming struct, field and the expression."""

from __future__ import annotations

import ast
import operator
from collections import deque
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from conformance.errors import UsageError
from conformance.schema.manifest.model import Default, EnumSpec, Field, Role, StructSpec
from conformance.schema.manifest.source_resolve import (
    Alias,
    External,
    Resolver,
    Symbol,
    TreeClass,
    Unresolvable,
)
from conformance.schema.manifest.source_tree import SourceTree
from conformance.schema.manifest.typeexpr import T, canonical, render


class SourceError(UsageError):
    """Something in the source the static reader cannot follow; names where and what."""


_PRIMS = {"int": "int", "float": "float", "bool": "bool", "str": "str", "bytes": "bytes", "NoneType": "None"}
_CONTAINERS = {"list": "List", "set": "Set", "frozenset": "FrozenSet", "dict": "Dict",
               "List": "List", "Set": "Set", "FrozenSet": "FrozenSet", "Dict": "Dict"}
_LEAVES = {"torch.Tensor": "Tensor", "numpy.ndarray": "NDArray",
           # `torch.Tensor` in a module codegen wrote: through the runtime's stand-in for torch
           "conformance.runtime.lazy_torch.torch.Tensor": "Tensor"}
_ENUM_BASES = {"enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag", "enum.IntFlag"}
# Arithmetic on numeric constants (`1 << 30`, `2 ** 31 - 1`) in defaults.
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
               ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow, ast.LShift: operator.lshift,
               ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitAnd: operator.and_}
_FACTORIES = ("list", "dict", "set", "tuple", "frozenset")
# msgspec struct options and their values when a class and its bases leave them out.
_STRUCT_OPTION_DEFAULTS = {
    "array_like": False, "omit_defaults": False, "forbid_unknown_fields": False, "frozen": False, "eq": True,
    "order": False, "dict": False, "weakref": False, "gc": True, "repr_omit_defaults": False,
    "cache_hash": False,
}


class _Field:
    """One field as a class body declares it."""

    def __init__(self, owner: TreeClass, node: ast.AnnAssign, kw_only: bool):
        self.owner, self.node, self.kw_only = owner, node, kw_only
        self.name = node.target.id  # type: ignore[union-attr]


class ClassReader:
    def __init__(self, tree: SourceTree, array_typecode: str):
        self.resolver = Resolver(tree)
        self.array_typecode = array_typecode
        self.structs: Dict[str, TreeClass] = {}
        self.enums: Dict[str, TreeClass] = {}
        self.queue: deque[TreeClass] = deque()
        self.opaque: Optional[List[str]] = None  # dataclass catalogues: see extract.py
        self._mro: Dict[TreeClass, List[Union[TreeClass, External]]] = {}

    # -- classes -------------------------------------------------------------
    def bases(self, cls: TreeClass) -> List[Union[TreeClass, External]]:
        out: List[Union[TreeClass, External]] = []
        for base in cls.node.bases:
            sym = self._resolve_or_fail(cls.module, base, f"{cls.name} (a base class)")
            if isinstance(sym, Alias):
                sym = self._resolve_or_fail(sym.module, sym.value, f"{cls.name} (a base class)")
            if not isinstance(sym, (TreeClass, External)):
                raise SourceError(f"{cls.name}: base class {ast.unparse(base)} is not a class")
            out.append(sym)
        return out

    def mro(self, cls: TreeClass) -> List[Union[TreeClass, External]]:
        """C3 linearization; a class from outside the tree counts as one entry."""
        if cls not in self._mro:
            bases = self.bases(cls)
            seqs = [self.mro(b) if isinstance(b, TreeClass) else [b] for b in bases] + [list(bases)]
            out: List[Union[TreeClass, External]] = [cls]
            while any(seqs):
                seqs = [s for s in seqs if s]
                head = next((s[0] for s in seqs if not any(s[0] in t[1:] for t in seqs)), None)
                if head is None:
                    raise SourceError(f"{cls.name}: inconsistent method resolution order")
                out.append(head)
                seqs = [s[1:] if s[0] == head else s for s in seqs]
            self._mro[cls] = out
        return self._mro[cls]

    def is_struct(self, cls: TreeClass) -> bool:
        return any(b == External("msgspec.Struct") for b in self.mro(cls))

    def is_dataclass(self, cls: TreeClass) -> bool:
        return self._dataclass_decorator(cls) is not None

    def is_enum(self, cls: TreeClass) -> bool:
        return any(isinstance(b, External) and b.qualname in _ENUM_BASES for b in self.mro(cls))

    def _dataclass_decorator(self, cls: TreeClass) -> Optional[ast.expr]:
        for deco in cls.node.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            try:
                if self.resolver.resolve(cls.module, target) == External("dataclasses.dataclass"):
                    return deco
            except Unresolvable:
                continue
        return None

    def _keywords(self, node: Union[ast.Call, ast.ClassDef], module: str) -> Dict[str, Any]:
        return {k.arg: self.constant(module, k.value, f"{module}: {ast.unparse(node)[:60]} ({k.arg}=)")
                for k in node.keywords if k.arg}

    # -- struct options --------------------------------------------------------
    def struct_config(self, cls: TreeClass) -> Dict[str, Any]:
        """msgspec's config: each option from the nearest class (MRO) that sets it."""
        config: Dict[str, Any] = dict(_STRUCT_OPTION_DEFAULTS, tag=None, tag_field=None)
        for klass in reversed(self.mro(cls)):
            if isinstance(klass, TreeClass) and self.is_struct(klass):
                for k in klass.node.keywords:
                    if k.arg not in ("kw_only", None):
                        config[k.arg] = self.constant(klass.module, k.value, f"{klass.name} ({k.arg}=)")
        if config.get("rename") is not None:
            raise SourceError(f"{cls.name}: rename= is not read statically; extract by import")
        tag = config["tag"]
        if tag is True:
            tag = cls.name
        elif tag is False:
            tag = None
        elif tag is not None and not isinstance(tag, (str, int)):
            raise SourceError(f"{cls.name}: tag={tag!r} is not read statically")
        config["tag"] = None if tag is None else str(tag)
        config["tag_field"] = (config["tag_field"] or "type") if tag is not None else None
        return config

    def own_fields(self, cls: TreeClass, kw_only: bool) -> List[_Field]:
        fields = []
        for stmt in cls.node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            head = stmt.annotation.value if isinstance(stmt.annotation, ast.Subscript) else stmt.annotation
            if isinstance(head, ast.Constant) and isinstance(head.value, str):
                head = ast.parse(head.value, mode="eval").body
                head = head.value if isinstance(head, ast.Subscript) else head
            qual = self._try_resolve(cls.module, head)
            if qual in (External("typing.ClassVar"), External("dataclasses.InitVar")):
                continue
            if qual == External("dataclasses.KW_ONLY"):
                kw_only = True
                continue
            fields.append(_Field(cls, stmt, kw_only or self._field_kw_only(cls, stmt)))
        return fields

    def _field_kw_only(self, cls: TreeClass, stmt: ast.AnnAssign) -> bool:
        call = self._field_call(cls.module, stmt.value)
        flag = next((k.value for k in call.keywords if k.arg == "kw_only"), None) if call else None
        where = f"{cls.name}.{ast.unparse(stmt.target)}"
        return bool(flag is not None and self.constant(cls.module, flag, where))

    def _field_call(self, module: str, value: Optional[ast.expr]) -> Optional[ast.Call]:
        if isinstance(value, ast.Call) and self._try_resolve(module, value.func) in (
                External("dataclasses.field"), External("msgspec.field")):
            return value
        return None

    def fields(self, cls: TreeClass) -> List[_Field]:
        """Wire order: inherited first (a redefined field keeps its place); msgspec then moves
        keyword-only fields after the positional ones."""
        dataclass = self.is_dataclass(cls)
        ordered: Dict[str, _Field] = {}
        for klass in reversed(self.mro(cls)):
            if not isinstance(klass, TreeClass):
                continue
            if dataclass and self.is_dataclass(klass):
                deco = self._dataclass_decorator(klass)
                kw = bool(isinstance(deco, ast.Call) and self._keywords(deco, klass.module).get("kw_only"))
            elif not dataclass and self.is_struct(klass):
                kw = bool(self._class_keyword(klass, "kw_only"))
            else:
                continue
            for f in self.own_fields(klass, kw):
                ordered[f.name] = f
        if dataclass:
            return list(ordered.values())
        return [f for f in ordered.values() if not f.kw_only] + [f for f in ordered.values() if f.kw_only]

    def _class_keyword(self, cls: TreeClass, name: str) -> Any:
        for k in cls.node.keywords:
            if k.arg == name:
                return self.constant(cls.module, k.value, f"{cls.name} ({name}=)")
        return None

    # -- catalogue -----------------------------------------------------------
    def add_struct(self, cls: TreeClass) -> None:
        known = self.structs.get(cls.name)
        if known == cls:
            return
        if known is not None:
            raise SourceError(f"two structs named {cls.name}: {known.module} and {cls.module}")
        self.structs[cls.name] = cls
        self.queue.append(cls)

    def add_enum(self, cls: TreeClass, where: str) -> None:
        known = self.enums.get(cls.name)
        if known is not None and known != cls:
            raise SourceError(f"{where}: two enums named {cls.name}")
        self.enums[cls.name] = cls

    def struct_spec(self, cls: TreeClass, role: Role) -> StructSpec:
        if self.is_dataclass(cls):
            return self.dataclass_spec(cls, role)
        config = self.struct_config(cls)
        fields, specs = self.fields(cls), []
        for f in fields:
            where = f"{cls.name}.{f.name}"
            node, notes = self.convert(f.owner.module, f.node.annotation, where)
            default, encode_name = self.default(f, node, where)
            specs.append(Field(name=f.name, type=render(node), default=default, annotations=notes,
                               encode_name=encode_name if encode_name != f.name else None))
        options = {o: True for o in _STRUCT_OPTION_DEFAULTS if config[o]}
        options["array_like"] = bool(config["array_like"])
        options["kw_only"] = all(f.kw_only for f in fields)
        base = next((b.name for b in self.mro(cls)[1:] if isinstance(b, TreeClass) and self.is_struct(b)), None)
        return StructSpec(name=cls.name, module=cls.module, fields=specs, tag=config["tag"],
                          tag_field=config["tag_field"], base=base, options=dict(sorted(options.items())),
                          role=role)

    def dataclass_spec(self, cls: TreeClass, role: Role) -> StructSpec:
        fields, specs = self.fields(cls), []
        for f in fields:
            where = f"{cls.name}.{f.name}"
            node, notes = self.convert(f.owner.module, f.node.annotation, where)
            specs.append(Field(name=f.name, type=render(node), annotations=notes,
                               default=self.default(f, node, where)[0]))
        deco = self._dataclass_decorator(cls)
        params = self._keywords(deco, cls.module) if isinstance(deco, ast.Call) else {}
        options = {"array_like": False, "dataclass": True, "frozen": bool(params.get("frozen", False)),
                   "eq": bool(params.get("eq", True)), "order": bool(params.get("order", False)),
                   "kw_only": all(f.kw_only for f in fields) and bool(fields)}
        base = next((b.name for b in self.mro(cls)[1:] if isinstance(b, TreeClass) and self.is_dataclass(b)), None)
        return StructSpec(name=cls.name, module=cls.module, fields=specs, base=base, role=role,
                          options={k: v for k, v in sorted(options.items()) if v or k == "array_like"})

    def enum_spec(self, cls: TreeClass) -> EnumSpec:
        members: Dict[str, Union[int, str]] = {}
        is_str = any(isinstance(b, External) and b.qualname in ("builtins.str", "enum.StrEnum")
                     for b in self.mro(cls))
        for stmt in cls.node.body:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                continue
            name = stmt.targets[0].id
            if name.startswith("_"):
                continue
            value = stmt.value
            if isinstance(value, ast.Call) and self._try_resolve(cls.module, value.func) == External("enum.auto"):
                ints = [v for v in members.values() if isinstance(v, int)]
                members[name] = name.lower() if is_str else (max(ints) + 1 if ints else 1)
            else:
                members[name] = self.constant(cls.module, value, f"{cls.name}.{name}")
        base = next(b.name if isinstance(b, TreeClass) else b.qualname.rpartition(".")[2]
                    for b in self.mro(cls)[1:] if isinstance(b, TreeClass) or b.qualname in _ENUM_BASES)
        # Leave the default base out rather than pass an equal string: the file omits it either way.
        return EnumSpec(name=cls.name, module=cls.module, members=members, **({"base": base} if base != "Enum" else {}))

    # -- values --------------------------------------------------------------
    def default(self, f: _Field, node: T, where: str) -> Tuple[Default, str]:
        """The field's default and its wire name."""
        module, value = f.owner.module, f.node.value
        if value is None:
            return Default("required"), f.name
        call = self._field_call(module, value)
        if call is None:
            empty = self._empty_container(module, value)
            if empty and self.is_struct(f.owner):  # msgspec turns `= []` into default_factory=list
                return Default("factory", factory=empty), f.name
            return self._value_default(module, value, where), f.name
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        encode_name = self.constant(module, kwargs["name"], where) if "name" in kwargs else f.name
        if "default" in kwargs:
            return self._value_default(module, kwargs["default"], where), encode_name
        factory = kwargs.get("default_factory")
        if factory is None:
            return Default("required"), encode_name
        if _literal_lambda(factory):
            # `lambda: ["all"]`: a fresh copy of a literal each time, i.e. a value default.
            return Default("value", value=self.constant(module, factory.body, where)), encode_name  # type: ignore[attr-defined]
        sym = self._try_resolve(module, factory) if isinstance(factory, (ast.Name, ast.Attribute)) else None
        if isinstance(sym, External) and sym.qualname.startswith("builtins.") and sym.qualname[9:] in _FACTORIES:
            return Default("factory", factory=sym.qualname[9:]), encode_name
        if isinstance(sym, TreeClass) and (self.is_struct(sym) or self.is_dataclass(sym)):
            self.add_struct(sym)
            return Default("factory", factory=sym.name), encode_name
        # Any other callable (a lambda, a function, a class that is no struct): its value is
        # made at construction and never implied by the wire, as import mode records it.
        return Default("factory", factory="opaque"), encode_name

    def _empty_container(self, module: str, value: ast.expr) -> Optional[str]:
        """"list", "dict" or "set" for `[]`, `{}`, `list()`, `dict()`, `set()`."""
        if isinstance(value, ast.List) and not value.elts:
            return "list"
        if isinstance(value, ast.Dict) and not value.keys:
            return "dict"
        if isinstance(value, ast.Call) and not value.args and not value.keywords:
            sym = self._try_resolve(module, value.func)
            if isinstance(sym, External) and sym.qualname in ("builtins.list", "builtins.dict", "builtins.set"):
                return sym.qualname[9:]
        return None

    def _value_default(self, module: str, value: ast.expr, where: str) -> Default:
        if isinstance(value, ast.Attribute):
            sym = self._try_resolve(module, value.value)
            if isinstance(sym, TreeClass) and self.is_enum(sym):
                return Default("enum", value=value.attr)
        return Default("value", value=self.constant(module, value, where))

    def constant(self, module: str, expr: ast.expr, where: str) -> Any:
        """A literal value (numbers, strings, None, containers of them, module constants)."""
        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            inner = self.constant(module, expr.operand, where)
            if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                return -inner if isinstance(expr.op, ast.USub) else inner
        if isinstance(expr, ast.BinOp) and type(expr.op) in _ARITHMETIC:
            left, right = self.constant(module, expr.left, where), self.constant(module, expr.right, where)
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right)):
                return _ARITHMETIC[type(expr.op)](left, right)
        if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            return [self.constant(module, e, where) for e in expr.elts]
        if isinstance(expr, ast.Dict) and None not in expr.keys:  # no `**other` entries
            return {self.constant(module, k, where): self.constant(module, v, where)
                    for k, v in zip(expr.keys, expr.values) if k is not None}
        if isinstance(expr, (ast.Name, ast.Attribute)):
            sym = self._try_resolve(module, expr)
            if isinstance(sym, Alias):
                return self.constant(sym.module, sym.value, where)
        raise SourceError(f"{where}: cannot evaluate `{ast.unparse(expr)}` statically "
                          f"(not a literal or a module constant)")

    # -- types ---------------------------------------------------------------
    def convert(self, module: str, ann: ast.expr, where: str) -> Tuple[T, List[str]]:
        """Annotation -> (type node, field annotations such as "base64"), as extract.py."""
        ann = self._unstring(ann, where)
        notes: List[str] = []
        if isinstance(ann, ast.Subscript) and self._try_resolve(module, ann.value) == External("typing.Annotated"):
            base, *meta = _args(ann)
            notes = ["base64" for m in meta if _callee_name(m) == "Base64Bytes"]
            ann = base
        if self.opaque is not None:
            self.opaque.clear()
        node = self.node(module, ann, where)
        return node, notes + sorted(set(self.opaque or ()))

    def _unstring(self, ann: ast.expr, where: str) -> ast.expr:
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                return ast.parse(ann.value.strip(), mode="eval").body
            except SyntaxError:
                raise SourceError(f"{where}: annotation {ann.value!r} is not an expression") from None
        return ann

    def node(self, module: str, ann: ast.expr, where: str) -> T:
        ann = self._unstring(ann, where)
        if isinstance(ann, ast.Constant) and ann.value is None:
            return T("None")
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            return self._union([ann.left, ann.right], module, where)
        if isinstance(ann, ast.Subscript):
            return self._generic(module, ann, where)
        if not isinstance(ann, (ast.Name, ast.Attribute)):
            raise SourceError(f"{where}: cannot read the type `{ast.unparse(ann)}` statically")
        sym = self._resolve_or_fail(module, ann, where)
        return self._symbol_node(sym, ann, where)

    def _symbol_node(self, sym: Symbol, ann: ast.expr, where: str) -> T:
        if isinstance(sym, Alias):
            if isinstance(sym.value, ast.Call):  # typing.NewType("X", base)
                if self._try_resolve(sym.module, sym.value.func) == External("typing.NewType"):
                    return self.node(sym.module, sym.value.args[1], where)
            return self.node(sym.module, sym.value, where)
        if isinstance(sym, TreeClass):
            if self.is_struct(sym) or self.is_dataclass(sym):
                self.add_struct(sym)
                return T("Ref", name=sym.name)
            if self.is_enum(sym):
                self.add_enum(sym, where)
                return T("Ref", name=sym.name)
            return self._opaque(f"{sym.module}.{sym.name}", ann, where)
        if isinstance(sym, External):
            q = sym.qualname
            if q in ("typing.Any", "builtins.object"):
                return T("Any")
            if q.startswith("builtins.") and q[9:] in _PRIMS:
                return T(_PRIMS[q[9:]])
            if q == "types.NoneType":
                return T("None")
            name = q.rpartition(".")[2]
            if (q.startswith("builtins.") or q.startswith("typing.")) and name in _CONTAINERS:
                kind = _CONTAINERS[name]
                return T(kind, (T("Any"),) * (2 if kind == "Dict" else 1))
            if q in ("builtins.tuple", "typing.Tuple"):
                return T("VarTuple", (T("Any"),))
            if q == "array.array":
                return T("Array", name=self.array_typecode)
            if q in _LEAVES:
                return T(_LEAVES[q])
            return self._opaque(q, ann, where)
        raise SourceError(f"{where}: `{ast.unparse(ann)}` is a {type(sym).__name__.lower()}, not a type")

    def _opaque(self, qualname: str, ann: ast.expr, where: str) -> T:
        if self.opaque is not None:
            # A dataclass catalogue sent with pickle may hold any Python object (extract.py).
            self.opaque.append(f"python:{qualname}")
            return T("Any")
        raise SourceError(f"{where}: unsupported type `{ast.unparse(ann)}` ({qualname}: not a struct, "
                          f"an enum or a type the manifest knows)")

    def _union(self, arms_src: Iterable[ast.expr], module: str, where: str) -> T:
        arms: List[T] = []
        for a in arms_src:
            n = self.node(module, a, where)
            for arm in n.args if n.kind == "Union" else (n,):
                if arm not in arms:
                    arms.append(arm)
        return canonical(T("Union", tuple(arms)))

    def _generic(self, module: str, ann: ast.Subscript, where: str) -> T:
        origin = self._resolve_or_fail(module, ann.value, where)
        while isinstance(origin, Alias) and isinstance(origin.value, (ast.Name, ast.Attribute)):
            origin = self._resolve_or_fail(origin.module, origin.value, where)
        q = origin.qualname if isinstance(origin, External) else ""
        args = _args(ann)
        name = q.rpartition(".")[2]
        if q == "typing.Annotated":
            return self.node(module, args[0], where)
        if q == "typing.Optional":
            return self._union([args[0], ast.Constant(None)], module, where)
        if q == "typing.Union":
            return self._union(args, module, where)
        if q == "typing.Literal":
            values = [self._literal_value(module, a, where) for a in args]
            return canonical(T("Literal", values=tuple(values)))
        if (q.startswith("builtins.") or q.startswith("typing.")) and name in _CONTAINERS:
            kind = _CONTAINERS[name]
            return T(kind, tuple(self.node(module, a, where) for a in args))
        if q in ("builtins.tuple", "typing.Tuple"):
            if len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is Ellipsis:
                return T("VarTuple", (self.node(module, args[0], where),))
            if len(args) == 1 and isinstance(args[0], ast.Tuple) and not args[0].elts:
                return T("Tuple")
            return T("Tuple", tuple(self.node(module, a, where) for a in args))
        if q == "array.array":  # array[int]: the typecode is not in the annotation
            return T("Array", name=self.array_typecode)
        raise SourceError(f"{where}: unsupported type `{ast.unparse(ann)}`")

    def _literal_value(self, module: str, expr: ast.expr, where: str) -> Any:
        value = self.constant(module, expr, where)
        if not isinstance(value, (str, int, bool, type(None))):
            raise SourceError(f"{where}: Literal value {value!r} is not a JSON scalar")
        return value

    # -- resolving -----------------------------------------------------------
    def _try_resolve(self, module: str, expr: ast.expr) -> Optional[Symbol]:
        try:
            return self.resolver.resolve(module, expr)
        except Unresolvable:
            return None

    def _resolve_or_fail(self, module: str, expr: ast.expr, where: str) -> Symbol:
        try:
            return self.resolver.resolve(module, expr)
        except Unresolvable as exc:
            raise SourceError(f"{where}: cannot resolve `{ast.unparse(expr)}` statically: {exc}") from None


def _args(ann: ast.Subscript) -> List[ast.expr]:
    s = ann.slice
    return list(s.elts) if isinstance(s, ast.Tuple) and s.elts else [s]


def _callee_name(expr: ast.expr) -> str:
    target = expr.func if isinstance(expr, ast.Call) else expr
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def _literal_lambda(expr: ast.expr) -> bool:
    """`lambda: <literal>`: no arguments, and a body of constants and containers only."""
    if not isinstance(expr, ast.Lambda) or expr.args.args or expr.args.kwonlyargs or expr.args.vararg:
        return False
    allowed = (ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.UnaryOp, ast.USub, ast.UAdd, ast.Load)
    return all(isinstance(node, allowed) for node in ast.walk(expr.body))
