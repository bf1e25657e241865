"""Byte-level rules an implementation written from the spec gets wrong while every value still
looks right: fields left out as "equal" to their default (SPEC R-MSG-4), float 32 NaNs widened
with their payload lost (R-VAL-5), big-endian ndarrays converted (R-EXT-6). msgpack only: the
rules are about msgpack bytes."""

from __future__ import annotations

import enum
import math
import struct as _struct
from typing import Any, Iterator

import msgspec
import numpy as np
import pytest

from conformance.plugin import check
from conformance.schema.golden.catalogue import catalogue_for
from conformance.suite.failure import DECODE_RUNNER_BYTES, ENCODE, fail
from conformance.suite.fields import tensor_carrier

READ_BY_RUNNER = " (its bytes read by the runner's reference decode)"


def _msgpack_only(ipc: Any) -> None:
    if "msgpack" not in ipc.transports:
        pytest.skip(f"{ipc.adapter.label} is not tested over msgpack in this run")


def _reference_bytes(ipc: Any, value: Any) -> bytes:
    """msgpack bytes of a message as SPEC writes them (float 64, ext types of §4), by the spec
    tooling's codec for the manifest: the value is rebuilt from the catalogue's own classes."""
    catalogue = catalogue_for(ipc.manifest)
    return catalogue.encode(_in_classes(value, catalogue.classes))


def _in_classes(value: Any, classes: Any) -> Any:
    """A copy of value whose structs and enums are those of `classes` (same names, same fields)."""
    if isinstance(value, msgspec.Struct):
        return classes[type(value).__name__](**{name: _in_classes(getattr(value, name), classes)
                                                for name in value.__struct_fields__})
    if isinstance(value, (list, tuple)):
        return type(value)(_in_classes(item, classes) for item in value)
    if isinstance(value, dict):
        return {key: _in_classes(item, classes) for key, item in value.items()}
    if isinstance(value, enum.Enum) and type(value).__name__ in classes:
        return classes[type(value).__name__](value.value)
    return value


def _bits(value: float) -> int:
    bits: int = _struct.unpack(">Q", _struct.pack(">d", value))[0]
    return bits


def _carrier(ipc: Any, predicate: Any) -> Iterator[tuple[str, str]]:
    """(message, field) pairs of the manifest whose field type matches."""
    for spec in ipc.manifest.messages:
        for field in spec.fields:
            if predicate(field.type):
                yield spec.name, field.name


# -- R-MSG-4: omission compares floats by their bits ---------------------------------------
def _zero_float_defaults(ipc: Any) -> dict[str, tuple[str, str, str]]:
    """Map-encoded omit_defaults struct -> (its float field defaulting to 0.0, a message, the
    message's List[struct] field that carries it)."""
    found = {}
    for spec in ipc.manifest.structs.values():
        if spec.options.get("array_like") or not spec.options.get("omit_defaults"):
            continue
        field = next((f.name for f in spec.fields if f.type == "float" and f.default.kind == "value"
                      and f.default.value == 0.0), None)
        carrier = next(_carrier(ipc, lambda t, name=spec.name: t in (f"List[{name}]", f"Optional[List[{name}]]")), None)
        if field and carrier:
            found[spec.name] = (field, *carrier)
    return found


@check("Omission", per=("struct",), name="NegativeZeroWritten",
       cases={"struct": lambda ipc: sorted(_zero_float_defaults(ipc))})
def test_negative_zero_is_not_the_default(ipc, struct):
    """-0.0 == 0.0 in every language, but it is not the default 0.0: it MUST be written."""
    _msgpack_only(ipc)
    field, message, list_field = _zero_float_defaults(ipc)[struct]
    value = ipc.instance(message, "typical")
    items = getattr(value, list_field)
    if not items:
        fail(f"the typical {message} carries no {struct} in {list_field}", "R-MSG-4",
             step="the suite's canonical typical instance (a sample values defect, not the implementation's)")
    for item in items:
        setattr(item, field, -0.0)
    sent = ipc.adapter.encode(value, "msgpack")
    got = getattr(catalogue_for(ipc.manifest).decode(sent), list_field)
    for i, item in enumerate(got):
        written = getattr(item, field)
        if _bits(written) != _bits(-0.0):
            fail(f"msgpack encode: {message}.{list_field}[{i}].{field}: -0.0 arrived as {written!r}: a map-encoded "
                 f"omit_defaults struct left it out as equal to its default 0.0 (SPEC R-MSG-4: floats compare by bits)",
                 "R-MSG-4", step=ENCODE + READ_BY_RUNNER, data=sent, value=value, ipc=ipc)


