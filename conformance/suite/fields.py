"""Where the manifest puts what the checks need (fields of a kind, the message that carries a
tensor) and where a decoded value still holds a PickleWrapper. Shared by the check modules."""

from __future__ import annotations

from typing import Any, Callable

import msgspec
import pytest

#: The field type that carries tensors in the catalogue's messages.
TENSOR_FIELD = "Optional[List[Optional[Tensor]]]"
WRAPPER_TYPES = ("PickleWrapper", "Optional[PickleWrapper]")


#: manifest_default of a field whose default an opaque factory makes (not comparable)
OPAQUE_DEFAULT = object()
_FACTORIES: dict[str, Callable[[], Any]] = {"list": list, "dict": dict, "set": set, "frozenset": frozenset,
                                            "tuple": tuple}


def manifest_default(field: Any) -> Any:
    """The value an absent field takes, as the manifest states it (a `value` default without a
    value is None; a container factory is the empty container), or OPAQUE_DEFAULT."""
    d = field.default
    if d.kind == "value":
        return d.value
    if d.kind == "factory" and d.factory in _FACTORIES:
        return _FACTORIES[d.factory]()
    return OPAQUE_DEFAULT


def default_value(ipc: Any, field: Any) -> Any:
    """manifest_default as the Python value a decoder holds (an enum's member for its value)."""
    value = manifest_default(field)
    t = field.type_expr
    arms = [a for a in t.args if a.kind != "None"] if t.kind == "Union" else [t]
    if value is not None and len(arms) == 1 and arms[0].kind == "Ref" and arms[0].name in ipc.manifest.enums:
        return ipc.adapter.classes()[arms[0].name](value)
    return value


def structs_with_field(ipc: Any, predicate: Callable[[Any], bool]) -> list[str]:
    """The messages of the manifest with at least one field the predicate accepts."""
    return [s.name for s in ipc.manifest.messages if any(predicate(f) for f in s.fields)]


def wrapper_fields(spec: Any) -> list[str]:
    """The PickleWrapper-typed fields of one struct spec."""
    return [f.name for f in spec.fields if f.type in WRAPPER_TYPES]


def opaque_structs(ipc: Any) -> list[str]:
    """The messages with a PickleWrapper-typed field."""
    return [s.name for s in ipc.manifest.messages if wrapper_fields(s)]


def tensor_carrier(ipc: Any) -> tuple[str, str]:
    """(message, field) of the first message with a tensor-list field; skips the check if none."""
    for spec in ipc.manifest.messages:
        for field in spec.fields:
            if field.type == TENSOR_FIELD:
                return spec.name, field.name
    pytest.skip(f"no message of {ipc.manifest.id} has a {TENSOR_FIELD} field")


def find_wrappers(value: Any, path: str = "$") -> list[str]:
    """Paths at which a decoded value still holds a PickleWrapper (by class name: every
    implementation has its own class), searching structs, lists, tuples and dicts."""
    if type(value).__name__ == "PickleWrapper":
        return [path]
    if isinstance(value, msgspec.Struct):
        return [p for n in value.__struct_fields__ for p in find_wrappers(getattr(value, n), f"{path}.{n}")]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in find_wrappers(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in find_wrappers(v, f"{path}[{k!r}]")]
    return []
