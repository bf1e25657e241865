"""msgpack extension types: array.array, torch tensors, numpy arrays.

Buffer payload layout (shared by codes 1-3 and the out-of-band code):
    4-byte big-endian metadata length | msgpack metadata | raw bytes
Metadata: array -> typecode; tensor -> [shape, dtype name without "torch.",
str(device)]; ndarray -> [shape, dtype.str]. Unknown codes stay msgspec Ext
values so they survive a decode/encode hop unchanged.
"""

from __future__ import annotations

import array
import math
import struct
from typing import Any, Callable, Optional, Sequence

import msgspec
import numpy as np
import torch

from .errors import WireError

EXT_ARRAY = 1
EXT_TORCH_TENSOR = 2
EXT_NUMPY_ARRAY = 3
EXT_SHM_POINTER_MM_DATA = 4  # upstream engine internal: kept as raw Ext here
EXT_CUDA_IPC_TENSOR_PROXY = 5  # upstream engine internal: kept as raw Ext here
# Reference-private: tensor whose bytes travel as a separate ZeroMQ frame
# (opt-in multipart path; both peers must enable it).
EXT_OOB_TENSOR = 64

_META_LEN = struct.Struct(">I")
_encode_meta = msgspec.msgpack.Encoder().encode
_decode_meta = msgspec.msgpack.Decoder().decode


def pack_buffer(code: int, metadata: Any, raw: memoryview) -> msgspec.msgpack.Ext:
    meta = _encode_meta(metadata)
    payload = bytearray(_META_LEN.size + len(meta) + raw.nbytes)
    _META_LEN.pack_into(payload, 0, len(meta))
    payload[_META_LEN.size : _META_LEN.size + len(meta)] = meta
    payload[_META_LEN.size + len(meta) :] = raw
    return msgspec.msgpack.Ext(code, payload)


def unpack_buffer(data: memoryview, what: str) -> tuple[Any, memoryview]:
    if len(data) < _META_LEN.size:
        raise WireError("msgpack", f"{what} extension is shorter than its 4-byte metadata length")
    (meta_len,) = _META_LEN.unpack_from(data)
    end = _META_LEN.size + meta_len
    if end > len(data):
        raise WireError("msgpack", f"{what} extension declares {meta_len} metadata bytes, has {len(data) - _META_LEN.size}")
    try:
        metadata = _decode_meta(data[_META_LEN.size : end])
    except msgspec.DecodeError as exc:
        raise WireError("msgpack", f"{what} extension metadata is not msgpack: {exc}") from None
    return metadata, data[end:]


# -- torch ------------------------------------------------------------------
def tensor_bytes(tensor: torch.Tensor) -> tuple[torch.Tensor, memoryview]:
    """(contiguous CPU tensor, its raw bytes as a view). Gradients never travel."""
    if tensor.layout is not torch.strided:
        raise WireError("msgpack", f"cannot send a {tensor.layout} tensor; only dense tensors", direction="encode")
    if tensor.is_meta:
        raise WireError("msgpack", "cannot send a meta tensor: it has no data", direction="encode")
    # Lazy conjugate/negative views must be materialized before their bits are read.
    cpu = tensor.detach().resolve_conj().resolve_neg().to("cpu").contiguous()
    flat = cpu.reshape(-1)
    if flat.dtype is not torch.uint8:
        flat = flat.view(torch.uint8)
    return cpu, memoryview(flat.numpy()).cast("B")


def tensor_metadata(tensor: torch.Tensor) -> tuple[list[int], str, str]:
    return list(tensor.shape), str(tensor.dtype).removeprefix("torch."), str(tensor.device)


def _checked_shape(shape: Any, what: str) -> tuple[int, ...]:
    if not isinstance(shape, (list, tuple)) or not all(type(d) is int and d >= 0 for d in shape):
        raise WireError("msgpack", f"{what} shape {shape!r} is not a list of non-negative ints")
    return tuple(shape)


def torch_dtype(name: Any) -> torch.dtype:
    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype):
        raise WireError("msgpack", f"tensor dtype {name!r} is not a torch dtype")
    return dtype


def restore_tensor(metadata: Any, raw: Any) -> torch.Tensor:
    if not isinstance(metadata, (list, tuple)) or len(metadata) != 3:
        raise WireError("msgpack", f"tensor metadata {metadata!r} is not [shape, dtype, device]")
    shape, dtype_name, device = metadata
    shape = _checked_shape(shape, "tensor")
    dtype = torch_dtype(dtype_name)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes != len(raw):
        raise WireError("msgpack", f"tensor of shape {list(shape)} and dtype {dtype_name} needs {nbytes} bytes, got {len(raw)}")
    if nbytes == 0:
        tensor = torch.empty(shape, dtype=dtype)
    else:
        # bytearray: the tensor owns writable memory independent of the socket buffer.
        tensor = torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)
    return _to_device(tensor, device)


