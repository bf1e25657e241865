"""Exact, type-aware comparison of decoded values.

tuple is not list, int is not float, floats compare bitwise (NaN equals NaN,
-0.0 differs from 0.0: SPEC §3 keeps the bit pattern of every float64), wherever they
are: values, dict keys, set members; tensors by dtype, shape, device, requires_grad and
bytes; numpy by dtype, shape and bytes; array.array by typecode and bytes.
Structs of two implementations compare by tag and fields, enums by name and value.
A faithful copy (copy.deepcopy, a pickle round trip) never differs from its original.
"""

from __future__ import annotations

import array
import dataclasses
import enum
import struct
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from conformance.tensors import WireTensor, is_tensor

if TYPE_CHECKING:
    import torch


def differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Every place where actual differs from expected, as 'path: what' lines (empty = identical)."""
    out: list[str] = []
    _diff(expected, actual, path or "$", out)
    return out


def identical(expected: Any, actual: Any) -> bool:
    return not differences(expected, actual)


def _kind(value: Any) -> str:
    if isinstance(value, msgspec.Struct):
        return f"struct {type(value).__name__}"
    if isinstance(value, enum.Enum):
        return f"enum {type(value).__name__}"
    return type(value).__name__


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if dataclasses.is_dataclass(a) and not isinstance(a, type) and type(a) is type(b):  # pre-msgspec catalogues
        for f in dataclasses.fields(a):
            _diff(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}", out)
        return
    if isinstance(a, msgspec.Struct) and isinstance(b, msgspec.Struct):
        if type(a).__name__ != type(b).__name__:
            out.append(f"{path}: expected {_kind(a)}, got {_kind(b)}")
            return
        fa, fb = a.__struct_fields__, b.__struct_fields__
        if fa != fb:
            out.append(f"{path}: fields differ: {fa} vs {fb}")
            return
        for name in fa:
            _diff(getattr(a, name), getattr(b, name), f"{path}.{name}", out)
        return
    if isinstance(a, enum.Enum) or isinstance(b, enum.Enum):
        same = (isinstance(a, enum.Enum) and isinstance(b, enum.Enum) and type(a).__name__ == type(b).__name__
                and a.name == b.name and a.value == b.value)
        if not same:
            out.append(f"{path}: expected {a!r}, got {b!r}")
        return
    if type(a) is not type(b):
        out.append(f"{path}: expected {_kind(a)} {_short(a)}, got {_kind(b)} {_short(b)}")
        return
    if isinstance(a, float):
        if struct.pack("<d", a) != struct.pack("<d", b):
            shown = (repr(a), repr(b)) if repr(a) != repr(b) else (f"{a!r} ({_hex(a)})", f"{b!r} ({_hex(b)})")
            out.append(f"{path}: expected {shown[0]}, got {shown[1]}")
    elif isinstance(a, (list, tuple)):
        if len(a) != len(b):
            out.append(f"{path}: expected {len(a)} items, got {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out)
    elif isinstance(a, dict):
        # Keys are matched by identity (bits for floats), not ==: a NaN key is never == the
        # NaN key of a copy, and -0.0 == 0.0 although they are different values.
        ka, kb = [_identity(k) for k in a], [_identity(k) for k in b]
        if ka != kb:
            if sorted(map(repr, ka)) != sorted(map(repr, kb)):
                out.append(f"{path}: keys {sorted(map(repr, a))} != {sorted(map(repr, b))}")
                return
            out.append(f"{path}: key order {list(a)!r} != {list(b)!r}")
        by_identity = dict(zip(kb, b))
        for ident, key in zip(ka, a):
            if ident in by_identity:
                _diff(a[key], b[by_identity[ident]], f"{path}[{key!r}]", out)
    elif isinstance(a, WireTensor):
        for attr in ("dtype", "shape", "device"):
            if getattr(a, attr) != getattr(b, attr, None):
                out.append(f"{path}: tensor {attr} {getattr(a, attr)} != {getattr(b, attr, None)}")
                return
        if a.data != b.data:
            out.append(f"{path}: tensor values differ")
    elif is_tensor(a):
        _diff_tensor(a, b, path, out)
    elif isinstance(a, np.ndarray):
        for attr in ("dtype", "shape"):
            if getattr(a, attr) != getattr(b, attr):
                out.append(f"{path}: ndarray {attr} {getattr(a, attr)} != {getattr(b, attr)}")
                return
        if np.ascontiguousarray(a).tobytes() != np.ascontiguousarray(b).tobytes():
            out.append(f"{path}: ndarray values differ")
    elif isinstance(a, array.array):
        if a.typecode != b.typecode or a.tobytes() != b.tobytes():
            out.append(f"{path}: expected {a!r}, got {b!r}")
    elif isinstance(a, msgspec.msgpack.Ext):
        if a.code != b.code or bytes(a.data) != bytes(b.data):
            out.append(f"{path}: ext {a.code} differs from ext {b.code}")
    elif isinstance(a, (set, frozenset)):
        if sorted(repr(_identity(x)) for x in a) != sorted(repr(_identity(x)) for x in b):
            out.append(f"{path}: expected {a!r}, got {b!r}")
    elif isinstance(a, complex):
        if struct.pack("<dd", a.real, a.imag) != struct.pack("<dd", b.real, b.imag):
            out.append(f"{path}: expected {a!r}, got {b!r}")
    elif a != b:
        out.append(f"{path}: expected {_short(a)}, got {_short(b)}")


def _hex(value: float) -> str:
    """The float's bits: NaNs with other payloads or signs print alike."""
    return "0x" + struct.pack(">d", value).hex()


def _identity(value: Any) -> Any:
    """What a dict key or set member is, for matching: floats by their bits (NaN is NaN,
    -0.0 is not 0.0), tuples and frozensets item by item, anything else by type and value."""
    if type(value) is float:
        return ("float", struct.pack("<d", value))
    if type(value) is complex:
        return ("complex", struct.pack("<dd", value.real, value.imag))
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return (type(value).__name__, tuple(_identity(v) for v in value))
    if isinstance(value, frozenset):
        return ("frozenset", tuple(sorted((repr(_identity(v)) for v in value))))
    return (_kind(value), value)


def _diff_tensor(a: torch.Tensor, b: torch.Tensor, path: str, out: list[str]) -> None:
    import torch

    for attr in ("dtype", "shape", "device", "requires_grad"):
        if getattr(a, attr) != getattr(b, attr):
            out.append(f"{path}: tensor {attr} {getattr(a, attr)} != {getattr(b, attr)}")
            return
    if a.numel() and not torch.equal(_bits(a), _bits(b)):
        out.append(f"{path}: tensor values differ")


def _bits(t: torch.Tensor) -> torch.Tensor:
    import torch

    flat = t.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8) if flat.dtype is not torch.bool else flat


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