# -- R-VAL-5: float 32 widening keeps NaN payloads ------------------------------------------
FLOAT32_CASES = {  # float32 bits -> the binary64 bits a decoder must produce
    "signalling_nan": (0x7F800001, 0x7FF8000020000000),
    "negative_nan_payload": (0xFFC12345, 0xFFF82468A0000000),
    "negative_zero": (0x80000000, 0x8000000000000000),
    "infinity": (0x7F800000, 0x7FF0000000000000),
    "one_third": (0x3EAAAAAB, 0x3FD5555560000000),
}
_MARKER = 0.123456789012345  # a float64 that appears once in the message, then becomes a float 32


def _plain_float_carrier(ipc: Any) -> tuple[str, str]:
    found = next(_carrier(ipc, lambda t: t in ("float", "Optional[float]")), None)
    if found is None:
        pytest.skip(f"no message of {ipc.manifest.id} has a float field")
    return found


@check("FloatWidening", per=("case",), name="KeepsBits", cases={"case": lambda ipc: list(FLOAT32_CASES)})
def test_float32_widens_keeping_its_bits(ipc, case):
    _msgpack_only(ipc)
    message, field = _plain_float_carrier(ipc)
    single, double = FLOAT32_CASES[case]
    value = ipc.instance(message, "typical")
    setattr(value, field, _MARKER)
    data = _reference_bytes(ipc, value)
    wide = b"\xcb" + _struct.pack(">d", _MARKER)
    if data.count(wide) != 1:
        fail(f"the marker float is not unique in {message}", "R-VAL-5",
             step="the runner's reference encode of the canonical typical instance (a suite defect)", data=data)
    narrowed = data.replace(wide, b"\xca" + _struct.pack(">I", single))
    got = getattr(ipc.adapter.decode(narrowed, "msgpack"), field)
    if not (isinstance(got, float) and _bits(got) == double):
        fail(f"msgpack decode: {message}.{field}: float 32 0x{single:08x} became "
             f"{'0x%016x' % _bits(got) if isinstance(got, float) else repr(got)}, expected 0x{double:016x} "
             "(SPEC R-VAL-5: sign and payload kept, quiet bit set)", "R-VAL-5", step=DECODE_RUNNER_BYTES,
             data=narrowed, ipc=ipc)


# -- R-EXT-6: big-endian ndarrays stay big-endian -------------------------------------------
BIG_ENDIAN = np.array([1.5, -2.0, math.inf, 3.25], dtype=">f4")


def _ndarray_carriers(ipc: Any) -> list[str]:
    found: dict[str, str] = {}
    for message, field in _carrier(ipc, lambda t: "NDArray" in t and t.startswith(("Optional[List[", "List["))):
        found.setdefault(message, field)
    return sorted(found)[:1]  # one carrier proves the codec; every message shares it


def _with_big_endian_array(ipc: Any, message: str) -> tuple[Any, str]:
    field = next(f for m, f in _carrier(ipc, lambda t: "NDArray" in t) if m == message)
    value = ipc.instance(message, "typical")
    setattr(value, field, [BIG_ENDIAN.copy()])
    return value, field


def _check_kept(ipc: Any, got: Any, where: str, step: str, data: bytes, value: Any) -> None:
    if not isinstance(got, np.ndarray):
        fail(f"{where}: arrived as {type(got).__name__}, not an ndarray", "R-EXT-6", step=step, data=data,
             value=value, ipc=ipc)
    if not (got.dtype.str == ">f4" and got.tobytes() == BIG_ENDIAN.tobytes()):
        fail(f"{where}: a big-endian '>f4' ndarray arrived as {got.dtype.str!r} {got.tolist()} "
             f"(bytes {got.tobytes().hex()}, sent {BIG_ENDIAN.tobytes().hex()}): SPEC R-EXT-6 keeps the byte order",
             "R-EXT-6", step=step, data=data, value=value, ipc=ipc)


