"""Mutants: the reference implementation with one realistic bug each.

Every mutant is a ReferenceAdapter subclass; the mutation runner runs the whole suite
against each (``ipc-conformance run --impl reference_tools.proof.mutants:<Name>``) and counts
it caught when at least one Required check fails. Bugs are planted at the adapter
boundary: on the encoder's bytes (decoded untyped, changed, written back by
conformance.schema.wire_form), on the objects going in or coming out, or by patching a reference_impl
function for the duration of one call. The reference source is never edited.
"""

from __future__ import annotations

import array
import contextlib
import enum
import math
import pickle
import re
import struct
from pathlib import Path
from typing import Any, Callable, Optional

import msgspec
import numpy as np
import torch

from conformance.schema.wire_form import Float32, fits_float32
from conformance.schema.wire_form import read_value as read
from conformance.schema.wire_form import rewrite_value as rewrite
from conformance.schema.wire_form import write_value as write
from reference_impl.testee import (  # the bugs of its --break modes: drop-defaults, map, tuple, HTTP ones
    fit_tuples,
    http_json_with_breaks,
    map_structs,
    patched,
    trailing_defaults,
    unknown_map_keys,
)
from reference_tools.adapter import ReferenceAdapter


# -- helpers ------------------------------------------------------------------------------
def deep_map(value: Any, fn: Callable[[Any], Any]) -> Any:
    """A copy of value with fn applied bottom-up to every node (structs rebuilt, never changed
    in place: the caller's object stays as it was)."""
    if isinstance(value, msgspec.Struct):
        fields = {n: deep_map(getattr(value, n), fn) for n in value.__struct_fields__}
        value = msgspec.structs.replace(value, **fields)
    elif type(value) in (list, tuple):
        value = type(value)(deep_map(v, fn) for v in value)
    elif type(value) is dict:
        value = {deep_map(k, fn): deep_map(v, fn) for k, v in value.items()}
    return fn(value)


def _is_tag_array(node: Any) -> bool:
    return isinstance(node, list) and bool(node) and isinstance(node[0], str) and node[0][:1].isupper()


class Mutant(ReferenceAdapter):
    """The reference; subclasses override one of the hooks below."""

    #: what kind of bug (the mutation report groups by it)
    kind = "encoder"

    def encode_object(self, obj: Any, transport: str) -> Any:
        return obj

    def mutate_wire(self, tree: Any, obj: Any) -> Any:
        """msgpack only: the message as an untyped tree (tag arrays, maps, Ext)."""
        return tree

    def encode(self, obj: Any, transport: str) -> bytes:
        obj = self.encode_object(obj, transport)
        data = super().encode(obj, transport)
        if transport != "msgpack" or type(self).mutate_wire is Mutant.mutate_wire:
            return data
        return write(self.mutate_wire(read(data), obj))


class _WireNodes(Mutant):
    """Encoder bug applied to every node of the wire tree."""

    def node(self, value: Any) -> Any:
        return value

    def mutate_wire(self, tree: Any, obj: Any) -> Any:
        return rewrite(tree, self.node)


# -- encoder: byte rules (R-VAL-2, R-MSG-2, R-MSG-1) ----------------------------------------
class Float32Narrowing(_WireNodes):
    """Floats that fit float 32 without loss are written as float 32 (R-VAL-2)."""

    def node(self, value: Any) -> Any:
        return Float32(value) if type(value) is float and math.isfinite(value) and fits_float32(value) else value


class IntegralFloatsAsInts(_WireNodes):
    """Floats with an integral value are written as msgpack ints (R-VAL-2)."""

    def node(self, value: Any) -> Any:
        if type(value) is float and math.isfinite(value) and value.is_integer() and abs(value) < 1 << 63 \
                and not (value == 0 and math.copysign(1, value) < 0):
            return int(value)
        return value


class DropsTrailingDefaults(Mutant):
    """Trailing fields equal to their defaults are left out of the array (R-MSG-2)."""

    def mutate_wire(self, tree: Any, obj: Any) -> Any:
        if not (isinstance(obj, msgspec.Struct) and _is_tag_array(tree)):
            return tree
        return tree[:len(tree) - trailing_defaults(obj)]


class SwapsFirstTwoFields(Mutant):
    """The first two fields of every tagged struct change places (R-MSG-1, field order)."""

    def mutate_wire(self, tree: Any, obj: Any) -> Any:
        def node(v: Any) -> Any:
            if _is_tag_array(v) and len(v) >= 3:
                return [v[0], v[2], v[1], *v[3:]]
            return v
        return rewrite(tree, node)


class DropsLastField(Mutant):
    """The last field of a message is not sent (an encoder one version behind, R-MSG-2)."""

    def mutate_wire(self, tree: Any, obj: Any) -> Any:
        return tree[:-1] if _is_tag_array(tree) and len(tree) > 1 else tree


class AppendsExtraField(Mutant):
    """An extra nil element after the last field (an encoder one version ahead, R-MSG-2)."""

    def mutate_wire(self, tree: Any, obj: Any) -> Any:
        return [*tree, None] if _is_tag_array(tree) else tree


class QualifiedTag(Mutant):
    """The tag is the module-qualified class name, not the manifest's tag (R-MSG-1)."""

    def mutate_wire(self, tree: Any, obj: Any) -> Any:
        return [f"io_struct.{tree[0]}", *tree[1:]] if _is_tag_array(tree) else tree


class MapsInReverseOrder(_WireNodes):
    """Map entries are written in reverse insertion order (§3: insertion order)."""

    def node(self, value: Any) -> Any:
        return dict(reversed(list(value.items()))) if isinstance(value, dict) and len(value) > 1 else value


# -- encoder: value mapping (§3) ----------------------------------------------------------
class BoolAsInt(_WireNodes):
    """true/false are written as the ints 1/0."""

    def node(self, value: Any) -> Any:
        return int(value) if value is True or value is False else value


class StrAsBin(Mutant):
    """Strings (except tags) are written as msgpack bin."""

    def mutate_wire(self, tree: Any, obj: Any) -> Any:
        def node(v: Any) -> Any:
            if isinstance(v, list):
                return [x.encode() if isinstance(x, str) and not (i == 0 and _is_tag_array(v)) else x
                        for i, x in enumerate(v)]
            if isinstance(v, dict):
                return {k: x.encode() if isinstance(x, str) else x for k, x in v.items()}
            return v
        return rewrite(tree, node)


class BinAsStr(_WireNodes):
    """bytes are written as a msgpack str (latin-1 text)."""

    def node(self, value: Any) -> Any:
        return value.decode("latin-1") if isinstance(value, bytes) else value


