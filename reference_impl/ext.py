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
import re
import struct
import sys
import warnings
from functools import lru_cache
from itertools import repeat
from operator import attrgetter, countOf, getitem
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import msgspec
import numpy as np

from .errors import WireError

if TYPE_CHECKING:
    import torch

# torch is imported where a tensor is made (restore_tensor) or already exists: a process that never
# meets one (most messages carry none) skips a second of start-up. A torch.Tensor exists only where
# torch was imported, so the encoder asks sys.modules, which never imports it.

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


def pack_buffer(code: int, metadata: Any, raw: Any) -> msgspec.msgpack.Ext:
    meta = _encode_meta(metadata)
    # One pass over the raw bytes (join allocates uninitialised memory and copies once).
    return msgspec.msgpack.Ext(code, b"".join((_META_LEN.pack(len(meta)), meta, raw)))


def buffer_header(metadata: Any) -> bytes:
    """The bytes a buffer ext payload starts with: metadata length + msgpack metadata."""
    meta = _encode_meta(metadata)
    return _META_LEN.pack(len(meta)) + meta


# array.array payload prefix per typecode (metadata = the typecode, a 1-char msgpack str).
_ARRAY_HEADERS = {tc: buffer_header(tc) for tc in array.typecodes}
_HEADER_TYPECODES = {h: tc for tc, h in _ARRAY_HEADERS.items()}
_ARRAY_HEADER_LEN = len(_ARRAY_HEADERS["q"])
_typecode = attrgetter("typecode")
_ext_code = attrgetter("code")
_ext_data = attrgetter("data")
_TAIL = slice(_ARRAY_HEADER_LEN, None)
_starts_with = bytes.startswith
# Up to about this many payload bytes, arrays_from_exts checks their headers in one comparison;
# beyond it (and the allocator's 128 KiB mmap threshold) the two joined copies cost more than a
# call per payload: 2.9 against 0.4 ms for 1024 arrays of 200 ids.
_JOINED_CHECK_MAX = 96 * 1024


# -- batched List[array] (performance only; the bytes are those msgspec writes per element) --
def ext_header(code: int, size: int) -> bytes:
    """The msgpack ext header msgspec writes for a payload of `size` bytes."""
    if size in _FIXEXT:
        return bytes((_FIXEXT[size], code))
    if size < 1 << 8:
        return bytes((0xC7, size, code))
    if size < 1 << 16:
        return b"\xc8" + size.to_bytes(2, "big") + bytes((code,))
    return b"\xc9" + size.to_bytes(4, "big") + bytes((code,))


def array_header(length: int) -> bytes:
    """The msgpack header of an array (list) of `length` items."""
    if length < 16:
        return bytes((0x90 | length,))
    if length < 1 << 16:
        return b"\xdc" + length.to_bytes(2, "big")
    return b"\xdd" + length.to_bytes(4, "big")


_FIXEXT = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}


class _ArrayPrefixes(dict[int, bytes]):
    """item count -> ext header + payload header of an array.array of one typecode."""

    def __init__(self, typecode: str) -> None:
        super().__init__()
        self.header = _ARRAY_HEADERS[typecode]
        self.itemsize = array.array(typecode).itemsize

    def __missing__(self, count: int) -> bytes:
        size = len(self.header) + count * self.itemsize
        if size >= 1 << 32:
            raise OverflowError("array too large for a msgpack ext")
        if len(self) > 1 << 16:
            self.clear()
        prefix = self[count] = ext_header(EXT_ARRAY, size) + self.header
        return prefix


with warnings.catch_warnings():  # Python 3.13 deprecates 'u'; peers may still send it
    warnings.simplefilter("ignore", DeprecationWarning)
    _PREFIXES = {tc: _ArrayPrefixes(tc) for tc in array.typecodes}


