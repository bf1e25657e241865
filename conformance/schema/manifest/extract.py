"""Build a manifest from any importable module of msgspec IPC structs, or of dataclasses
(implementations from before the msgspec migration, which send them with pickle)."""

from __future__ import annotations

import array
import dataclasses
import enum
import importlib
import importlib.metadata
import platform
import sys
import types
import typing
from collections import deque
from typing import Any, Iterable, Optional, Sequence

import msgspec

from conformance.errors import UsageError
from conformance.schema.manifest.messages import message_union, struct_role
from conformance.schema.manifest.model import ALIASES, Default, EnumSpec, Field, Manifest, Role, StructSpec
from conformance.schema.manifest.typeexpr import T, canonical, render


class UnsupportedTypeError(TypeError):
    """A field type the manifest cannot describe; names struct, field and type."""


_PRIMS = {int: "int", float: "float", bool: "bool", str: "str", bytes: "bytes", type(None): "None"}
_CONTAINERS = {list: "List", set: "Set", frozenset: "FrozenSet", dict: "Dict"}
_BOOL_OPTIONS = (
    "array_like", "omit_defaults", "forbid_unknown_fields", "frozen", "eq", "order",
    "dict", "weakref", "gc", "repr_omit_defaults", "cache_hash",
)
_FACTORIES = {list: "list", dict: "dict", set: "set", tuple: "tuple", frozenset: "frozenset"}


#: Where a generated catalogue's `torch.Tensor` stand-in lives (it defers importing torch).
_LAZY_TENSOR_MODULE = "conformance.runtime.lazy_torch"


def _custom_leaf(tp: type, array_typecode: Optional[str]) -> Optional[T]:
    if tp is array.array or tp is _SubscriptableArray:  # a bare `array` evaluates to the stand-in
        return T("Array", name=array_typecode)
    mod = getattr(tp, "__module__", "")
    if tp.__name__ == "Tensor" and (mod.startswith("torch") or mod == _LAZY_TENSOR_MODULE):
        return T("Tensor")
    if tp.__name__ == "ndarray" and mod.startswith("numpy"):
        return T("NDArray")
    return None


