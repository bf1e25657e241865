"""Implementations that break one byte rule of SPEC each while every value still looks right:
the reference adapter with exactly one planted violation, for tests/test_spec_rules.py."""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

import msgspec
import numpy as np

from reference_tools.adapter import ReferenceAdapter


def _walk(value: Any, fix: Callable[[Any], Any]) -> Any:
    """fix() applied to every value inside structs, lists, tuples and dicts (in place for structs)."""
    value = fix(value)
    if isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            msgspec.structs.force_setattr(value, name, _walk(getattr(value, name), fix))
        return value
    if isinstance(value, list):
        return [_walk(item, fix) for item in value]
    if isinstance(value, tuple):
        return tuple(_walk(item, fix) for item in value)
    if isinstance(value, dict):
        return {key: _walk(item, fix) for key, item in value.items()}
    return value


class OmitsEqualDefaults(ReferenceAdapter):
    """R-MSG-4: omit_defaults compares with ==, so a -0.0 is left out as 'equal' to 0.0."""

    def encode(self, obj: Any, transport: str) -> bytes:
        def as_default(value: Any) -> Any:
            config = getattr(type(value), "__struct_config__", None)
            if config is None or not config.omit_defaults or config.array_like:
                return value
            for field in msgspec.structs.fields(value):
                if isinstance(field.default, float) and getattr(value, field.name) == field.default:
                    msgspec.structs.force_setattr(value, field.name, field.default)  # the object msgspec omits
            return value

        return super().encode(_walk(copy.deepcopy(obj), as_default), transport)


class CanonicalNaN(ReferenceAdapter):
    """R-VAL-5: the decoder turns every NaN into the one canonical NaN (as JavaScript engines may)."""

    def decode(self, data: bytes, transport: str) -> Any:
        return _walk(super().decode(data, transport),
                     lambda v: float("nan") if isinstance(v, float) and math.isnan(v) else v)


class NativeByteOrder(ReferenceAdapter):
    """R-EXT-6: big-endian ndarrays are converted to little-endian on the way out and in."""

    @staticmethod
    def _little(value: Any) -> Any:
        if isinstance(value, np.ndarray) and value.dtype.byteorder == ">":
            return value.astype(value.dtype.newbyteorder("<"))
        return value

    def encode(self, obj: Any, transport: str) -> bytes:
        return super().encode(_walk(copy.deepcopy(obj), self._little), transport)

    def decode(self, data: bytes, transport: str) -> Any:
        return _walk(super().decode(data, transport), self._little)


class OldDtypeList(ReferenceAdapter):
    """R-TEN-1: the decoder knows only the dtypes the spec listed before its table was complete."""

    KNOWN = {"float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool",
             "float8_e4m3fn", "float8_e5m2", "complex64"}

    def decode(self, data: bytes, transport: str) -> Any:
        import torch

        from reference_impl.errors import WireError

        def known(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and str(value.dtype).removeprefix("torch.") not in self.KNOWN:
                raise WireError(transport, f"tensor dtype {value.dtype} is unknown")
            return value

        return _walk(super().decode(data, transport), known)
