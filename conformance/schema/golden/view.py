"""The JSON view: a language-neutral, lossless text form of one message (spec/SPEC.md, "JSON view").

JSON scalars stand for themselves (null, true/false, strings, integers, floats); a JSON
array is a list; every JSON object carries exactly one "$" marker that says what it is:

    {"$struct": "Name", "<field>": <view>, ...}     a struct, every field, in wire order
    {"$enum": "Name", "member": "M", "value": 1}     an enum member (the wire carries the value)
    {"$bytes": "<base64>"}                           bytes (RFC 4648 base64, padded)
    {"$float": "nan" | "inf" | "-inf" | "0x<16 hex>"} a float JSON cannot spell; a NaN other
                                                     than 0x7ff8000000000000 by its binary64 bits
    {"$tuple": [...]} {"$set": [...]} {"$frozenset": [...]}
    {"$dict": [[key, value], ...]}                   a map, entries in wire order (keys of any type)
    {"$tensor": {"dtype": "bfloat16", "shape": [2, 3], "device": "cpu", "data": "<base64>"}}
    {"$ndarray": {"dtype": "<f4", "shape": [2, 3], "data": "<base64>"}}
    {"$array": {"typecode": "q", "items": [1, 2, 3]}}
    {"$ext": {"code": 9, "data": "<base64>"}}         an extension type this suite does not interpret

A float is always written with a decimal point or an exponent (``1.0``, ``-0.0``,
``1e+308``); an integer never is, so ``Any`` fields keep int and float apart. Tensor and
ndarray data are the raw element bytes in C order, little-endian, exactly the bytes
that follow the metadata in the extension payload.
"""

from __future__ import annotations

import array
import base64
import enum
import json
import math
import struct
import sys
import warnings
from typing import TYPE_CHECKING, Any, Mapping

import msgspec
import numpy as np

from conformance.schema.wire_ext import ITEMSIZE, WireTensor, torch_available

if TYPE_CHECKING:
    import torch  # imported where a tensor is made: the schema tools run without torch

__all__ = ["ViewError", "dumps", "from_view", "loads", "to_view"]

MARKERS = ("$struct", "$enum", "$bytes", "$float", "$tuple", "$set", "$frozenset", "$dict",
           "$tensor", "$ndarray", "$array", "$ext")


_QUIET_NAN = bytes.fromhex("7ff8000000000000")


class ViewError(ValueError):
    """A JSON view that does not describe a value (names the path and the reason)."""


def _b64(data: Any) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def _unb64(text: Any, path: str) -> bytes:
    if not isinstance(text, str):
        raise ViewError(f"{path}: expected base64 text, got {type(text).__name__}")
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise ViewError(f"{path}: invalid base64: {exc}") from None


