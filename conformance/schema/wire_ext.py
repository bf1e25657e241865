"""The msgpack extension types of the wire (SPEC §4), the codec the golden vectors are made with.

`schema check --source`, `schema diff/verify` and the golden tools read source files and make
vectors; none of that needs torch, and an engine's CI job or pre-commit hook should not install
gigabytes to read `io_struct.py`. Where torch is installed a tensor is a real `torch.Tensor`;
where it is not, a tensor is a `WireTensor` (shape, dtype name, device and raw bytes: exactly
what the wire carries). Either way this codec writes and reads the same bytes: ext 1
`array.array`, ext 2 tensor, ext 3 numpy ndarray, each payload `4-byte big-endian metadata
length | msgpack metadata | raw bytes`. It lives on the conformance side: the reference
implementation's codec (reference_impl.ext) writes the same bytes, and the golden vectors prove it.
"""

from __future__ import annotations

import array
import importlib.util
import math
import re
import struct
import sys
import types
from functools import lru_cache
from typing import Any, Callable, Sequence

import msgspec
import numpy as np

__all__ = ["ExtDecodeError", "ExtEncodeError", "WireTensor", "dec_hook", "enc_hook", "ext_hook", "torch_available",
           "torch_standin"]

EXT_ARRAY, EXT_TENSOR, EXT_NDARRAY = 1, 2, 3
_META_LEN = struct.Struct(">I")
_encode_meta = msgspec.msgpack.Encoder().encode
_decode_meta = msgspec.msgpack.Decoder().decode

#: bytes per element of each torch dtype name the wire may carry
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "complex128": 16, "complex64": 8,
            "complex32": 4, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint64": 8, "uint32": 4, "uint16": 2,
            "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e5m2": 1,
            "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1}


@lru_cache(maxsize=None)
def torch_available() -> bool:
    """Whether torch can be imported here (found without importing it)."""
    if "torch" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


class WireTensor:
    """A tensor as the wire carries it: shape, dtype name (`float32`, `bfloat16`), device and the
    raw element bytes in C order, little-endian. Equal when all four are."""

    __slots__ = ("shape", "dtype", "device", "data")

    def __init__(self, shape: Sequence[int], dtype: str, device: str = "cpu", data: bytes = b"") -> None:
        self.shape, self.dtype, self.device, self.data = tuple(shape), dtype, device, bytes(data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WireTensor) and (self.shape, self.dtype, self.device, self.data) == (
            other.shape, other.dtype, other.device, other.data)

    __hash__ = None  # type: ignore[assignment]  # mutable in spirit, as a tensor: never a key

    def __repr__(self) -> str:
        return f"WireTensor(shape={list(self.shape)}, dtype={self.dtype!r}, device={self.device!r}, {len(self.data)} B)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (WireTensor, (self.shape, self.dtype, self.device, self.data))


#: What a generated catalogue module names `torch` where torch is not installed.
torch_standin = types.SimpleNamespace(Tensor=WireTensor)


def _header(metadata: Any) -> bytes:
    meta = _encode_meta(metadata)
    return _META_LEN.pack(len(meta)) + meta


def enc_hook(obj: Any) -> Any:
    if isinstance(obj, array.array):
        return msgspec.msgpack.Ext(EXT_ARRAY, _header(obj.typecode) + obj.tobytes())
    if isinstance(obj, WireTensor):
        return msgspec.msgpack.Ext(EXT_TENSOR, _header([list(obj.shape), obj.dtype, obj.device]) + obj.data)
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject or obj.dtype.fields is not None or obj.dtype.subdtype is not None:
            raise TypeError(f"numpy dtype {obj.dtype} cannot travel as msgpack")
        arr = obj if obj.flags.c_contiguous else obj.copy(order="C")
        return msgspec.msgpack.Ext(EXT_NDARRAY, _header([list(arr.shape), arr.dtype.str]) +
                                   arr.reshape(-1).view(np.uint8).tobytes())
    if isinstance(obj, np.generic) and not isinstance(obj, np.void):
        return obj.item()
    torch = sys.modules.get("torch")  # a real tensor exists only where torch was imported
    if torch is not None and isinstance(obj, torch.Tensor):
        return msgspec.msgpack.Ext(EXT_TENSOR, _header(_tensor_metadata(obj)) + _tensor_bytes(obj))
    raise TypeError(f"{type(obj).__module__}.{type(obj).__qualname__} has no msgpack form; "
                    "declare a precise field type or carry it in a PickleWrapper field")


class ExtEncodeError(msgspec.EncodeError, TypeError):
    """A value the spec's encoders refuse (SPEC R-TEN-1: a quantized, sparse or meta tensor)."""


def _tensor_metadata(tensor: Any) -> list[Any]:
    device = "cpu" if tensor.is_cpu else str(tensor.device)
    return [list(tensor.shape), str(tensor.dtype).removeprefix("torch."), device]


def _tensor_bytes(tensor: Any) -> bytes:
    """The element bytes of a dense tensor, C order (gradients, lazy conjugation and the device dropped)."""
    import torch

    if tensor.layout is not torch.strided or tensor.is_meta or tensor.is_quantized:
        raise ExtEncodeError(f"a {tensor.layout} {tensor.dtype} tensor has no raw-byte form on the wire")
    cpu = tensor.detach().resolve_conj().resolve_neg().to("cpu").contiguous().reshape(-1)
    return bytes(cpu.view(torch.uint8).numpy().tobytes())