def array_list_raw(values: list[Any]) -> Optional[msgspec.Raw]:
    """A list of plain array.array of one typecode, pre-encoded: the exact bytes msgspec
    would write calling enc_hook per element, built without a Python call per element.
    None when the list is anything else (the caller then takes the per-element path)."""
    if set(map(type, values)) != {array.array}:
        return None
    typecodes = set(map(_typecode, values))
    if len(typecodes) != 1:
        return None
    prefixes = _PREFIXES[typecodes.pop()]
    try:
        heads = list(map(prefixes.__getitem__, map(len, values)))
    except OverflowError:
        return None
    parts: list[Any] = [None] * (2 * len(values) + 1)
    parts[0] = array_header(len(values))
    parts[1::2] = heads
    parts[2::2] = values
    return msgspec.Raw(b"".join(parts))


def arrays_from_exts(exts: list[Any]) -> Optional[list[array.array[Any]]]:
    """The inverse of array_list_raw for a decoded List[Ext]: the arrays restore_array would
    give, or None when anything differs from the common case (the caller then decodes
    the message the ordinary way, which also produces the ordinary errors)."""
    if not exts:
        return []
    if set(map(_ext_code, exts)) != {EXT_ARRAY}:
        return None
    datas = list(map(_ext_data, exts))
    head = datas[0][:_ARRAY_HEADER_LEN]
    typecode = _HEADER_TYPECODES.get(head)
    if typecode is None:
        return None
    tails = list(map(getitem, datas, repeat(_TAIL)))
    if len(datas) * (len(datas[0]) + len(datas[-1])) <= 2 * _JOINED_CHECK_MAX:
        # Every payload starts with `head` exactly when the payloads laid end to end equal
        # head + tail, head + tail, ...: one comparison instead of a check per element.
        same_heads = b"".join(datas) == head + head.join(tails)
    else:  # long arrays laid end to end would be copied twice more: each payload is asked instead
        same_heads = countOf(map(_starts_with, datas, repeat(head)), True) == len(datas)
    if not same_heads:
        return None
    try:
        return list(map(array.array, repeat(typecode), tails))
    except ValueError:  # a payload that is not a whole number of items
        return None


def unpack_buffer(data: memoryview, what: str) -> tuple[Any, memoryview]:
    if len(data) < _META_LEN.size:
        raise WireError("msgpack", f"{what} extension is shorter than its 4-byte metadata length")
    (meta_len,) = _META_LEN.unpack_from(data)
    end = _META_LEN.size + meta_len
    if end > len(data):
        raise WireError("msgpack", f"{what} extension declares {meta_len} metadata bytes, "
                                   f"has {len(data) - _META_LEN.size}")
    # msgspec <= 0.22 raises UnicodeDecodeError for bad UTF-8 and TypeError for unhashable map keys
    try:
        metadata = _decode_meta(data[_META_LEN.size : end])
    except (msgspec.DecodeError, UnicodeDecodeError, TypeError) as exc:
        raise WireError("msgpack", f"{what} extension metadata is not msgpack: {exc}") from None
    return metadata, data[end:]


# -- torch ------------------------------------------------------------------
def tensor_bytes(tensor: torch.Tensor) -> tuple[torch.Tensor, memoryview]:
    """(contiguous CPU tensor, its raw bytes as a view). Gradients never travel."""
    import torch

    if tensor.layout is not torch.strided:
        raise WireError("msgpack", f"cannot send a {tensor.layout} tensor; only dense tensors", direction="encode")
    if tensor.is_meta:
        raise WireError("msgpack", "cannot send a meta tensor: it has no data", direction="encode")
    if tensor.is_quantized:  # its scale and zero point live outside the bytes (SPEC R-TEN-1)
        raise WireError("msgpack", f"cannot send a quantized tensor ({tensor.dtype}): it has no raw-byte form",
                        direction="encode")
    if tensor.is_cpu and not tensor.requires_grad and not tensor.is_conj() and not tensor.is_neg():
        cpu = tensor.contiguous()  # the common case: nothing to detach, resolve or move
    else:
        # Lazy conjugate/negative views must be materialized before their bits are read.
        cpu = tensor.detach().resolve_conj().resolve_neg().to("cpu").contiguous()
    if cpu.dim() and cpu.numel():  # contiguous, not 0-d, not empty: one view, cast to bytes
        # (flattened first: a size-1 last dimension may keep any stride and still count as
        # contiguous, which view(uint8) refuses for elements wider than a byte)
        arr = cpu.numpy() if cpu.dtype in _numpy_dtypes() else cpu.reshape(-1).view(torch.uint8).numpy()
        return cpu, arr.data.cast("B")
    flat = cpu.reshape(-1)
    if flat.dtype is not torch.uint8:
        flat = flat.view(torch.uint8)
    return cpu, flat.numpy().data.cast("B")