class IntKeysAsStr(_WireNodes):
    """Integer map keys are written as strings (as JSON would)."""

    def node(self, value: Any) -> Any:
        if isinstance(value, dict) and any(type(k) is int for k in value):
            return {str(k) if type(k) is int else k: v for k, v in value.items()}
        return value


class DropsNoneInLists(_WireNodes):
    """None entries inside lists are left out (nested logprobs, R-NONE-1)."""

    def node(self, value: Any) -> Any:
        if isinstance(value, list) and not _is_tag_array(value) and any(v is None for v in value):
            return [v for v in value if v is not None]
        return value


class NoneInListsAsZero(_WireNodes):
    """None entries inside lists of numbers are written as 0.0 (R-NONE-1)."""

    def node(self, value: Any) -> Any:
        if isinstance(value, list) and not _is_tag_array(value) and any(v is None for v in value) \
                and any(type(v) is float for v in value):
            return [0.0 if v is None else v for v in value]
        return value


class LosesNegativeZero(_WireNodes):
    """-0.0 is written as 0.0 (the bit pattern of every float64 is kept, §3)."""

    def node(self, value: Any) -> Any:
        return 0.0 if type(value) is float and value == 0 else value


class CanonicalNaN(_WireNodes):
    """Every NaN is written as the canonical quiet NaN (payloads and sign lost, §3)."""

    def node(self, value: Any) -> Any:
        return float("nan") if type(value) is float and math.isnan(value) else value


class ClampsLargeInts(_WireNodes):
    """Ints above the signed 64-bit range are clamped to int64 max (§3: unsigned up to 2^64-1)."""

    def node(self, value: Any) -> Any:
        return (1 << 63) - 1 if type(value) is int and value >= 1 << 63 else value


class EnumByName(Mutant):
    """Enum members are sent by name, not by value (R-VAL-4)."""

    def encode_object(self, obj: Any, transport: str) -> Any:
        if transport != "msgpack":
            return obj
        return deep_map(obj, lambda v: v.name if isinstance(v, enum.Enum) else v)


class OversizedIntsClamped(Mutant):
    """Ints outside the 64-bit range are clamped instead of failing to encode (R-VAL-1)."""

    def encode_object(self, obj: Any, transport: str) -> Any:
        def clamp(v: Any) -> Any:
            return max(-(1 << 63), min((1 << 64) - 1, v)) if type(v) is int else v
        return deep_map(obj, clamp) if transport == "msgpack" else obj


class SurrogatesReplaced(Mutant):
    """Lone surrogates are replaced by U+FFFD instead of failing to encode (R-VAL-3)."""

    def encode_object(self, obj: Any, transport: str) -> Any:
        def clean(v: Any) -> Any:
            return v.encode("utf-8", "replace").decode("utf-8") if type(v) is str else v
        return deep_map(obj, clean) if transport == "msgpack" else obj


class QuantizedSentAsIntegers(Mutant):
    """A quantized tensor is sent as its integer representation (R-TEN-1: refuse it)."""

    def encode_object(self, obj: Any, transport: str) -> Any:
        return deep_map(obj, lambda v: v.int_repr() if isinstance(v, torch.Tensor) and v.is_quantized else v)


# -- encoder: extension types (§4, §5) ---------------------------------------------------
_BUFFER_CODES = (1, 2, 3)
_TORCH_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4, "int16": 2,
                   "int8": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "complex64": 8,
                   "complex128": 16}


def _split(ext: msgspec.msgpack.Ext) -> tuple[Any, bytes]:
    data = bytes(ext.data)
    (n,) = struct.unpack(">I", data[:4])
    return msgspec.msgpack.decode(data[4:4 + n]), data[4 + n:]


def _join(code: int, metadata: Any, raw: bytes) -> msgspec.msgpack.Ext:
    meta = msgspec.msgpack.encode(metadata)
    return msgspec.msgpack.Ext(code, struct.pack(">I", len(meta)) + meta + raw)


class _ExtNodes(_WireNodes):
    def ext(self, code: int, metadata: Any, raw: bytes) -> tuple[Any, bytes]:
        return metadata, raw

    def node(self, value: Any) -> Any:
        if isinstance(value, msgspec.msgpack.Ext) and value.code in _BUFFER_CODES:
            metadata, raw = self.ext(value.code, *_split(value))
            return _join(value.code, metadata, raw)
        return value


class ExtMetadataLengthLittleEndian(_WireNodes):
    """The 4-byte metadata length of buffer extensions is little-endian (R-EXT-1)."""

    def node(self, value: Any) -> Any:
        if isinstance(value, msgspec.msgpack.Ext) and value.code in _BUFFER_CODES:
            data = bytes(value.data)
            return msgspec.msgpack.Ext(value.code, data[:4][::-1] + data[4:])
        return value


class RawBytesBigEndian(_ExtNodes):
    """Element bytes in big-endian order (R-EXT-2: little-endian)."""

    def ext(self, code: int, metadata: Any, raw: bytes) -> tuple[Any, bytes]:
        size = {1: lambda: array.array(metadata).itemsize, 2: lambda: _TORCH_ITEMSIZE.get(metadata[1], 1),
                3: lambda: np.dtype(metadata[1]).itemsize}[code]()
        if size == 1 or not raw:
            return metadata, raw
        if code == 2 and metadata[1].startswith("complex"):
            size //= 2
        return metadata, b"".join(raw[i:i + size][::-1] for i in range(0, len(raw), size))


class TensorDtypeRenamed(_ExtNodes):
    """bfloat16 tensors are labelled float16 (bytes unchanged: dtype not preserved, R-TEN-1)."""

    def ext(self, code: int, metadata: Any, raw: bytes) -> tuple[Any, bytes]:
        if code == 2 and metadata[1] == "bfloat16":
            metadata = [metadata[0], "float16", metadata[2]]
        return metadata, raw


class ZeroDimAsShapeOne(_ExtNodes):
    """0-d tensors and ndarrays are sent with shape [1] (R-TEN-2)."""

    def ext(self, code: int, metadata: Any, raw: bytes) -> tuple[Any, bytes]:
        if code in (2, 3) and metadata[0] == []:
            metadata = [[1], *metadata[1:]]
        return metadata, raw


class EmptyShapeFlattened(_ExtNodes):
    """Empty tensors and ndarrays are sent with shape [0] whatever their dimensions (R-TEN-2)."""

    def ext(self, code: int, metadata: Any, raw: bytes) -> tuple[Any, bytes]:
        if code in (2, 3) and 0 in metadata[0] and len(metadata[0]) > 1:
            metadata = [[0], *metadata[1:]]
        return metadata, raw