def _to_device(tensor: torch.Tensor, device: Any) -> torch.Tensor:
    if device == "cpu":
        return tensor
    if not isinstance(device, str) or device.startswith("meta"):
        raise WireError("msgpack", f"tensor device {device!r} cannot hold received data")
    try:
        return tensor.to(torch.device(device))
    except (RuntimeError, TypeError, AssertionError) as exc:
        raise WireError("msgpack", f"tensor device {device!r} is not available here: {exc}") from None


# -- numpy ------------------------------------------------------------------
def restore_ndarray(metadata: Any, raw: memoryview) -> np.ndarray:
    if not isinstance(metadata, (list, tuple)) or len(metadata) != 2:
        raise WireError("msgpack", f"ndarray metadata {metadata!r} is not [shape, dtype]")
    shape = _checked_shape(metadata[0], "ndarray")
    try:
        dtype = np.dtype(metadata[1])
    except (TypeError, ValueError):
        raise WireError("msgpack", f"ndarray dtype {metadata[1]!r} is not a numpy dtype") from None
    if dtype.hasobject:  # raw bytes reinterpreted as object pointers would be memory-unsafe
        raise WireError("msgpack", f"ndarray dtype {metadata[1]!r} holds Python objects")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes != len(raw):
        raise WireError("msgpack", f"ndarray of shape {list(shape)} and dtype {dtype.str} needs {nbytes} bytes, got {len(raw)}")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


# -- array.array ------------------------------------------------------------
def restore_array(typecode: Any, raw: memoryview) -> array.array:
    if not isinstance(typecode, str) or typecode not in array.typecodes:
        raise WireError("msgpack", f"array typecode {typecode!r} is not an array.array typecode")
    out = array.array(typecode)
    if len(raw) % out.itemsize:
        raise WireError("msgpack", f"array('{typecode}') payload of {len(raw)} bytes is not a multiple of {out.itemsize}")
    out.frombytes(raw)
    return out


# -- hooks ------------------------------------------------------------------
def enc_hook(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        meta = tensor_metadata(obj)
        _, raw = tensor_bytes(obj)
        return pack_buffer(EXT_TORCH_TENSOR, meta, raw)
    if isinstance(obj, array.array):
        return pack_buffer(EXT_ARRAY, obj.typecode, memoryview(obj).cast("B"))
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError("numpy arrays of Python objects cannot travel as msgpack")
        if obj.dtype.fields is not None or obj.dtype.subdtype is not None:
            raise TypeError(f"structured numpy dtype {obj.dtype} cannot travel as msgpack (its fields would be lost)")
        # Not np.ascontiguousarray: it turns a 0-d array into shape (1,).
        arr = obj if obj.flags.c_contiguous else obj.copy(order="C")
        return pack_buffer(EXT_NUMPY_ARRAY, [list(arr.shape), arr.dtype.str], memoryview(arr.reshape(-1).view(np.uint8)))
    if isinstance(obj, np.generic) and not isinstance(obj, np.void):
        return obj.item()
    raise TypeError(
        f"{type(obj).__module__}.{type(obj).__qualname__} has no msgpack form; "
        "declare a precise field type or carry it in a PickleWrapper field"
    )


class OobFrames:
    """The frames of the multipart message being decoded, and which ones it referenced."""

    def __init__(self, frames: Sequence[Any]) -> None:
        self.frames = frames
        self.used: set[int] = set()


def make_ext_hook(oob_frames: Optional[Callable[[], Optional[OobFrames]]] = None) -> Callable[[int, memoryview], Any]:
    """ext_hook for a decoder; oob_frames() gives the frames of the message being decoded."""

    def ext_hook(code: int, data: memoryview) -> Any:
        if code == EXT_TORCH_TENSOR:
            return restore_tensor(*unpack_buffer(data, "tensor"))
        if code == EXT_ARRAY:
            return restore_array(*unpack_buffer(data, "array"))
        if code == EXT_NUMPY_ARRAY:
            return restore_ndarray(*unpack_buffer(data, "ndarray"))
        frames = oob_frames() if code == EXT_OOB_TENSOR and oob_frames is not None else None
        if frames is not None:
            return restore_oob_tensor(unpack_buffer(data, "out-of-band tensor")[0], frames)
        return msgspec.msgpack.Ext(code, bytes(data))

    return ext_hook


def restore_oob_tensor(metadata: Any, oob: OobFrames) -> torch.Tensor:
    if not isinstance(metadata, (list, tuple)) or len(metadata) != 4:
        raise WireError("msgpack", f"out-of-band tensor metadata {metadata!r} is not [shape, dtype, device, frame]")
    *tensor_meta, index = metadata
    if type(index) is not int or not 1 <= index < len(oob.frames):
        raise WireError("msgpack", f"out-of-band tensor names frame {index!r}; the message has {len(oob.frames)}")
    oob.used.add(index)
    return restore_tensor(tensor_meta, memoryview(oob.frames[index]))


def dec_hook(tp: type, obj: Any) -> Any:
    if isinstance(obj, tp):
        return obj
    raise TypeError(f"Expected `{tp.__name__}`, got `{type(obj).__name__}`")