@lru_cache(maxsize=None)
def _numpy_dtypes() -> frozenset[torch.dtype]:
    """dtypes whose numpy view casts straight to bytes (the uint8 reinterpretation is then skipped)."""
    import torch

    return frozenset({torch.float64, torch.float32, torch.float16, torch.int64, torch.int32, torch.int16,
                      torch.int8, torch.uint8, torch.bool})


_DTYPE_NAMES: dict[torch.dtype, str] = {}
_DTYPES_BY_NAME: dict[str, torch.dtype] = {}


def tensor_metadata(tensor: torch.Tensor) -> tuple[list[int], str, str]:
    dtype = tensor.dtype
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return list(tensor.shape), name, "cpu" if tensor.is_cpu else str(tensor.device)


def _checked_shape(shape: Any, what: str) -> tuple[int, ...]:
    if type(shape) is list:  # the common cases, checked without a Python loop
        rank = len(shape)
        if rank == 1:
            if type(shape[0]) is int and shape[0] >= 0:
                return (shape[0],)
        elif rank == 2:
            rows, cols = shape
            if type(rows) is int and type(cols) is int and rows >= 0 and cols >= 0:
                return (rows, cols)
        elif set(map(type, shape)) <= _INT_ONLY and min(shape, default=0) >= 0:
            return tuple(shape)
    if not isinstance(shape, (list, tuple)) or not all(type(d) is int and d >= 0 for d in shape):
        raise WireError("msgpack", f"{what} shape {shape!r} is not a list of non-negative ints")
    return tuple(shape)


_INT_ONLY = frozenset({int})


def torch_dtype(name: Any) -> torch.dtype:
    if type(name) is str:
        known = _DTYPES_BY_NAME.get(name)
        if known is not None:
            return known
    import torch

    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype):
        raise WireError("msgpack", f"tensor dtype {name!r} is not a torch dtype")
    if str(dtype).startswith("torch.q"):
        # Quantized tensors need a quantizer: built from raw bytes they crash the process that
        # touches them (seen: SIGSEGV, SystemError). No encoder sends them.
        raise WireError("msgpack", f"tensor dtype {name!r} is quantized: it cannot travel as raw bytes")
    if type(name) is str:
        _DTYPES_BY_NAME[name] = dtype
    return dtype


# Tensors and ndarrays the codec can send have at most this many dimensions (numpy's limit).
MAX_DIMS = 64
_MAX_DIM = (1 << 63) - 1  # an int64 dimension


def _too_many_dims(shape: tuple[Any, ...], what: str) -> WireError:
    return WireError("msgpack", f"{what} has {len(shape)} dimensions; at most {MAX_DIMS}")


def _empty_tensor(shape: tuple[Any, ...], dtype: torch.dtype) -> torch.Tensor:
    """A tensor with no elements: its shape may still be absurd (dimensions beyond int64, a
    storage size that overflows): refused by name, never a torch error."""
    import torch

    if any(d > _MAX_DIM for d in shape) or math.prod(d for d in shape if d) * dtype.itemsize > _MAX_DIM:
        raise WireError("msgpack", f"tensor shape {list(shape)} is too large (beyond 64-bit sizes)")
    try:
        return torch.empty(shape, dtype=dtype)
    except (RuntimeError, TypeError, ValueError, OverflowError) as exc:
        raise WireError("msgpack", f"tensor shape {list(shape)} is not possible: {exc}") from None