class NdarrayDtypeByteOrderFlipped(_ExtNodes):
    """ndarray dtype strings carry the wrong byte order ('<f4' sent as '>f4', §4)."""

    def ext(self, code: int, metadata: Any, raw: bytes) -> tuple[Any, bytes]:
        if code == 3 and metadata[1][:1] == "<":
            metadata = [metadata[0], ">" + metadata[1][1:]]
        return metadata, raw


class ArrayTypecodeUnsigned(_ExtNodes):
    """array('q') is sent with typecode 'Q' (token ids lose their sign, R-EXT-2)."""

    def ext(self, code: int, metadata: Any, raw: bytes) -> tuple[Any, bytes]:
        return ("Q" if code == 1 and metadata == "q" else metadata), raw


class ArrayAsList(_WireNodes):
    """array.array values are sent as plain msgpack arrays of ints, not extension 1."""

    def node(self, value: Any) -> Any:
        if isinstance(value, msgspec.msgpack.Ext) and value.code == 1:
            metadata, raw = _split(value)
            return list(array.array(metadata, raw))
        return value


def _storage_order(t: torch.Tensor, *, keep_offset: bool) -> torch.Tensor:
    """What an encoder that sends the storage bytes (not the contiguous copy) delivers."""
    if t.is_contiguous() and (keep_offset or t.storage_offset() == 0) or t.numel() == 0:
        return t
    base = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
    start = t.storage_offset() if keep_offset else 0
    return base[start:start + t.numel()].reshape(t.shape).clone()


class ViewBytesNotContiguous(Mutant):
    """A non-contiguous tensor is sent as its storage bytes in memory order (R-TEN-4)."""

    kind = "encoder"

    def encode_object(self, obj: Any, transport: str) -> Any:
        return deep_map(obj, lambda v: _storage_order(v.detach(), keep_offset=True)
                        if isinstance(v, torch.Tensor) and not v.is_contiguous() else v)


class IgnoresStorageOffset(Mutant):
    """A view's bytes are read from the start of its storage (the offset is lost, R-TEN-4)."""

    def encode_object(self, obj: Any, transport: str) -> Any:
        return deep_map(obj, lambda v: _storage_order(v.detach(), keep_offset=False)
                        if isinstance(v, torch.Tensor) and v.storage_offset() else v)


# -- PickleWrapper (§6) -----------------------------------------------------------------------
class WrapperContentsLost(Mutant):
    """The sender wraps, but the wrapper's bytes hold None (contents lost, R-PW-1)."""

    kind = "wrapper"

    def _lost(self, value: Any) -> Any:
        return None if value is None else self._module.PickleWrapper(pickle.dumps(None))

    def wrap(self, obj: Any) -> Any:
        with patched(self._codec, "wrap", self._lost):
            return super().wrap(obj)

    def encode(self, obj: Any, transport: str) -> bytes:
        with patched(self._codec, "wrap", self._lost):
            return super().encode(obj, transport)


class UnwrapSkipped(Mutant):
    """A receive path forgets to unwrap (R-PW-3)."""

    kind = "wrapper"

    def unwrap(self, obj: Any) -> Any:
        return obj


class UnwrapOnlyTopLevel(Mutant):
    """The receive path opens a top-level PickleWrapper but not wrapper fields (R-PW-3)."""

    kind = "wrapper"

    def unwrap(self, obj: Any) -> Any:
        return super().unwrap(obj) if type(obj).__name__ == "PickleWrapper" else obj


class GuessesWrappersFromValues(Mutant):
    """Every dict value is wrapped, whatever the field's declared type (R-PW-2)."""

    kind = "wrapper"

    def encode_object(self, obj: Any, transport: str) -> Any:
        if transport != "msgpack" or not isinstance(obj, msgspec.Struct):
            return obj
        wrapper = self._module.PickleWrapper
        return msgspec.structs.replace(obj, **{n: wrapper(pickle.dumps(getattr(obj, n)))
                                               for n in obj.__struct_fields__ if type(getattr(obj, n)) is dict})


class UntrustedReceiveUnpicklesAllowListed(Mutant):
    """The untrusted receive path opens wrappers through the allow-listed unpickler (R-PW-5:
    no pickle at all for untrusted peers)."""

    kind = "wrapper"

    def receive(self, data: bytes, transport: str) -> Any:
        return self._codec.decode(data, transport, allow_pickle=True)


class UntrustedReceiveUnpickles(Mutant):
    """The untrusted receive path calls pickle.loads on wrapper bytes (R-PW-5)."""

    kind = "wrapper"

    def receive(self, data: bytes, transport: str) -> Any:
        obj = self._codec.decode(data, transport, unwrap_wrappers=False)
        return deep_map(obj, lambda v: pickle.loads(v.data) if type(v).__name__ == "PickleWrapper" else v)


# -- decoder ----------------------------------------------------------------------------------
class _Decoded(Mutant):
    """Decoder bug applied to every node of the decoded value."""

    kind = "decoder"

    def node(self, value: Any) -> Any:
        return value

    def decode(self, data: bytes, transport: str) -> Any:
        return deep_map(super().decode(data, transport), self.node)


class IntegralFloatsDecodedAsInts(_Decoded):
    """Integral floats arrive as ints (int/float confusion)."""

    def node(self, value: Any) -> Any:
        return int(value) if type(value) is float and math.isfinite(value) and value.is_integer() else value


class BoolsDecodedAsInts(_Decoded):
    """Bools arrive as ints."""

    def node(self, value: Any) -> Any:
        return int(value) if type(value) is bool else value


class TuplesDecodedAsLists(_Decoded):
    """Tuple fields arrive as lists."""

    def node(self, value: Any) -> Any:
        return list(value) if type(value) is tuple else value


class ArraysDecodedAsLists(_Decoded):
    """array.array values arrive as lists of ints."""

    def node(self, value: Any) -> Any:
        return list(value) if isinstance(value, array.array) else value


class EmptyListsDecodedAsNone(_Decoded):
    """Empty lists arrive as None."""

    def node(self, value: Any) -> Any:
        return None if type(value) is list and not value else value


class TopLevelStrDecodedAsBytes(Mutant):
    """A top-level str arrives as bytes (R-MSG-6)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        value = super().decode(data, transport)
        return value.encode() if type(value) is str else value


class TopLevelNoneRefused(Mutant):
    """A top-level None cannot be sent (R-MSG-6)."""

    def encode(self, obj: Any, transport: str) -> bytes:
        if obj is None and transport == "msgpack":
            raise TypeError("Cannot serialize object of type <class 'NoneType'>")
        return super().encode(obj, transport)


_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")


def _first_object_length(data: bytes) -> int:
    """Bytes taken by the first msgpack object (for a decoder that stops there)."""
    try:
        msgspec.msgpack.decode(data)
    except msgspec.DecodeError as exc:
        found = _TRAILING.search(str(exc))
        if found:
            return int(found.group(1))
    return len(data)


class IgnoresTrailingBytes(Mutant):
    """Bytes after the first msgpack object are ignored instead of refused (R-MSG-11)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        if transport == "msgpack":
            data = bytes(data)[:_first_object_length(bytes(data))]
        return super().decode(data, transport)