class _Extractor:
    def __init__(self, array_typecode: Optional[str]):
        self.array_typecode = array_typecode
        self.structs: dict[str, type] = {}
        self.enums: dict[str, type[enum.Enum]] = {}
        self.queue: deque[type] = deque()
        # Set for dataclass catalogues: classes with no wire form found while converting a field.
        self.opaque: Optional[list[str]] = None

    # -- types ---------------------------------------------------------------
    def convert(self, tp: Any, where: str) -> tuple[T, list[str]]:
        """Python annotation -> (type node, field annotations such as "base64")."""
        notes: list[str] = []
        if typing.get_origin(tp) is typing.Annotated:
            base, *meta = typing.get_args(tp)
            notes = ["base64" for m in meta if type(m).__name__ == "Base64Bytes"]
            tp = base
        if self.opaque is not None:
            self.opaque.clear()
        node = self.node(tp, where)
        return node, notes + sorted(set(self.opaque or ()))

    def node(self, tp: Any, where: str) -> T:
        if tp is Any or tp is object:
            return T("Any")
        if tp is None or tp in _PRIMS:
            return T(_PRIMS.get(tp, "None"))
        alias_value = getattr(tp, "__value__", None)  # PEP 695 `type X = ...`
        if alias_value is not None and type(tp).__name__ == "TypeAliasType":
            return self.node(alias_value, where)
        supertype = getattr(tp, "__supertype__", None)  # typing.NewType
        if supertype is not None:
            return self.node(supertype, where)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            return self.node(args[0], where)
        if origin is array.array:  # array[int] on 3.12+ (earlier: _SubscriptableArray)
            return T("Array", name=self.array_typecode)
        if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
            arms: list[T] = []
            for a in args:
                n = self.node(a, where)
                for arm in n.args if n.kind == "Union" else (n,):
                    if arm not in arms:
                        arms.append(arm)
            return canonical(T("Union", tuple(arms)))
        if origin is typing.Literal:
            for v in args:
                if not isinstance(v, (str, int, bool, type(None))):
                    raise UnsupportedTypeError(f"{where}: Literal value {v!r} is not a JSON scalar")
            return canonical(T("Literal", values=tuple(args)))
        if origin in _CONTAINERS or tp in _CONTAINERS:
            kind = _CONTAINERS[origin or tp]
            n_args = 2 if kind == "Dict" else 1
            sub = args or (Any,) * n_args
            return T(kind, tuple(self.node(a, where) for a in sub))
        if origin is tuple or tp is tuple:
            if not args:
                return T("VarTuple", (T("Any"),))
            if len(args) == 2 and args[1] is Ellipsis:
                return T("VarTuple", (self.node(args[0], where),))
            if args == ((),):
                return T("Tuple")
            return T("Tuple", tuple(self.node(a, where) for a in args))
        if isinstance(tp, type):
            if issubclass(tp, msgspec.Struct) or dataclasses.is_dataclass(tp):
                self.add_struct(tp)
                return T("Ref", name=tp.__name__)
            if issubclass(tp, enum.Enum):
                self.add_enum(tp, where)
                return T("Ref", name=tp.__name__)
            leaf = _custom_leaf(tp, self.array_typecode)
            if leaf is not None:
                return leaf
            if self.opaque is not None:
                # A dataclass catalogue sent with pickle may hold any Python object: record
                # it as Any, and the class, for the migration report (it has no msgpack form).
                self.opaque.append(f"python:{tp.__module__}.{tp.__qualname__}")
                return T("Any")
        raise UnsupportedTypeError(f"{where}: unsupported type {tp!r}")

    # -- catalogue -----------------------------------------------------------
    def add_struct(self, cls: type) -> None:
        known = self.structs.get(cls.__name__)
        if known is cls:
            return
        if known is not None:
            raise UnsupportedTypeError(
                f"two structs named {cls.__name__}: {known.__module__} and {cls.__module__}"
            )
        self.structs[cls.__name__] = cls
        self.queue.append(cls)

    def add_enum(self, cls: type[enum.Enum], where: str) -> None:
        known = self.enums.get(cls.__name__)
        if known is not None and known is not cls:
            raise UnsupportedTypeError(f"{where}: two enums named {cls.__name__}")
        self.enums[cls.__name__] = cls

    def struct_spec(self, cls: type, role: Role) -> StructSpec:
        if dataclasses.is_dataclass(cls):
            return self.dataclass_spec(cls, role)
        assert issubclass(cls, msgspec.Struct), cls  # the queue holds only structs and dataclasses
        cfg = cls.__struct_config__
        infos = _struct_fields(cls)
        fields = []
        for info in infos:
            where = f"{cls.__name__}.{info.name}"
            node, notes = self.convert(info.type, where)
            fields.append(
                Field(
                    name=info.name,
                    type=render(node),
                    default=self.default(info, node, where),
                    annotations=notes,
                    encode_name=info.encode_name if info.encode_name != info.name else None,
                )
            )
        options = {o: True for o in _BOOL_OPTIONS if getattr(cfg, o, False)}
        options["array_like"] = bool(cfg.array_like)
        # msgspec's __match_args__ lists the positional fields: none when all are keyword-only.
        # (inspect.signature would evaluate the annotations again, array[int] included.)
        options["kw_only"] = not cls.__match_args__
        base = next(
            (b.__name__ for b in cls.__mro__[1:] if isinstance(b, type) and issubclass(b, msgspec.Struct)
             and b is not msgspec.Struct),
            None,
        )
        return StructSpec(
            name=cls.__name__,
            module=cls.__module__,
            fields=fields,
            tag=cfg.tag if isinstance(cfg.tag, str) else (None if cfg.tag is None else str(cfg.tag)),
            tag_field=cfg.tag_field,
            base=base,
            options=dict(sorted(options.items())),
            role=role,
        )

    def dataclass_spec(self, cls: type, role: Role) -> StructSpec:
        """A dataclass (implementations from before the msgspec migration, sent with pickle):
        no tag, no msgpack form; options records dataclass=True."""
        hints = _type_hints(cls)
        fields = []
        for info in dataclasses.fields(cls):
            where = f"{cls.__name__}.{info.name}"
            node, notes = self.convert(hints[info.name], where)
            fields.append(Field(name=info.name, type=render(node), annotations=notes,
                                default=self.default(_DataclassDefault(info), node, where)))
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        options = {"array_like": False, "dataclass": True, "frozen": params.frozen, "eq": params.eq,
                   "order": params.order,
                   "kw_only": all(f.kw_only for f in dataclasses.fields(cls)) and bool(fields)}
        base = next((b.__name__ for b in cls.__mro__[1:] if dataclasses.is_dataclass(b)), None)
        return StructSpec(name=cls.__name__, module=cls.__module__, fields=fields, base=base,
                          options={k: v for k, v in sorted(options.items()) if v or k == "array_like"}, role=role)

    def default(self, info: Any, node: T, where: str) -> Default:
        if info.default is not msgspec.NODEFAULT:
            value = info.default
            if isinstance(value, enum.Enum):
                return Default("enum", value=value.name)
            if isinstance(value, (tuple, frozenset, set, list)):
                value = list(value)
            try:
                msgspec.json.encode(value)
            except TypeError:
                raise UnsupportedTypeError(f"{where}: default {value!r} is not a JSON value") from None
            return Default("value", value=value)
        factory = info.default_factory
        if factory is msgspec.NODEFAULT:
            return Default("required")
        if factory in _FACTORIES:
            return Default("factory", factory=_FACTORIES[factory])
        if _literal_lambda(factory):
            # `lambda: ["all"]`: a fresh copy of a literal each time, i.e. a value default.
            return Default("value", value=msgspec.json.decode(msgspec.json.encode(factory())))
        if isinstance(factory, type) and (issubclass(factory, msgspec.Struct) or dataclasses.is_dataclass(factory)):
            self.add_struct(factory)
            return Default("factory", factory=factory.__name__)
        # Any other callable (e.g. a fresh uuid per instance): the value is made by the
        # implementation at construction time and is never implied by the wire.
        return Default("factory", factory="opaque")