@check("ByteOrder", per=("struct", "direction"), name="BigEndianKept",
       cases={"struct": _ndarray_carriers, "direction": lambda ipc: ["encode", "decode"]})
def test_big_endian_ndarray_is_kept(ipc, struct, direction):
    _msgpack_only(ipc)
    value, field = _with_big_endian_array(ipc, struct)
    catalogue = catalogue_for(ipc.manifest)
    if direction == "encode":  # the implementation writes, the reference reads
        data, step = ipc.adapter.encode(value, "msgpack"), ENCODE + READ_BY_RUNNER
        got = getattr(catalogue.decode(data), field)[0]
    else:  # the reference writes, the implementation reads
        data, step = _reference_bytes(ipc, value), DECODE_RUNNER_BYTES
        got = getattr(ipc.adapter.decode(data, "msgpack"), field)[0]
    _check_kept(ipc, got, f"msgpack {direction}: {struct}.{field}[0]", step, data, value)


# -- R-TEN-1: every dtype of the table travels, by its canonical name ------------------------
#: SPEC R-TEN-1's table: canonical name -> item size in bytes.
TENSOR_DTYPES = {
    **dict.fromkeys(["bool", "int8", "uint8", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                     "float8_e8m0fnu", "float4_e2m1fn_x2", "bits8", "bits1x8", "bits2x4", "bits4x2",
                     *(f"int{n}" for n in range(1, 8)), *(f"uint{n}" for n in range(1, 8))], 1),
    **dict.fromkeys(["float16", "bfloat16", "int16", "uint16", "bits16"], 2),
    **dict.fromkeys(["float32", "int32", "uint32", "complex32"], 4),
    **dict.fromkeys(["float64", "int64", "uint64", "complex64"], 8),
    "complex128": 16,
}


def _raw_for(dtype: str, size: int) -> bytes:
    """Two elements' raw bytes that are valid for the dtype (bool: 0 and 1)."""
    return b"\x00\x01" if dtype == "bool" else bytes(range(1, 2 * size + 1))


@check("TensorDtype", per=("dtype",), name="Travels", cases={"dtype": lambda ipc: list(TENSOR_DTYPES)})
def test_tensor_dtype_travels(ipc, dtype):
    """Written by the implementation and read by the reference, then the other way round: the
    dtype name and the raw bytes arrive unchanged."""
    from conformance.tensors import require_torch

    torch = require_torch()
    _msgpack_only(ipc)
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        pytest.skip(f"this runner's torch {torch.__version__} has no {dtype}")
    raw = _raw_for(dtype, TENSOR_DTYPES[dtype])
    message, field = tensor_carrier(ipc)
    value = ipc.instance(message, "typical")
    setattr(value, field, [torch.frombuffer(bytearray(raw), dtype=torch_dtype)])
    catalogue = catalogue_for(ipc.manifest)
    for direction in ("encode", "decode"):
        if direction == "encode":  # the implementation writes, the reference reads
            data, step = ipc.adapter.encode(value, "msgpack"), ENCODE + READ_BY_RUNNER
            tensor = getattr(catalogue.decode(data), field)[0]
        else:  # the reference writes, the implementation reads
            data, step = _reference_bytes(ipc, value), DECODE_RUNNER_BYTES
            tensor = getattr(ipc.adapter.decode(data, "msgpack"), field)[0]
        arrived = tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        if not (tensor.dtype == torch_dtype and arrived == raw):
            fail(f"msgpack {direction}: {message}.{field}[0]: a {dtype} tensor (raw {raw.hex()}) arrived as "
                 f"{str(tensor.dtype).removeprefix('torch.')} (raw {arrived.hex()}) (SPEC R-TEN-1)", "R-TEN-1",
                 step=step, data=data, value=value, ipc=ipc)