def _unchecked(cls: type, items: list) -> Any:
    """An instance of cls holding items as they came, with none of msgspec's checks."""
    value = cls.__new__(cls)
    for field, item in zip(msgspec.structs.fields(cls), items):
        setattr(value, field.name, item)
    return value


def _untyped_message(mutant: Mutant, data: bytes) -> Optional[tuple[str, type, list]]:
    """(tag, class, items) of a msgpack message read without its types; None when it is not
    a tag array of the catalogue."""
    raw = read(bytes(data))
    if not _is_tag_array(raw) or raw[0] not in mutant.classes():
        return None
    return raw[0], mutant.classes()[raw[0]], raw[1:]


class _LenientDecoder(Mutant):
    """A decoder bug: where the real decode of a msgpack message fails, take the message's
    untyped items and let `lenient` build something of them (None: fail as the reference)."""

    kind = "decoder"

    def lenient(self, cls: type, items: list) -> Any:
        return None

    def decode(self, data: bytes, transport: str) -> Any:
        try:
            return super().decode(data, transport)
        except Exception:
            message = _untyped_message(self, data) if transport == "msgpack" else None
            value = self.lenient(*message[1:]) if message is not None else None
            if value is None:
                raise
            return value


class DefaultsForRequiredFields(_LenientDecoder):
    """A short array decodes with None for missing required fields (R-MSG-5)."""

    def lenient(self, cls: type, items: list) -> Any:
        missing = len(msgspec.structs.fields(cls)) - len(items)
        return _unchecked(cls, [*items, *([None] * missing)]) if missing > 0 else None


class UnknownTagDecodesAsNone(Mutant):
    """A tag that is not in the union decodes to None instead of failing (R-MSG-5)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        try:
            return super().decode(data, transport)
        except Exception as exc:
            if transport == "msgpack" and "tag" in str(exc).lower():
                return None
            raise


class WrongElementTypeKeptAsIs(_LenientDecoder):
    """An element of the wrong type is kept as sent instead of failing the decode (R-MSG-5)."""

    def lenient(self, cls: type, items: list) -> Any:
        return _unchecked(cls, items)


class RequiresCanonicalBytes(Mutant):
    """The decoder refuses bytes that are not in the canonical form (float 32, wide ints, R-VEC-2)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        if transport == "msgpack" and write(read(bytes(data))) != bytes(data):
            raise ValueError("msgpack decode: not in canonical form")
        return super().decode(data, transport)


class _PickyDecoder(Mutant):
    """A decoder bug: it refuses a msgpack message the spec accepts, for the reason `objection`
    finds in the message's untyped items (None: decode as the reference)."""

    kind = "decoder"

    def objection(self, cls: type, items: list) -> Optional[str]:
        return None

    def decode(self, data: bytes, transport: str) -> Any:
        message = _untyped_message(self, data) if transport == "msgpack" else None
        reason = self.objection(*message[1:]) if message is not None else None
        if reason:
            raise ValueError(f"msgpack decode: {message[0]}{reason}")
        return super().decode(data, transport)


class RefusesShortArrays(_PickyDecoder):
    """A message array shorter than the field count is refused, defaults or not (R-MSG-5)."""

    def objection(self, cls: type, items: list) -> Optional[str]:
        want = len(msgspec.structs.fields(cls))
        return f": expected {want} fields" if len(items) < want else None


class RefusesExtraElements(_PickyDecoder):
    """Elements after the last known field fail the decode (R-MSG-5: ignore them)."""

    def objection(self, cls: type, items: list) -> Optional[str]:
        return ": unexpected elements after the last field" if len(items) > len(msgspec.structs.fields(cls)) else None


class RefusesIntsForFloats(_PickyDecoder):
    """An int in a float field fails the decode (R-VAL-2: decoders accept it)."""

    def objection(self, cls: type, items: list) -> Optional[str]:
        for field, item in zip(msgspec.structs.fields(cls), items):
            if field.type in (float, Optional[float]) and type(item) is int:
                return f".{field.name}: Expected `float`, got `int`"
        return None


class DuplicateKeysFirstWins(Mutant):
    """A map with a duplicate key keeps the first value (R-VAL-6: refuse, or keep the last)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        if transport == "msgpack":
            from conformance.schema import wire_form

            def first_wins(item: Any) -> Any:
                if item.kind != "map":
                    return item
                seen, items = set(), []
                for k, v in zip(item.items[::2], item.items[1::2]):
                    if (k.kind, k.value) not in seen:
                        seen.add((k.kind, k.value))
                        items += [k, v]
                return wire_form.Item("map", items=tuple(items))
            data = wire_form.write(wire_form.rewrite(wire_form.parse(bytes(data)), first_wins))
        return super().decode(data, transport)


class IntKeysCoerced(Mutant):
    """A float or bool key in an int-keyed map is coerced to the int it equals instead of
    refused (R-VAL-6: in a Dict[int, V] a 1.0 or true key is a type error)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        try:
            return super().decode(data, transport)
        except Exception:
            if transport != "msgpack":
                raise

            def as_int(key: Any) -> Any:
                if isinstance(key, bool) or (isinstance(key, float) and key.is_integer()):
                    return int(key)
                return key

            coerced = write(deep_map(read(data), lambda v: {as_int(k): x for k, x in v.items()}
                                     if type(v) is dict else v))
            if coerced == bytes(data):
                raise
            return super().decode(coerced, transport)


class BigEndianNdarraysConverted(Mutant):
    """Big-endian ndarrays are converted to little-endian before sending (R-EXT-6: sent as they are)."""

    def encode_object(self, obj: Any, transport: str) -> Any:
        return deep_map(obj, lambda v: v.astype(v.dtype.newbyteorder("<"))
                        if isinstance(v, np.ndarray) and v.dtype.byteorder == ">" else v)


class NdarraysDecodedNative(_Decoded):
    """Received ndarrays are converted to the host's byte order (R-EXT-6: the dtype string is kept)."""

    def node(self, value: Any) -> Any:
        return value.astype(value.dtype.newbyteorder("=")) if isinstance(value, np.ndarray) and \
            value.dtype.byteorder == ">" else value