def _literal_lambda(factory: Any) -> bool:
    """A lambda with no arguments that looks up no name: its body can only build a literal."""
    code = getattr(factory, "__code__", None)
    return (getattr(factory, "__name__", "") == "<lambda>" and code is not None and not code.co_argcount
            and not code.co_kwonlyargcount and not code.co_names and not code.co_freevars)


class _SubscriptableArray:
    """`array[int]` where array.array cannot be subscripted (Python < 3.12): annotations a
    module writes under `from __future__ import annotations` still evaluate."""

    def __class_getitem__(cls, item: Any) -> Any:
        return array.array  # the item (int) says nothing of the typecode


_ARRAY_MODULE = types.SimpleNamespace(array=_SubscriptableArray)


def _array_names(cls: type) -> dict[str, Any]:
    """Names bound to array.array or the array module in the modules of cls and its bases."""
    if hasattr(array.array, "__class_getitem__"):
        return {}
    names: dict[str, Any] = {}
    for base in cls.__mro__:
        for name, value in vars(sys.modules.get(base.__module__, types)).items():
            if value is array.array:
                names[name] = _SubscriptableArray
            elif value is array:
                names[name] = _ARRAY_MODULE
    return names


def _type_hints(cls: type) -> dict[str, Any]:
    """The class's evaluated annotations, with extras (Annotated) kept."""
    try:
        return typing.get_type_hints(cls, include_extras=True, localns=_array_names(cls) or None)
    except Exception as exc:  # unresolvable forward reference and the like
        raise UnsupportedTypeError(f"{cls.__name__}: cannot resolve field types: {exc}") from exc


def _struct_fields(cls: type[msgspec.Struct]) -> list[msgspec.structs.FieldInfo]:
    """msgspec.structs.fields(cls), with the annotations evaluated by _type_hints."""
    hints = _type_hints(cls)
    npos = len(cls.__struct_fields__) - len(cls.__struct_defaults__)
    infos = []
    for name, encode_name, default in zip(cls.__struct_fields__, cls.__struct_encode_fields__,
                                          (msgspec.NODEFAULT,) * npos + cls.__struct_defaults__):
        factory = getattr(default, "factory", msgspec.NODEFAULT)  # msgspec's Factory wrapper
        infos.append(msgspec.structs.FieldInfo(
            name=name, encode_name=encode_name, type=hints[name],
            default=msgspec.NODEFAULT if factory is not msgspec.NODEFAULT else default, default_factory=factory))
    return infos


class _DataclassDefault:
    """A dataclass field's default in the shape of msgspec's field info."""

    def __init__(self, info: dataclasses.Field[Any]) -> None:
        missing = dataclasses.MISSING
        self.default = msgspec.NODEFAULT if info.default is missing else info.default
        self.default_factory = msgspec.NODEFAULT if info.default_factory is missing else info.default_factory


def _all_subclasses(cls: type) -> Iterable[type]:
    subclasses: list[type] = cls.__subclasses__()
    for sub in subclasses:
        yield sub
        yield from _all_subclasses(sub)


def _default_roots(module: types.ModuleType) -> list[type]:
    """Tagged structs defined in the module whose parents are not tagged structs."""
    roots = []
    for obj in vars(module).values():
        if (
            isinstance(obj, type)
            and issubclass(obj, msgspec.Struct)
            and obj.__module__ == module.__name__
            and obj.__struct_config__.tag is not None
            and not any(
                issubclass(b, msgspec.Struct) and b is not msgspec.Struct and b.__struct_config__.tag is not None
                for b in obj.__mro__[1:]
                if isinstance(b, type) and b is not obj
            )
        ):
            roots.append(obj)
    return roots


