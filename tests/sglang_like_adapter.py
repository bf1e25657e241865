"""A model of SGLang 0.5.23's three value-changing wire defects on top of the reference, so
the cause lines of conformance/expectations/sglang-0.5.23.txt can be checked where SGLang
itself does not install: each defect is written as SGLang's code behaves (see that list).
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec
import numpy as np
import torch

from reference_tools.adapter import ReferenceAdapter

FP8 = {getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)}


def _map(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """A copy of value with leaf applied to every struct, ndarray and tensor (structs first)."""
    value = leaf(value)
    if isinstance(value, msgspec.Struct):
        return msgspec.structs.replace(value, **{f: _map(getattr(value, f), leaf) for f in value.__struct_fields__})
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, leaf) for v in value)
    if isinstance(value, dict):
        return {k: _map(v, leaf) for k, v in value.items()}
    return value


def _sampling_mask_reducer(value: Any) -> Any:
    # SamplingMaskChunk.__reduce_ex__ rebuilds its arrays flat, as int32 / int32 / float32.
    if type(value).__name__ != "SamplingMaskChunk":
        return value
    flat = {"lengths": np.int32, "token_ids": np.int32, "logprobs": np.float32}
    return msgspec.structs.replace(value, **{f: np.asarray(getattr(value, f)).astype(t).reshape(-1)
                                             for f, t in flat.items()})


def _contiguous(value: Any) -> Any:
    # The msgpack enc_hook sends np.ascontiguousarray(x), which makes a 0-d ndarray 1-d.
    return value.reshape(1) if isinstance(value, np.ndarray) and value.ndim == 0 else value


class SGLangLike(ReferenceAdapter):
    name = "sglang-like"

    def encode(self, obj: Any, transport: str) -> bytes:
        if transport == "pickle":
            return super().encode(_map(obj, _sampling_mask_reducer), transport)
        return super().encode(_map(obj, _contiguous), transport)

    def decode(self, data: bytes, transport: str) -> Any:
        value = super().decode(data, transport)
        if transport == "pickle":
            def refuse_fp8(v: Any) -> Any:
                if isinstance(v, torch.Tensor) and v.dtype in FP8:
                    raise AttributeError("type object 'torch.storage.UntypedStorage' has no attribute 'dtype'")
                return v
            _map(value, refuse_fp8)
        return value