class UnknownExtRefused(Mutant):
    """Extension codes it does not know fail the decode instead of staying opaque (R-EXT-4)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        value = super().decode(data, transport)
        found = []
        deep_map(value, lambda v: found.append(v) if isinstance(v, msgspec.msgpack.Ext) else v)
        if found:
            raise ValueError(f"unknown extension code {found[0].code}")
        return value


class TensorRawLengthUnchecked(Mutant):
    """A tensor whose raw bytes do not match shape x itemsize is padded or cut to fit (R-EXT-3)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        from reference_impl import ext

        original = ext.restore_tensor

        def lenient(metadata: Any, raw: Any) -> torch.Tensor:
            try:
                dtype = ext.torch_dtype(metadata[1])
                need = math.prod(metadata[0]) * dtype.itemsize
                raw = bytes(raw)[:need].ljust(need, b"\0")
            except Exception:  # noqa: BLE001 - metadata it cannot read goes to the real hook unpadded
                pass
            return original(metadata, raw)
        with patched(ext, "restore_tensor", lenient):
            return super().decode(data, transport)


class TensorDeviceIgnored(Mutant):
    """Every tensor is restored on the CPU, whatever device it names (R-TEN-3)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        from reference_impl import ext

        with patched(ext, "_to_device", lambda tensor, device: tensor):
            return super().decode(data, transport)


class TensorSharesReceiveBuffer(Mutant):
    """A received tensor is a view of the message buffer, not its own memory (R-TEN-5)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        from reference_impl import ext

        original = ext.restore_tensor

        def shared(metadata: Any, raw: Any) -> torch.Tensor:
            tensor = original(metadata, raw)
            if tensor.numel() and isinstance(raw, memoryview) and not raw.readonly:
                return torch.frombuffer(raw, dtype=tensor.dtype).view(tensor.shape)
            return tensor
        with patched(ext, "restore_tensor", shared):
            return super().decode(data, transport)