def restore_tensor(metadata: Any, raw: Any) -> torch.Tensor:
    if not isinstance(metadata, (list, tuple)) or len(metadata) != 3:
        raise WireError("msgpack", f"tensor metadata {metadata!r} is not [shape, dtype, device]")
    shape, dtype_name, device = metadata
    shape = _checked_shape(shape, "tensor")
    if len(shape) > MAX_DIMS:
        raise _too_many_dims(shape, "tensor")
    dtype = torch_dtype(dtype_name)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes != len(raw):
        raise WireError("msgpack", f"tensor of shape {list(shape)} and dtype {dtype_name} needs {nbytes} bytes, "
                                   f"got {len(raw)}")
    if nbytes == 0:
        tensor = _empty_tensor(shape, dtype)
    else:
        import torch

        # bytearray: the tensor owns writable memory independent of the socket buffer.
        tensor = torch.frombuffer(bytearray(raw), dtype=dtype)
        if len(shape) > 1:  # (frombuffer is already 1-d with the right length)
            tensor = tensor.view(*shape)  # contiguous: a view, and cheaper to call than reshape
        elif not shape:
            tensor = tensor.reshape(shape)
    return tensor if device == "cpu" else _to_device(tensor, device)


#: The largest device index (SPEC R-TEN-3): torch holds it in 8 signed bits, and 2.13's
#: torch.device("cuda:4096") is cuda:0, so a larger index must be refused, not parsed.
MAX_DEVICE_INDEX = 127
_INDEXED_DEVICE = re.compile(r"[a-z][a-z0-9_]*:([0-9]+)")


def _to_device(tensor: torch.Tensor, device: Any) -> torch.Tensor:
    if device == "cpu":
        return tensor
    if not isinstance(device, str) or device.startswith("meta"):
        raise WireError("msgpack", f"tensor device {device!r} cannot hold received data")
    if device.startswith("cpu:"):  # torch reads "cpu:0" and keeps it; the grammar has only "cpu"
        raise WireError("msgpack", f"tensor device {device!r}: the CPU is 'cpu', never indexed (SPEC R-TEN-3)")
    indexed = _INDEXED_DEVICE.fullmatch(device)
    if indexed and int(indexed.group(1)) > MAX_DEVICE_INDEX:
        raise WireError("msgpack", f"tensor device {device!r}: index above {MAX_DEVICE_INDEX}, which no device has "
                                   "(torch's device index is 8-bit)")
    import torch

    try:
        parsed = torch.device(device)
        if str(parsed) != device:  # torch wraps indices it cannot hold (cuda:128 is cuda:-128): never a device
            raise ValueError(f"torch reads it as {str(parsed)!r}")
        return tensor.to(parsed)
    except Exception as exc:  # noqa: BLE001 - RuntimeError, AssertionError, ModuleNotFoundError ('hpu'): "not here"
        first_line = (str(exc).strip().splitlines() or [""])[0][:200]  # torch's MPS error lists every backend
        raise WireError("msgpack", f"tensor device {device!r} is not available here: "
                        f"{type(exc).__name__}: {first_line}") from None


# -- numpy ------------------------------------------------------------------
def restore_ndarray(metadata: Any, raw: memoryview) -> np.ndarray:
    if not isinstance(metadata, (list, tuple)) or len(metadata) != 2:
        raise WireError("msgpack", f"ndarray metadata {metadata!r} is not [shape, dtype]")
    shape = _checked_shape(metadata[0], "ndarray")
    if len(shape) > MAX_DIMS:
        raise _too_many_dims(shape, "ndarray")
    if not isinstance(metadata[1], str):  # the encoder sends dtype.str; a list or dict would build a record dtype
        raise WireError("msgpack", f"ndarray dtype {metadata[1]!r} is not a numpy dtype string")
    try:
        dtype = np.dtype(metadata[1])
    except Exception:  # noqa: BLE001 - TypeError, ValueError, and whatever else numpy's parser raises
        raise WireError("msgpack", f"ndarray dtype {metadata[1]!r} is not a numpy dtype") from None
    if dtype.hasobject:  # raw bytes reinterpreted as object pointers would be memory-unsafe
        raise WireError("msgpack", f"ndarray dtype {metadata[1]!r} holds Python objects")
    if dtype.fields is not None or dtype.subdtype is not None:  # the encoder refuses these too
        raise WireError("msgpack", f"ndarray dtype {metadata[1]!r} is structured; only plain dtypes travel")
    if dtype.itemsize == 0:
        raise WireError("msgpack", f"ndarray dtype {metadata[1]!r} has no size")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes != len(raw):
        raise WireError("msgpack", f"ndarray of shape {list(shape)} and dtype {dtype.str} needs {nbytes} bytes, "
                                   f"got {len(raw)}")
    try:
        arr: np.ndarray = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    except (ValueError, TypeError, OverflowError) as exc:
        raise WireError("msgpack", f"ndarray of shape {list(shape)} and dtype {dtype.str}: {exc}") from None
    if dtype.kind == "U" and arr.size and int(arr.view(dtype.byteorder.replace("|", "=") + "u4").max()) > 0x10FFFF:
        raise WireError("msgpack", f"ndarray of dtype {dtype.str} holds a value that is not a Unicode code point")
    return arr