def _dataclass_messages(module: types.ModuleType) -> list[type]:
    """A catalogue from before the msgspec migration has no tags. The messages are the
    dataclasses defined in the module that no other one derives from, except those that
    only travel inside other messages: reached through a field, with no dataclass base."""
    defined = [obj for obj in vars(module).values()
               if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__]
    leaves = [c for c in defined if not any(d is not c and issubclass(d, c) for d in defined)]
    reached: set[type] = set()
    for cls in defined:
        try:
            hints = typing.get_type_hints(cls, localns=_array_names(cls) or None)
        except Exception:  # noqa: BLE001 - the extractor names the unresolvable field later
            continue
        todo = list(hints.values())
        while todo:
            tp = todo.pop()
            if isinstance(tp, type) and dataclasses.is_dataclass(tp):
                reached.add(tp)
            todo += [a for a in typing.get_args(tp) if a is not Ellipsis]
    return [c for c in leaves
            if c not in reached or any(dataclasses.is_dataclass(b) for b in c.__mro__[1:])]


def _dist_version(module_name: str) -> str:
    top = module_name.split(".")[0]
    try:
        return importlib.metadata.version(top)
    except importlib.metadata.PackageNotFoundError:
        return getattr(sys.modules[top], "__version__", "0")


def extract(module_name: str, **options: Any) -> Manifest:
    """Walk a module's IPC catalogue into a manifest (see extract_with_classes)."""
    return extract_with_classes(module_name, **options)[0]


def extract_with_classes(
    module_name: str,
    *,
    roots: Sequence[str] = (),
    imports: Sequence[str] = (),
    union_attr: str = "_all_types",  # upstream's name; ours is CUSTOM_MESSAGE_TYPES
    implementation: Optional[str] = None,
    version: Optional[str] = None,
    array_typecode: Optional[str] = "q",
    exclude: Sequence[str] = (),
) -> tuple[Manifest, dict[str, type]]:
    """Walk a module's IPC catalogue: every struct reachable from the roots (subclasses at
    any depth), the types registered in the module's union attribute, and every struct
    and enum their fields reach, less the `exclude`d names. array.array fields get the spec's
    default typecode q unless array_typecode says otherwise. Returns the manifest and its
    classes by name."""
    module = importlib.import_module(module_name)
    for extra in imports:  # modules that register custom types on import
        importlib.import_module(extra)
    missing = [r for r in roots if not isinstance(getattr(module, r, None), type)]
    if missing:
        raise UsageError(f"--root {missing[0]}: no class of that name in {module_name}")
    root_classes = [getattr(module, r) for r in roots] if roots else _default_roots(module)
    registered = [
        t for t in getattr(module, union_attr, ())
        if isinstance(t, type) and (issubclass(t, msgspec.Struct) or dataclasses.is_dataclass(t))
    ]
    dataclass_catalogue = not root_classes and not registered
    if dataclass_catalogue:
        registered = _dataclass_messages(module)
        root_classes = [b for c in registered for b in c.__mro__[1:] if dataclasses.is_dataclass(b)]

    ex = _Extractor(array_typecode)
    if dataclass_catalogue or any(dataclasses.is_dataclass(c) for c in [*root_classes, *registered]):
        ex.opaque = []
    for root in root_classes:
        ex.add_struct(root)
    union = message_union(root_classes, registered, _all_subclasses, lambda c: c.__name__,
                          dataclass_catalogue=dataclass_catalogue, exclude=exclude)
    for cls in union:
        ex.add_struct(cls)

    union_names = {c.__name__ for c in union}
    specs: dict[str, StructSpec] = {}
    while ex.queue:
        cls = ex.queue.popleft()
        role = struct_role(cls.__name__, union_names,
                           lambda: any(issubclass(s, cls) for s in union if s is not cls))  # noqa: B023 - called at once, inside this iteration
        specs[cls.__name__] = ex.struct_spec(cls, role)

    enums = {
        name: EnumSpec(
            name=name,
            module=cls.__module__,
            members={m.name: m.value for m in cls},
            base=next(b.__name__ for b in cls.__mro__[1:] if issubclass(b, enum.Enum)),
        )
        for name, cls in sorted(ex.enums.items())
    }
    primitives = [
        _PRIMS[t] for t in getattr(module, union_attr, ()) if t in _PRIMS
    ] or ["int", "float", "bool", "bytes"]
    manifest = Manifest(
        implementation=implementation or module_name.split(".")[0],
        version=version or _dist_version(module_name),
        module=module_name,
        structs=dict(sorted(specs.items())),
        enums=enums,
        # Union order carries no meaning on the wire (tags select the arm): keep it stable.
        union=sorted(c.__name__ for c in union) + primitives,
        extracted_with={
            "msgspec": msgspec.__version__,
            "python": platform.python_version(),
        },
    )
    aliases = sorted(f"{name}={obj.__name__}" for name, obj in vars(module).items()
                     if isinstance(obj, type) and obj.__name__ in specs and name != obj.__name__
                     and specs[obj.__name__].module == getattr(obj, "__module__", None))
    if aliases:
        manifest.extracted_with[ALIASES] = ", ".join(aliases)
    return manifest, {**ex.structs, **ex.enums}