# -- transports, sockets, top-level union ---------------------------------------------------
class PickleNormalizesLikeMsgpack(Mutant):
    """The pickle transport sends enum members as their values and sets as lists, as msgpack
    does in Any positions (R-NORM-2: no other normalizations)."""

    kind = "transport"

    @staticmethod
    def _plain(value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return value.value
        return list(value) if type(value) in (set, frozenset) else value

    def encode_object(self, obj: Any, transport: str) -> Any:
        return deep_map(obj, self._plain) if transport == "pickle" else obj


class SplitsMessageIntoFrames(Mutant):
    """A message is sent as two ZeroMQ frames (R-TRN-2: one message, one frame)."""

    kind = "transport"

    def send(self, sock: Any, obj: Any, transport: str, *, zero_copy: bool = False) -> None:
        if zero_copy:
            return super().send(sock, obj, transport, zero_copy=True)
        data = self.encode(obj, transport)
        sock.send_multipart([data[:1], data[1:]])


class CustomTypesNotInUnion(Mutant):
    """Types registered for the union (hook_custom_types, e.g. KvMetrics) are left out (R-MSG-7)."""

    kind = "catalogue"

    def _custom(self) -> set[str]:
        return {t.__name__ for t in getattr(self._module, "CUSTOM_MESSAGE_TYPES", ())}

    def message_types(self) -> tuple:
        return tuple(t for t in super().message_types() if t.__name__ not in self._custom())

    def decode(self, data: bytes, transport: str) -> Any:
        value = super().decode(data, transport)
        if type(value).__name__ in self._custom():
            raise ValueError(f"Invalid value '{type(value).__name__}': not in the union")
        return value




# -- edge values (EveryEdge) ----------------------------------------------------------------
class NonFiniteInListsAsNil(_WireNodes):
    """Non-finite floats inside lists (a masked token's -inf logprob, a NaN entropy) are written
    as nil (R-VAL-2, R-NONE-1)."""

    def node(self, value: Any) -> Any:
        if isinstance(value, list) and not _is_tag_array(value) \
                and any(type(v) is float and not math.isfinite(v) for v in value):
            return [None if type(v) is float and not math.isfinite(v) else v for v in value]
        return value


def _truthy(value: Any) -> bool:
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - arrays and tensors have no single truth value: the helper would wrap them
        return True


class FalsyOpaqueValuesSentAsNone(Mutant):
    """The wrapping helper tests truthiness (``if value:``): empty time stats or customized
    info ({}, [], 0, "", False) are sent as None instead of wrapped (R-PW-1)."""

    kind = "wrapper"

    def _wrap(self, value: Any) -> Any:
        from reference_impl.pickle_wrapper import wrap

        if isinstance(value, self._module.PickleWrapper):
            return value
        return wrap(value) if _truthy(value) else None

    def wrap(self, obj: Any) -> Any:
        with patched(self._codec, "wrap", self._wrap):
            return super().wrap(obj)

    def encode(self, obj: Any, transport: str) -> bytes:
        with patched(self._codec, "wrap", self._wrap):
            return super().encode(obj, transport)


class NumpyBoolEncodedAsInt(Mutant):
    """The encode hook's numpy scalar branches are merged: np.bool_ takes the np.integer branch
    and a bool field is written 0/1 (SPEC 3.1, R-VAL-7)."""

    def encode(self, obj: Any, transport: str) -> bytes:
        from reference_impl import ext

        original = ext.enc_hook

        def merged(value: Any) -> Any:
            return int(value) if isinstance(value, (np.integer, np.bool_)) else original(value)
        with patched(ext, "enc_hook", merged):
            return super().encode(obj, transport)


class NumpyFloatsRoundedToShortest(Mutant):
    """The encode hook turns a numpy float into the float of its shortest text (``float(str(x))``):
    np.float32(0.1) arrives as 0.1, not as the float64 of its value (SPEC 3.1, R-VAL-8)."""

    def encode(self, obj: Any, transport: str) -> bytes:
        from reference_impl import ext

        original = ext.enc_hook

        def textual(value: Any) -> Any:
            return float(str(value)) if isinstance(value, np.floating) else original(value)
        with patched(ext, "enc_hook", textual):
            return super().encode(obj, transport)


# -- map-encoded structs, fixed-size tuples, the HTTP bridge (R-MSG-4, R-MSG-11, R-HTTP-2) ---------
def _untyped_tree(data: bytes) -> Any:
    return msgspec.msgpack.decode(data, ext_hook=lambda code, raw: msgspec.msgpack.Ext(code, bytes(raw)))


class MapUnknownKeysRefused(Mutant):
    """A map-encoded struct with a key the decoder does not know fails the decode (R-MSG-4: ignore it)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        value = super().decode(data, transport)
        if transport == "msgpack":
            unknown = unknown_map_keys(value, _untyped_tree(data))
            if unknown:
                raise ValueError(f"Object contains unknown field `{unknown[0]}`")
        return value


class MapDefaultsNotFilled(Mutant):
    """Fields a map-encoded struct leaves out arrive as None, not as their defaults (R-MSG-4)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        value = super().decode(data, transport)
        if transport == "msgpack":
            for obj, wire in map_structs(value, _untyped_tree(data)):
                for name, key in zip(obj.__struct_fields__, obj.__struct_encode_fields__):
                    if key not in wire:
                        msgspec.structs.force_setattr(obj, name, None)
        return value


class TupleAnyLength(Mutant):
    """A fixed-size tuple of another length is cut or padded to fit instead of failing the decode (R-MSG-11)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        try:
            return super().decode(data, transport)
        except Exception:
            if transport != "msgpack":
                raise
            from conformance.schema.manifest import load_manifest

            fitted = write(fit_tuples(read(data), load_manifest(self._module.MANIFEST_ID)))
            if fitted == bytes(data):
                raise
            return super().decode(fitted, transport)


class HttpFactoryRequired(Mutant):
    """The HTTP bridge treats a field with a default factory as required (R-HTTP-2: it takes the default)."""

    kind = "http"

    def validate_http(self, struct: str, json_text: str) -> Any:
        cls = getattr(self._module, struct)
        return super().validate_http(struct, http_json_with_breaks(cls, json_text, {"http-factory-required"}))


class HttpUnknownKeysAccepted(Mutant):
    """The HTTP bridge drops keys it does not know instead of rejecting them (R-HTTP-2)."""

    kind = "http"

    def validate_http(self, struct: str, json_text: str) -> Any:
        cls = getattr(self._module, struct)
        return super().validate_http(struct, http_json_with_breaks(cls, json_text, {"http-unknown-keys"}))


class _Base64Bridge(Mutant):
    """The HTTP bridge's base64 decode of one text replaced, in JSON and in Python mode alike,
    for the duration of each validation (conformance/runtime/http_bridge.py ``_from_base64``)."""

    kind = "http"

    def decode_text(self, text: str) -> bytes:
        raise NotImplementedError

    def _bridge(self) -> contextlib.AbstractContextManager:
        from pydantic_core import PydanticCustomError

        from conformance.runtime import http_bridge

        original = http_bridge._from_base64

        def decode(value: Any) -> Any:
            if not isinstance(value, str):
                return original(value)
            try:
                return self.decode_text(value)
            except ValueError as exc:  # binascii.Error is one
                raise PydanticCustomError("base64", "invalid base64 text: {reason}", {"reason": str(exc)}) from None

        return patched(http_bridge, "_from_base64", decode)

    def validate_http(self, struct: str, json_text: str) -> Any:
        with self._bridge():
            return super().validate_http(struct, json_text)

    def validate_http_python(self, struct: str, body: Any) -> Any:
        with self._bridge():
            return super().validate_http_python(struct, body)


class Base64Lenient(_Base64Bridge):
    """base64 decoded without validation (b64decode's default): characters outside the alphabet,
    whitespace and URL-safe characters are skipped, not refused (R-HTTP-3)."""

    def decode_text(self, text: str) -> bytes:
        import base64

        return base64.b64decode(text)


class Base64UrlSafeAccepted(_Base64Bridge):
    """The URL-safe alphabet ('-', '_') taken for the standard one's '+', '/' (R-HTTP-3)."""

    def decode_text(self, text: str) -> bytes:
        import base64

        return base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)


class Base64PaddingIgnored(_Base64Bridge):
    """Padding ignored: the text's '=' stripped and put back as needed, so missing or extra
    padding is accepted (R-HTTP-3)."""

    def decode_text(self, text: str) -> bytes:
        import base64

        bare = text.rstrip("=")
        return base64.b64decode(bare + "=" * (-len(bare) % 4), validate=True)


class Base64WhitespaceStripped(_Base64Bridge):
    """Leading and trailing whitespace stripped before a strict decode (R-HTTP-3: refused)."""

    def decode_text(self, text: str) -> bytes:
        import base64

        from conformance.runtime.http_bridge import STRICT_BASE64

        text = text.strip()
        if not STRICT_BASE64.fullmatch(text):
            raise ValueError("not RFC 4648 base64")
        return base64.b64decode(text, validate=True)


class Base64JsonModeOnly(Mutant):
    """The bridge decodes base64 in pydantic's JSON mode only: a FastAPI server validates the
    parsed body in Python mode, where the text passes as its own UTF-8 bytes (R-HTTP-3)."""

    kind = "http"

    def validate_http_python(self, struct: str, body: Any) -> Any:
        from pydantic_core import core_schema

        from conformance.runtime import http_bridge

        def json_only(marker: Any, source_type: Any, handler: Any) -> Any:
            inner = handler(source_type)
            return core_schema.json_or_python_schema(
                json_schema=core_schema.no_info_before_validator_function(http_bridge._from_base64, inner),
                python_schema=inner)

        with patched(http_bridge.Base64Bytes, "__get_pydantic_core_schema__", json_only):
            return super().validate_http_python(struct, body)


# -- receive paths, memory ownership, the engine's own payloads -------------------------------
class _EngineReceivePaths(Mutant):
    """A bug planted in the engine's receive paths for the duration of each receive-path call."""

    def planted(self) -> contextlib.AbstractContextManager:
        raise NotImplementedError

    def receive_paths(self) -> Any:
        def during(path: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
            def run(obj: Any, transport: str) -> Any:
                with self.planted():
                    return path(obj, transport)
            return run
        return {name: during(path) for name, path in super().receive_paths().items()}


class SchedulerUnwrapsFirstSubRequestOnly(_EngineReceivePaths):
    """The scheduler's receive path unwraps only the first sub-request of a batched tokenized
    input; the others reach the scheduler still wrapped (R-PW-3)."""

    kind = "wrapper"

    def planted(self) -> contextlib.AbstractContextManager:
        from reference_impl.engine import ipc, scheduler

        def first_only(obj: Any, transport: str) -> Any:
            batch = getattr(obj, "batch", None)
            if not isinstance(batch, list) or len(batch) < 2:
                return ipc.unwrap_received(obj, transport)
            head = ipc.unwrap_received(msgspec.structs.replace(obj, batch=batch[:1]), transport)
            return msgspec.structs.replace(head, batch=[*head.batch, *batch[1:]])

        original = scheduler.choose_unwrap
        return patched(scheduler, "choose_unwrap", lambda process, debug_skip, default=ipc.unwrap_received:
                       original(process, debug_skip, first_only))


class TopLevelWrapperKeptClosed(_EngineReceivePaths):
    """The receiver's top-level decode does not open a top-level PickleWrapper (a handshake sent
    wrapped reaches the receiver still wrapped); wrapper fields are still opened (R-PW-2, R-PW-3)."""

    kind = "wrapper"

    def planted(self) -> contextlib.AbstractContextManager:
        original = self._codec.unwrap

        def fields_only(obj: Any, **options: Any) -> Any:
            return obj if type(obj) is self._module.PickleWrapper else original(obj, **options)
        return patched(self._codec, "unwrap", fields_only)

    def recv(self, sock: Any, transport: str) -> Any:
        with self.planted():
            return super().recv(sock, transport)

    def unwrap(self, obj: Any) -> Any:
        with self.planted():
            return super().unwrap(obj)


class NdarraysShareReceiveBuffer(Mutant):
    """A received ndarray is a view of the receive buffer (np.frombuffer without the copy):
    read-only when the buffer is, sharing its bytes when it is writable (R-TEN-5)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        from reference_impl import ext

        original = ext.restore_ndarray

        def view(metadata: Any, raw: Any) -> np.ndarray:
            arr = original(metadata, raw)
            return np.frombuffer(raw, dtype=arr.dtype).reshape(arr.shape) if arr.size else arr
        with patched(ext, "restore_ndarray", view):
            return super().decode(data, transport)


class TimeStatsDropsAField(Mutant):
    """The engine's time stats leave their trace carrier out when pickled into the wrapper (their
    pickling drops a field), so the receiver reads the default (R-PW-1)."""

    kind = "wrapper"

    def _dropping(self) -> contextlib.AbstractContextManager:
        from reference_impl.engine.tracing import ReqTimeStats

        return patched(ReqTimeStats, "__reduce__", lambda stats: (
            ReqTimeStats, (stats.rid, stats.stamps, {}, stats.external_trace_header)))

    def wrap(self, obj: Any) -> Any:
        with self._dropping():
            return super().wrap(obj)

    def encode(self, obj: Any, transport: str) -> bytes:
        with self._dropping():
            return super().encode(obj, transport)

    def send(self, sock: Any, obj: Any, transport: str, *, zero_copy: bool = False) -> None:
        with self._dropping():
            super().send(sock, obj, transport, zero_copy=zero_copy)

    def receive_paths(self) -> Any:
        def during(path: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
            def run(obj: Any, transport: str) -> Any:
                with self._dropping():
                    return path(obj, transport)
            return run
        return {name: during(path) for name, path in super().receive_paths().items()}


# -- engine-built payloads (R-PW-7) -------------------------------------------------------------
class MmDataOnInstance(Mutant):
    """The engine's multimodal item setter writes processor data (a name that is not a field)
    into the item's instance __dict__, which neither transport carries: after transit the image
    grid and the per-frame map are gone (R-PW-7)."""

    kind = "payload"

    def engine_payloads(self) -> Any:
        import dataclasses

        from reference_tools import engine_payloads as builders

        def on_instance(item: Any, name: str, value: Any) -> None:
            setattr(item, name, value)  # a struct with a __dict__ keeps any other name there

        def planted(build: Callable[[], Any]) -> Callable[[], Any]:
            def run() -> Any:
                with patched(builders, "processor_set", on_instance):
                    return build()
            return run
        return {name: dataclasses.replace(payload, build=planted(payload.build))
                for name, payload in super().engine_payloads().items()}


def _nested_maps_left_encoded(value: Any, in_map: bool = False) -> Any:
    """value with every tensor in a map nested in a map left in its wire form (extension 2)."""
    from reference_impl import ext

    if isinstance(value, msgspec.Struct):
        return msgspec.structs.replace(value, **{n: _nested_maps_left_encoded(getattr(value, n))
                                                 for n in value.__struct_fields__})
    if type(value) in (list, tuple):
        return type(value)(_nested_maps_left_encoded(v, in_map) for v in value)
    if type(value) is dict:
        return {k: ext.enc_hook(v) if in_map and isinstance(v, torch.Tensor) else _nested_maps_left_encoded(v, True)
                for k, v in value.items()}
    return value


class NestedMapsNotDecoded(Mutant):
    """The msgpack decoder stops recursing into maps nested in maps at Any positions: a tensor in
    a multimodal item's per-frame map arrives as its raw extension (R-PW-7)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        got = super().decode(data, transport)
        return _nested_maps_left_encoded(got) if transport == "msgpack" else got

    def recv(self, sock: Any, transport: str) -> Any:
        got = super().recv(sock, transport)
        return _nested_maps_left_encoded(got) if transport == "msgpack" else got


class _TracedEngine(Mutant):
    """A bug planted in the engine's tracing in every process of the traced chain (run_traced):
    ``trace_prelude`` runs in each before the engine's code."""

    kind = "trace"


class TraceCarrierFromCurrentContext(_TracedEngine):
    """The carrier a process puts in the time stats is the sending thread's current context, not
    the request's span (nothing is current: it is empty), so the next process starts a new trace
    (R-TRACE-4; SGLang's TraceReqContext.__getstate__ with propagate.inject(carrier))."""

    trace_prelude = """
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from reference_impl.engine import tracing as _tracing
def _carrier(span, fallback=None):
    if span is None:
        return dict(fallback or {})
    out = {}
    TraceContextTextMapPropagator().inject(out)  # the current context, not the span's
    return out
_tracing.Tracing.carrier = staticmethod(_carrier)
"""


class TraceCarrierDroppedOnReceive(_TracedEngine):
    """A receiving process opens its span without the carrier it received (a new trace), as
    SGLang's TraceReqContext.__setstate__ would if it dropped root_span_context (R-TRACE-4)."""

    trace_prelude = """
from reference_impl.engine import tracing as _tracing
_start_span = _tracing.Tracing.start_span
def _without_carrier(self, name, carrier, **attributes):
    return _start_span(self, name, None if self.process != "tokenizer_manager" else carrier, **attributes)
_tracing.Tracing.start_span = _without_carrier
"""


class TraceCarrierNotAdvanced(_TracedEngine):
    """A process that forwards a request opens its span but sends the carrier it received on,
    not its own span's: the next process's span skips it (R-TRACE-4, R-TRACE-1)."""

    trace_prelude = """
import contextlib
from reference_impl.engine import tracing as _tracing
@contextlib.contextmanager
def _step(self, name, stats, **attributes):
    span = self.start_span(name, stats.trace_carrier if stats else None, **attributes)
    try:
        yield span
    finally:
        if span is not None:
            span.end()  # stats.trace_carrier stays the received one
_tracing.Tracing.step = _step
"""


# -- decoders that check less than R-EXT-3 and R-TEN-1 ask ---------------------------------
class NdarrayDtypeChecksSkipped(Mutant):
    """Any dtype numpy can build is read from the raw bytes, padded or cut to fit: object,
    structured and sub-array dtypes and U arrays beyond U+10FFFF are not refused (R-EXT-3)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        from reference_impl import ext

        def unchecked(metadata: Any, raw: memoryview) -> np.ndarray:
            spec = metadata[1]
            if isinstance(spec, list):  # a record dtype as msgpack sends it: [[name, format], ...]
                spec = [tuple(item) for item in spec]
            shape, dtype = ext._checked_shape(metadata[0], "ndarray"), np.dtype(spec)
            if dtype.hasobject:  # no bytes can be read as objects: it hands on empty slots instead
                return np.zeros(shape, dtype=dtype)
            need = math.prod(shape) * dtype.itemsize
            return np.frombuffer(bytes(raw)[:need].ljust(need, b"\0"), dtype=dtype).reshape(shape).copy()
        with patched(ext, "restore_ndarray", unchecked):
            return super().decode(data, transport)


class LargeShapesDecodedEmpty(Mutant):
    """A tensor whose shape has more than 64 dimensions or overflows 64-bit sizes is handed on
    as an empty tensor instead of being refused by name (R-EXT-3)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        from reference_impl import ext
        from reference_impl.errors import WireError

        original = ext.restore_tensor

        def unbounded(metadata: Any, raw: Any) -> torch.Tensor:
            try:
                return original(metadata, raw)
            except WireError as exc:
                if "dimensions; at most" in str(exc) or "too large" in str(exc):
                    return torch.empty(0)
                raise
        with patched(ext, "restore_tensor", unbounded):
            return super().decode(data, transport)


_COMMON_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool",
                            "float8_e4m3fn", "float8_e5m2"})