# -- value -> view ---------------------------------------------------------------
def to_view(value: Any) -> Any:
    """The JSON view (plain JSON data: dict, list, str, int, float, bool, None) of a value."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):  # before int: IntEnum members are ints
        return {"$enum": type(value).__name__, "member": value.name, "value": value.value}
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):
            bits = struct.pack(">d", value)
            return {"$float": "nan" if bits == _QUIET_NAN else "0x" + bits.hex()}
        if math.isinf(value):
            return {"$float": "inf" if value > 0 else "-inf"}
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": _b64(value)}
    if isinstance(value, msgspec.Struct):
        out: dict[str, Any] = {"$struct": type(value).__name__}
        for name in value.__struct_fields__:
            out[name] = to_view(getattr(value, name))
        return out
    if isinstance(value, list):
        return [to_view(v) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [to_view(v) for v in value]}
    if isinstance(value, frozenset):
        return {"$frozenset": [to_view(v) for v in value]}
    if isinstance(value, set):
        return {"$set": [to_view(v) for v in value]}
    if isinstance(value, dict):
        return {"$dict": [[to_view(k), to_view(v)] for k, v in value.items()]}
    if isinstance(value, WireTensor):
        return {"$tensor": {"dtype": value.dtype, "shape": list(value.shape), "device": value.device,
                            "data": _b64(value.data)}}
    torch = sys.modules.get("torch")  # a tensor exists only where torch was imported
    if torch is not None and isinstance(value, torch.Tensor):
        cpu = value.detach().to("cpu").contiguous()
        flat = cpu.reshape(-1)
        raw = flat.view(torch.uint8).numpy().tobytes() if flat.dtype is not torch.bool else flat.numpy().tobytes()
        return {"$tensor": {"dtype": str(value.dtype).removeprefix("torch."), "shape": list(value.shape),
                            "device": str(value.device), "data": _b64(raw)}}
    if isinstance(value, np.ndarray):
        arr = value if value.flags.c_contiguous else value.copy(order="C")
        return {"$ndarray": {"dtype": arr.dtype.str, "shape": list(arr.shape), "data": _b64(arr.tobytes())}}
    if isinstance(value, array.array):
        return {"$array": {"typecode": value.typecode, "items": [to_view(v) for v in value]}}
    if isinstance(value, msgspec.msgpack.Ext):
        return {"$ext": {"code": value.code, "data": _b64(value.data)}}
    if isinstance(value, np.generic):
        return to_view(value.item())
    raise ViewError(f"no JSON view for a {type(value).__module__}.{type(value).__qualname__}")


def dumps(view: Any) -> str:
    """The canonical text of a view: UTF-8 JSON, one-space indent, newline at the end. A str
    with a lone surrogate has no UTF-8 form: such a view is written all-ASCII (`\\ud800`)."""
    text = json.dumps(view, ensure_ascii=False, indent=1, allow_nan=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(view, ensure_ascii=True, indent=1, allow_nan=False) + "\n"
    return text


def loads(text: str) -> Any:
    return json.loads(text)


# -- view -> value ---------------------------------------------------------------
def from_view(view: Any, classes: Mapping[str, type], path: str = "$") -> Any:
    """Build the value a view describes, with the given struct and enum classes (by name)."""
    if view is None or isinstance(view, (bool, str, int, float)):
        return view
    if isinstance(view, list):
        return [from_view(v, classes, f"{path}[{i}]") for i, v in enumerate(view)]
    if not isinstance(view, dict):
        raise ViewError(f"{path}: {type(view).__name__} is not JSON data")
    markers = [k for k in view if k in MARKERS]
    if len(markers) != 1:
        raise ViewError(f"{path}: a JSON object needs exactly one of {', '.join(MARKERS)}; has {sorted(view)}")
    marker = markers[0]
    body = view[marker]
    if marker == "$struct":
        cls = classes.get(body)
        if cls is None:
            raise ViewError(f"{path}: unknown struct {body!r}")
        kwargs = {k: from_view(v, classes, f"{path}.{k}") for k, v in view.items() if k != "$struct"}
        try:
            return cls(**_omitted_defaults_dropped(cls, kwargs))
        except TypeError as exc:
            raise ViewError(f"{path}: cannot build {body}: {exc}") from None
    if marker == "$enum":
        cls = classes.get(body)
        if cls is None or not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
            raise ViewError(f"{path}: unknown enum {body!r}")
        try:
            member = cls[view["member"]]
        except KeyError:
            raise ViewError(f"{path}: {body} has no member {view.get('member')!r}") from None
        if "value" in view and member.value != view["value"]:
            raise ViewError(f"{path}: {body}.{member.name} has value {member.value!r}, the view says {view['value']!r}")
        return member
    if marker == "$bytes":
        return _unb64(body, path)
    if marker == "$float":
        special = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
        if body in special:
            return special[body]
        if isinstance(body, str) and len(body) == 18 and body.startswith("0x"):
            try:
                return struct.unpack(">d", bytes.fromhex(body[2:]))[0]
            except ValueError:
                pass
        raise ViewError(f"{path}: $float must be nan, inf, -inf or 0x + 16 hex digits, not {body!r}")
    if marker in ("$tuple", "$set", "$frozenset"):
        if not isinstance(body, list):
            raise ViewError(f"{path}: {marker} needs a JSON array")
        items = [from_view(v, classes, f"{path}[{i}]") for i, v in enumerate(body)]
        return {"$tuple": tuple, "$set": set, "$frozenset": frozenset}[marker](items)
    if marker == "$dict":
        if not isinstance(body, list) or not all(isinstance(e, list) and len(e) == 2 for e in body):
            raise ViewError(f"{path}: $dict needs a JSON array of [key, value] pairs")
        return {from_view(k, classes, f"{path}<key>"): from_view(v, classes, f"{path}[{k!r}]") for k, v in body}
    if marker == "$tensor":
        return _tensor(body, path)
    if marker == "$ndarray":
        return _ndarray(body, path)
    if marker == "$array":
        if not isinstance(body, dict) or not isinstance(body.get("typecode"), str):
            raise ViewError(f"{path}: $array needs a typecode and items")
        try:
            return array.array(body["typecode"], body.get("items", []))
        except (TypeError, ValueError, OverflowError) as exc:
            raise ViewError(f"{path}: bad $array: {exc}") from None
    # $ext
    if not isinstance(body, dict) or type(body.get("code")) is not int:
        raise ViewError(f"{path}: $ext needs a code and data")
    return msgspec.msgpack.Ext(body["code"], _unb64(body.get("data"), path))


def _shape(body: Any, path: str) -> tuple[int, ...]:
    shape = body.get("shape") if isinstance(body, dict) else None
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise ViewError(f"{path}: shape must be a list of non-negative integers")
    return tuple(shape)


def _tensor(body: Any, path: str) -> "torch.Tensor | WireTensor":
    shape = _shape(body, path)
    if not torch_available():  # the value the torch-free codec reads (conformance.schema.wire_ext)
        name, raw = str(body.get("dtype")), _unb64(body.get("data"), path)
        if name not in ITEMSIZE:
            raise ViewError(f"{path}: {body.get('dtype')!r} is not a tensor dtype that travels as raw bytes")
        if len(raw) != math.prod(shape) * ITEMSIZE[name]:
            raise ViewError(f"{path}: {len(raw)} data bytes for shape {list(shape)} of {name}")
        return WireTensor(shape, name, str(body.get("device", "cpu")), raw)
    import torch

    dtype = getattr(torch, str(body.get("dtype")), None)
    if not isinstance(dtype, torch.dtype):
        raise ViewError(f"{path}: {body.get('dtype')!r} is not a torch dtype name")
    raw = _unb64(body.get("data"), path)
    if len(raw) != math.prod(shape) * dtype.itemsize:
        raise ViewError(f"{path}: {len(raw)} data bytes for shape {list(shape)} of {body['dtype']}")
    if str(dtype).startswith("torch.q"):  # qint8, quint8, qint32, quint4x2, ...
        return _quantized(dtype, raw, shape, path)
    if not raw:
        tensor = torch.empty(shape, dtype=dtype)
    else:
        tensor = torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)
    device = body.get("device", "cpu")
    return tensor if device == "cpu" else tensor.to(torch.device(device))


def _quantized(dtype: torch.dtype, raw: bytes, shape: tuple[int, ...], path: str) -> torch.Tensor:
    """A real quantized tensor (scale 1, zero point 0) whose integer values are `raw`: built
    through torch's quantizer, since a quantized tensor made from raw bytes alone crashes the
    process that reads it. What encoders must refuse (SPEC R-TEN-1) is then a safe value."""
    import torch

    # the integer storage of the quantized dtypes a view can describe (data = the integer values)
    storage = {torch.qint8: torch.int8, torch.quint8: torch.uint8, torch.qint32: torch.int32}.get(dtype)
    if storage is None:
        raise ViewError(f"{path}: quantized dtype {dtype} has no view")
    ints = torch.frombuffer(bytearray(raw), dtype=storage) if raw else torch.empty(0, dtype=storage)
    with warnings.catch_warnings():  # torch deprecates quantized tensors; this one is built on purpose
        warnings.simplefilter("ignore")
        return torch._make_per_tensor_quantized_tensor(ints.reshape(shape), 1.0, 0)


def _ndarray(body: Any, path: str) -> np.ndarray:
    shape = _shape(body, path)
    try:
        dtype = np.dtype(body.get("dtype"))
    except TypeError:
        raise ViewError(f"{path}: {body.get('dtype')!r} is not a numpy dtype string") from None
    if dtype.hasobject:
        raise ViewError(f"{path}: object arrays have no view")
    raw = _unb64(body.get("data"), path)
    if len(raw) != math.prod(shape) * dtype.itemsize:
        raise ViewError(f"{path}: {len(raw)} data bytes for shape {list(shape)} of {dtype.str}")
    arr: np.ndarray = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    return arr


def _omitted_defaults_dropped(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """An omit_defaults struct leaves out a field only when it holds the default object itself
    (msgspec compares by identity: a fresh 1.0 is written): a scalar equal to its default is
    left to the constructor, so the value encodes to the bytes the view was made from."""
    config = getattr(cls, "__struct_config__", None)
    if config is None or not config.omit_defaults:
        return kwargs
    defaults = {f.name: f.default for f in msgspec.structs.fields(cls)}
    scalars = (int, float, str, bool, type(None))
    return {k: v for k, v in kwargs.items()
            if not (isinstance(v, scalars) and type(v) is type(defaults.get(k, msgspec.NODEFAULT))
                    and v == defaults[k] and repr(v) == repr(defaults[k]))}  # repr: -0.0 is not 0.0
