"""The reference codec's encoders and fast paths. Performance only: every path here gives the
bytes and values of the plain path (tests/test_bench.py checks each against it). Private to
the codec; thresholds live in _codec_limits.

- the pickle transport's encoder (tensors whose dtype torch cannot unpickle travel as raw bytes);
- msgspec's encoder with a one-call array hook, and the plain encoder;
- List[array] fields encoded in one batched pass (msgspec.Raw);
- large tensors spliced into the output (one copy of their bytes instead of two);
- the twin decoder's batched conversion of List[Ext] back to arrays;
- the frame collector of the opt-in multipart (zero-copy) path.
"""

from __future__ import annotations

import array
import copy
import io
import os
import pickle
import sys
from functools import lru_cache
from typing import Any

import msgspec
import numpy as np

from . import ext
from ._codec_limits import ARRAY_LIST_MIN, SPLICE_THRESHOLD

# torch is imported only once a tensor is met: one exists only where torch was imported (see ext).


@lru_cache(maxsize=None)
def _pickle_as_buffer() -> frozenset[Any]:
    """torch (2.13, 2.14) cannot unpickle float8 tensors ("UntypedStorage has no attribute
    dtype"): the reference pickles them through the same layout as the msgpack ext."""
    import torch

    return frozenset(getattr(torch, n) for n in dir(torch) if n.startswith("float8_")
                     and isinstance(getattr(torch, n), torch.dtype))


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(obj, torch.Tensor):
            return NotImplemented
        if obj.dtype in _pickle_as_buffer():
            _, raw = ext.tensor_bytes(obj)
            return ext.restore_tensor, (list(ext.tensor_metadata(obj)), raw.tobytes())
        # Gradients never travel (msgpack has no room for them): both transports agree.
        if obj.requires_grad:
            return torch.Tensor.detach, (obj.detach(),)
        return NotImplemented


def pickle_dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


class LargeBuffer(Exception):
    """Raised by _enc_hook: the message holds a large tensor/ndarray; splice it (encode_spliced)."""


_ARRAY_HEADERS = ext._ARRAY_HEADERS


_Ext = msgspec.msgpack.Ext


def _enc_hook(obj: Any) -> Any:
    if type(obj) is array.array:  # as ext.enc_hook, one call less
        return _Ext(ext.EXT_ARRAY, _ARRAY_HEADERS[obj.typecode] + obj)
    if _is_buffer(obj) and _nbytes(obj) >= SPLICE_THRESHOLD:
        raise LargeBuffer
    return ext.enc_hook(obj)


def _is_buffer(obj: Any) -> bool:
    """A torch tensor or a numpy ndarray."""
    if isinstance(obj, np.ndarray):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _nbytes(obj: Any) -> int:
    try:
        return int(obj.nbytes)
    except Exception:  # noqa: BLE001 - sparse, meta, ...: the plain path deals with it
        return 0


encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook)


plain_encoder = msgspec.msgpack.Encoder(enc_hook=ext.enc_hook)


def with_array_raw(obj: Any, names: tuple[str, ...], copied: bool) -> Any:
    """obj, or a shallow copy whose long List[array] fields hold their msgpack encoding
    (msgspec.Raw), built in one batched pass: the same bytes, no Python call per element."""
    out = obj
    for name in names:
        values = getattr(obj, name)
        if type(values) is list and len(values) >= ARRAY_LIST_MIN:
            raw = ext.array_list_raw(values)
            if raw is not None:
                if out is obj and not copied:
                    out = copy.copy(obj)
                msgspec.structs.force_setattr(out, name, raw)
    return out


# Placeholder payload for a spliced buffer: 12 random bytes + a 4-byte index (fixext 16).
SPLICE_MARK = os.urandom(12)


_EXT32_MIN = 1 << 16


def encode_spliced(message: Any) -> bytes:
    """Encode a message holding large tensors/ndarrays with one copy of their bytes: msgspec
    encodes a 16-byte placeholder ext, then the placeholders are replaced by the real ext
    (header + metadata + raw bytes) while joining the output. Same bytes as the plain path."""
    buffers: list[tuple[bytes, int, bytes, memoryview]] = []

    def hook(obj: Any) -> Any:
        if type(obj) is not array.array and _is_buffer(obj) and _nbytes(obj) >= SPLICE_THRESHOLD:
            parts = ext.buffer_parts(obj)
            if parts is not None:
                code, header, raw = parts
                mark = SPLICE_MARK + len(buffers).to_bytes(4, "big")
                buffers.append((mark, code, header, raw))
                return msgspec.msgpack.Ext(code, mark)
        return ext.enc_hook(obj)

    head = msgspec.msgpack.Encoder(enc_hook=hook).encode(message)
    pieces: list[Any] = []
    pos = 0
    for mark, code, header, raw in buffers:
        token = bytes((0xD8, code)) + mark  # how msgspec writes a 16-byte ext
        at = head.find(token, pos)
        size = len(header) + raw.nbytes
        if at < 0 or head.find(token, at + 1) >= 0 or not _EXT32_MIN <= size < 1 << 32:
            return plain_encoder.encode(message)  # marker collision or odd size: the plain path
        pieces += (head[pos:at], b"\xc9", size.to_bytes(4, "big"), bytes((code,)), header, raw)
        pos = at + len(token)
    pieces.append(head[pos:])
    return b"".join(pieces)


MISS = object()


def fast_decode(data: Any, twin: msgspec.msgpack.Decoder[Any], real: type, names: tuple[str, ...]) -> Any:
    """Decode a message of type `real` through its twin decoder: the List[array] fields arrive
    as List[Ext] and become arrays in one batched pass. MISS when anything is unusual (a
    decode error, an ext that is not a plain array): the caller then takes the plain path,
    which gives the same value or the ordinary error."""
    try:
        obj = twin.decode(data)
    except Exception:  # noqa: BLE001 - the plain path redoes it and reports properly
        return MISS
    values = msgspec.structs.asdict(obj)
    for name in names:
        exts = values[name]
        if exts is not None:
            arrays = ext.arrays_from_exts(exts)
            if arrays is None:
                return MISS
            values[name] = arrays
    return real(**values)


class FrameCollector:
    """enc_hook that moves large tensors into side frames instead of copying them inline."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.frames: list[Any] = []

    def __call__(self, obj: Any) -> Any:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(obj, torch.Tensor) \
                and obj.numel() * obj.element_size() >= self.threshold:
            _, raw = ext.tensor_bytes(obj)  # the view keeps the tensor's storage alive
            self.frames.append(raw)
            meta = [*ext.tensor_metadata(obj), len(self.frames)]
            return ext.pack_buffer(ext.EXT_OOB_TENSOR, meta, memoryview(b""))
        return ext.enc_hook(obj)