class KnowsOnlyCommonDtypes(Mutant):
    """The decoder knows the dtypes an engine usually sends and refuses the rest of R-TEN-1's table."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        from reference_impl import ext
        from reference_impl.errors import WireError

        original = ext.torch_dtype

        def common(name: Any) -> torch.dtype:
            if name not in _COMMON_DTYPES:
                raise WireError("msgpack", f"tensor dtype {name!r} is not supported")
            return original(name)
        with patched(ext, "torch_dtype", common):
            return super().decode(data, transport)


class UnknownDtypesAsBytes(Mutant):
    """A tensor whose dtype name it does not know is kept as its raw bytes (a uint8 tensor)
    instead of failing the decode (R-TEN-1: refuse any other name)."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        from reference_impl import ext
        from reference_impl.errors import WireError

        original = ext.restore_tensor

        def lenient(metadata: Any, raw: Any) -> torch.Tensor:
            try:
                return original(metadata, raw)
            except WireError as exc:
                if "is not a torch dtype" not in str(exc):
                    raise
                return torch.frombuffer(bytearray(raw), dtype=torch.uint8) if len(raw) else torch.empty(0)
        with patched(ext, "restore_tensor", lenient):
            return super().decode(data, transport)


class QuantizedDtypesDecoded(Mutant):
    """Quantized dtype names are looked up on torch like any other (R-TEN-1: refuse them): the
    raw bytes then meet a dtype without a raw-byte form."""

    kind = "decoder"

    def decode(self, data: bytes, transport: str) -> Any:
        from reference_impl import ext

        original = ext.torch_dtype

        def any_torch_dtype(name: Any) -> torch.dtype:
            dtype = getattr(torch, name, None) if isinstance(name, str) else None
            return dtype if isinstance(dtype, torch.dtype) else original(name)
        with patched(ext, "torch_dtype", any_torch_dtype):
            return super().decode(data, transport)


