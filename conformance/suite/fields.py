"""Where the manifest puts what the checks need (fields of a kind, the message that carries a
tensor) and where a decoded value still holds a PickleWrapper. Shared by the check modules."""

from __future__ import annotations

from typing import Any, Callable

import msgspec
import pytest

#: The field type that carries tensors in the catalogue's messages.
TENSOR_FIELD = "Optional[List[Optional[Tensor]]]"
WRAPPER_TYPES = ("PickleWrapper", "Optional[PickleWrapper]")


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