def _real_tensor(shape: tuple[int, ...], dtype: str, device: str, raw: bytes) -> Any:
    import torch

    kind = getattr(torch, dtype, None)
    if not isinstance(kind, torch.dtype):
        raise ValueError(f"tensor dtype {dtype!r} is not a torch dtype here")
    tensor = torch.frombuffer(bytearray(raw), dtype=kind).reshape(shape) if raw else torch.empty(shape, dtype=kind)
    if device == "cpu":
        return tensor
    try:
        return tensor.to(device)
    except (RuntimeError, ValueError, AssertionError) as exc:
        raise ValueError(f"tensor device {device!r} is not available here: {exc}") from None


def _unpack(data: memoryview, what: str) -> tuple[Any, bytes]:
    if len(data) < _META_LEN.size:
        raise ValueError(f"{what} extension is shorter than its 4-byte metadata length")
    (size,) = _META_LEN.unpack_from(data)
    end = _META_LEN.size + size
    if end > len(data):
        raise ValueError(f"{what} extension declares {size} metadata bytes, has {len(data) - _META_LEN.size}")
    return _decode_meta(data[_META_LEN.size:end]), bytes(data[end:])


def _shape(shape: Any, what: str) -> tuple[int, ...]:
    if not isinstance(shape, (list, tuple)) or not all(type(d) is int and d >= 0 for d in shape) or len(shape) > 64:
        raise ValueError(f"{what} shape {shape!r} is not a list of at most 64 non-negative ints")
    return tuple(shape)


class ExtDecodeError(msgspec.DecodeError):
    """An extension payload the spec refuses (a msgspec.DecodeError, so a ValueError too)."""


def ext_hook(code: int, data: memoryview) -> Any:
    """Every malformed payload is refused with ExtDecodeError, as the spec's decoders refuse it."""
    try:
        return _ext_hook(code, data)
    except ExtDecodeError:
        raise
    except (ValueError, TypeError, OverflowError) as exc:  # numpy's and array's own refusals too
        raise ExtDecodeError(str(exc)) from None


#: SPEC R-TEN-3: `cpu`, or a device type with an optional index of 0 to 127 (torch's is 8-bit).
_DEVICE = re.compile(r"cpu|(?!cpu:)(?!meta)[a-z][a-z0-9_]*(?::(?:[0-9]|[1-9][0-9]|1[01][0-9]|12[0-7]))?")


def _ext_hook(code: int, data: memoryview) -> Any:
    if code == EXT_ARRAY:
        typecode, raw = _unpack(data, "array")
        if not isinstance(typecode, str) or typecode not in array.typecodes:
            raise ValueError(f"array typecode {typecode!r} is not an array.array typecode")
        return array.array(typecode, raw)
    if code == EXT_TENSOR:
        meta, raw = _unpack(data, "tensor")
        if not isinstance(meta, list) or len(meta) != 3 or not isinstance(meta[1], str) \
                or not isinstance(meta[2], str):
            raise ValueError(f"tensor metadata {meta!r} is not [shape, dtype, device]")
        shape, dtype, device = _shape(meta[0], "tensor"), meta[1], meta[2]
        if not _DEVICE.fullmatch(device):
            raise ValueError(f"tensor device {device!r} is not a device that can hold received data (SPEC R-TEN-3)")
        if dtype not in ITEMSIZE:
            raise ValueError(f"tensor dtype {dtype!r} is not a dtype that travels as raw bytes")
        if math.prod(shape) * ITEMSIZE[dtype] != len(raw):
            raise ValueError(f"tensor of shape {list(shape)} and dtype {dtype} needs "
                             f"{math.prod(shape) * ITEMSIZE[dtype]} bytes, got {len(raw)}")
        return _real_tensor(shape, dtype, device, raw) if torch_available() else WireTensor(shape, dtype, device, raw)
    if code == EXT_NDARRAY:
        meta, raw = _unpack(data, "ndarray")
        if not isinstance(meta, list) or len(meta) != 2 or not isinstance(meta[1], str):
            raise ValueError(f"ndarray metadata {meta!r} is not [shape, dtype]")
        shape, kind = _shape(meta[0], "ndarray"), np.dtype(meta[1])
        if kind.hasobject or kind.fields is not None or kind.subdtype is not None:
            raise ValueError(f"ndarray dtype {meta[1]!r} holds Python objects or fields; only plain dtypes travel")
        if kind.itemsize == 0 or math.prod(shape) * kind.itemsize != len(raw):
            raise ValueError(f"ndarray of shape {list(shape)} and dtype {meta[1]!r} does not fit {len(raw)} bytes")
        arr = np.frombuffer(raw, dtype=kind).reshape(shape).copy()
        if kind.kind == "U" and arr.size and int(arr.view(kind.byteorder.replace("|", "=") + "u4").max()) > 0x10FFFF:
            raise ValueError(f"ndarray of dtype {kind.str} holds a value that is not a Unicode code point")
        return arr
    return msgspec.msgpack.Ext(code, bytes(data))


def dec_hook(tp: type, obj: Any) -> Any:
    if isinstance(obj, tp):
        return obj
    raise TypeError(f"Expected `{tp.__name__}`, got `{type(obj).__name__}`")


def make_ext_hook(oob_frames: Any = None) -> Callable[[int, memoryview], Any]:
    """The ext_hook, as an implementation's make_ext_hook gives it (no out-of-band frames here)."""
    return ext_hook