# -- array.array ------------------------------------------------------------
def restore_array(typecode: Any, raw: memoryview) -> array.array[Any]:
    if not isinstance(typecode, str) or typecode not in array.typecodes:
        raise WireError("msgpack", f"array typecode {typecode!r} is not an array.array typecode")
    out = array.array(typecode)
    if len(raw) % out.itemsize:
        raise WireError("msgpack", f"array('{typecode}') payload of {len(raw)} bytes is not a multiple of "
                                   f"{out.itemsize}")
    out.frombytes(raw)
    return out


# -- hooks ------------------------------------------------------------------
def buffer_parts(obj: Any) -> Optional[tuple[int, bytes, memoryview]]:
    """(ext code, payload header, raw bytes) of a tensor or ndarray, None for other objects.
    The ext payload is header + raw; raw is a view (it keeps the data alive)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        meta = tensor_metadata(obj)
        _, raw = tensor_bytes(obj)
        return EXT_TORCH_TENSOR, buffer_header(meta), raw
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError("numpy arrays of Python objects cannot travel as msgpack")
        if obj.dtype.fields is not None or obj.dtype.subdtype is not None:
            raise TypeError(f"structured numpy dtype {obj.dtype} cannot travel as msgpack (its fields would be lost)")
        # Not np.ascontiguousarray: it turns a 0-d array into shape (1,).
        arr = obj if obj.flags.c_contiguous else obj.copy(order="C")
        raw = arr.reshape(-1).view(np.uint8).data
        return EXT_NUMPY_ARRAY, buffer_header([list(arr.shape), arr.dtype.str]), raw
    return None


def enc_hook(obj: Any) -> Any:
    if type(obj) is array.array:  # the commonest case first (token ids)
        return msgspec.msgpack.Ext(EXT_ARRAY, _ARRAY_HEADERS[obj.typecode] + obj)
    parts = buffer_parts(obj)
    if parts is not None:
        code, header, raw = parts
        return msgspec.msgpack.Ext(code, b"".join((header, raw)))
    if isinstance(obj, array.array):
        return msgspec.msgpack.Ext(EXT_ARRAY, _ARRAY_HEADERS[obj.typecode] + memoryview(obj).cast("B"))
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
        if code == EXT_ARRAY:  # fast path for the common case; anything odd takes the checked path
            if len(data) <= 512:  # small: one copy to bytes, then cheap slicing
                raw = data.tobytes()
                typecode = _HEADER_TYPECODES.get(raw[:_ARRAY_HEADER_LEN])
                if typecode is not None:
                    try:
                        return array.array(typecode, raw[_ARRAY_HEADER_LEN:])
                    except ValueError:
                        pass
            else:  # large (a prompt's ids): copy the payload once, straight into the array
                typecode = _HEADER_TYPECODES.get(data[:_ARRAY_HEADER_LEN].tobytes())
                if typecode is not None:
                    out = array.array(typecode)
                    try:
                        out.frombytes(data[_ARRAY_HEADER_LEN:])
                        return out
                    except ValueError:
                        pass
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