class CollidingKeysWritten(Mutant):
    """Map keys that are one key to a peer are both written (R-VAL-6: refuse, or write one).

    The encoder's collision scan is off: an Enum member and its value go out as two equal keys."""

    def encode(self, obj: Any, transport: str) -> bytes:
        from reference_impl import _codec_keys

        with patched(_codec_keys, "find_collision", lambda value, path="": None):
            return super().encode(obj, transport)


# -- the engine's own pipeline (R-PIPE): its source edited in every process ---------------------
class _EnginePlant(Mutant):
    """The reference with one edit of its engine's source (reference_tools/proof/engine_mutants.py),
    planted in every process of its pipeline runs (Required.Pipeline.*); the codec checks run
    the unedited reference."""

    kind = "engine"
    plant = ""  #: a name of engine_mutants.MUTANTS

    def pipeline_env(self, workdir: Path) -> dict[str, str]:
        from reference_tools.proof.engine_mutants import MUTANTS, plant

        return plant(MUTANTS[self.plant], workdir)


class ControllerRoutesPickle(_EnginePlant):
    """One load-balance method (total_tokens) of the controller sends with a leftover send_pyobj:
    under msgpack its rank gets pickle bytes and drops them."""

    plant = "controller-total-tokens-send-pyobj"


class ReceiveSocketsCapped(_EnginePlant):
    """The engine's receiving sockets capped at 64 MiB (zmq MAXMSGSIZE): a larger message (a
    weight update) is dropped with its connection, silently."""

    plant = "receive-socket-64mib-cap"


class EverySendTwice(_EnginePlant):
    """The one-frame send lacks its return: every message of every process goes twice, the
    second time as zero-copy frames."""

    plant = "send-lacks-return"


class TransportSwitchTruthy(_EnginePlant):
    """SGLANG_USE_PICKLE_IPC read as a truthy string: '0' and 'false' select pickle, so msgpack
    can no longer be chosen that way."""

    plant = "switch-truthy-string"


class DetokenizerDropsCustomizedInfo(_EnginePlant):
    """The detokenizer builds its output without the customized info it received."""

    plant = "detokenizer-drops-customized-info"


class DetokenizerDropsHiddenStates(_EnginePlant):
    """The detokenizer builds its output without the hidden states it received."""

    plant = "detokenizer-drops-hidden-states"


class OutputCustomizedInfoUnwrapped(_EnginePlant):
    """The sender's wrap step wraps time stats only: the scheduler's output goes out with its
    customized info unwrapped under msgpack, and the detokenizer refuses those batches."""

    plant = "output-customized-info-unwrapped"


class NoBug(_WireNodes):
    """Control, not a mutant: every message goes through the untyped read and the writer
    unchanged, so a caught mutant is caught for its bug, not for the rewriting."""


#: Every mutant, in report order (the control NoBug is not one).
MUTANTS: tuple[type[Mutant], ...] = tuple(
    cls for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, Mutant) and not cls.__name__.startswith("_")
    and cls not in (Mutant, NoBug)
)
