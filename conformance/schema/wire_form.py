"""The byte form of a msgpack message, as a tree that keeps what the spec's byte rules fix.

msgspec (like most msgpack libraries) decodes float 32 and float 64 alike and an integral
float written as an int into an int, so a decoded value cannot show whether an encoder broke
R-VAL-2. ``parse`` keeps the form of every item instead: the float width, int vs float, every
array element and map entry in wire order, extension codes and, for the buffer extensions
(codes 1-3), their metadata and raw bytes apart. ``form_differences`` compares two trees the
way SPEC R-VEC-3 does: only the width of integer and length headers may differ.
``write`` is the inverse of ``parse`` (shortest headers), for tools that rewrite bytes on purpose;
``write_value`` writes a plain value, with ``Float32``, ``WideInt`` and ``MapPairs`` choosing the
forms a careless encoder in another language uses (the acceptance checks and the mutants).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import msgspec

from conformance.schema.manifest import Manifest, T
from conformance.schema.manifest import parse as parse_type
from conformance.schema.msgpack_headers import FALSE, FORMATS, NIL, TRUE, HeaderError, fixext_marker, markers, read_head

__all__ = ["Item", "FormError", "parse", "write", "form_differences", "unordered_paths", "rewrite", "fits_float32",
           "Float32", "WideInt", "MapPairs", "from_value", "write_value", "read_value", "rewrite_value"]

Step = Union[int, str]
Path = tuple[Step, ...]

#: extension codes whose payload is the buffer layout of SPEC R-EXT-1
BUFFER_CODES = (1, 2, 3)


class FormError(ValueError):
    """The bytes are not one well-formed msgpack object."""


@dataclass(frozen=True)
class Item:
    """One msgpack item. kind: nil, bool, int, float32, float64, str, bin, array, map, ext.
    value: the scalar (str kept as its raw UTF-8 bytes); items: array elements, or map
    entries flattened as key, value, key, value...; code: the extension code."""

    kind: str
    value: Any = None
    items: tuple["Item", ...] = ()
    code: int = 0
    wide: bool = False  # write an int in its 64-bit form (parse never sets it: widths are free)

    def describe(self) -> str:
        if self.kind in ("array", "map"):
            count = len(self.items) // (2 if self.kind == "map" else 1)
            return f"{self.kind} of {count}"
        if self.kind == "str":
            return f"str {self.value.decode('utf-8', 'replace')!r:.40}"
        if self.kind in ("float32", "float64"):
            return f"{self.kind.replace('float', 'float ')} {self.value!r}"
        if self.kind == "ext":
            return f"ext {self.code} ({len(self.value)} bytes)"
        if self.kind == "bin":
            return f"bin ({len(self.value)} bytes)"
        return f"{self.kind} {self.value!r}" if self.kind != "nil" else "nil"


# -- parse ------------------------------------------------------------------------------
def parse(data: Union[bytes, bytearray, memoryview]) -> Item:
    """The form of one msgpack object; FormError when it is cut short or bytes follow it."""
    data = bytes(data)
    item, end = _item(data, 0)
    if end != len(data):
        raise FormError(f"{len(data) - end} bytes follow the message (at offset {end})")
    return item


def _bytes(data: bytes, pos: int, size: int) -> tuple[bytes, int]:
    if pos + size > len(data):
        raise FormError(f"cut short at offset {pos}: {size} bytes announced, {len(data) - pos} left")
    return data[pos:pos + size], pos + size


def _item(data: bytes, pos: int) -> tuple[Item, int]:
    try:
        head = read_head(data, pos)
    except HeaderError as exc:
        raise FormError(str(exc)) from None
    b, kind, body = data[pos], head.kind, pos + head.size
    if kind in ("array", "map"):
        return _container(data, body, kind, head.length)
    if kind == "nil":
        return Item("nil"), body
    if kind == "bool":
        return Item("bool", b == TRUE), body
    if kind == "int" and head.length == 0:  # a fixint: the first byte is the value
        return Item("int", b if b <= 0x7F else b - 0x100), body
    raw, end = _bytes(data, body, head.length)
    if kind == "ext":
        return Item("ext", raw, code=struct.unpack_from(">b", data, body - 1)[0]), end
    if kind in ("str", "bin"):
        return Item(kind, raw), end
    return Item(kind, struct.unpack(FORMATS[b][1], raw)[0]), end  # int, float32, float64


def _container(data: bytes, pos: int, kind: str, count: int) -> tuple[Item, int]:
    items = []
    for _ in range(count * (2 if kind == "map" else 1)):
        item, pos = _item(data, pos)
        items.append(item)
    return Item(kind, items=tuple(items)), pos


# -- write ------------------------------------------------------------------------------
def write(item: Item) -> bytes:
    """The bytes of an item tree, every header in its shortest form."""
    out = bytearray()
    _write(item, out)
    return bytes(out)


def _header(out: bytearray, size: int, fix: Optional[int], fix_max: int, kind: str) -> None:
    if fix is not None and size <= fix_max:
        out.append(fix | size)
        return
    for marker in markers(kind):
        fmt = FORMATS[marker][1]
        if size < 1 << (8 * struct.calcsize(fmt)):
            out.append(marker)
            out += struct.pack(fmt, size)
            return
    raise FormError(f"length {size} does not fit msgpack")


def _number(out: bytearray, kind: str, value: Any) -> None:
    """A float in the one form of its kind (float32, float64)."""
    (marker,) = markers(kind)
    out.append(marker)
    out += struct.pack(FORMATS[marker][1], value)


def _write(item: Item, out: bytearray) -> None:
    k, v = item.kind, item.value
    if k == "nil":
        out.append(NIL)
    elif k == "bool":
        out.append(TRUE if v else FALSE)
    elif k == "int":
        if not item.wide and (0 <= v <= 0x7F or -32 <= v < 0):
            out += struct.pack(">b" if v < 0 else ">B", v)
            return
        # the narrowest form that holds v (wide: the 64-bit one, as a careless encoder writes it)
        forms = markers("int", signed=v < 0)[-1:] if item.wide else markers("int", signed=v < 0)
        for marker in forms:
            bits = 8 * struct.calcsize(FORMATS[marker][1])
            if (v < 1 << bits) if v >= 0 else (v >= -(1 << (bits - 1))):
                out.append(marker)
                out += struct.pack(FORMATS[marker][1], v)
                return
        raise FormError(f"int {v} does not fit msgpack")
    elif k in ("float32", "float64"):
        _number(out, k, v)
    elif k == "str":
        _header(out, len(v), 0xA0, 31, "str")
        out += v
    elif k == "bin":
        _header(out, len(v), None, 0, "bin")
        out += v
    elif k in ("array", "map"):
        count = len(item.items) // (2 if k == "map" else 1)
        _header(out, count, 0x90 if k == "array" else 0x80, 15, k)
        for child in item.items:
            _write(child, out)
    elif k == "ext":
        fix = fixext_marker(len(v))
        if fix is not None:
            out.append(fix)
        else:
            _header(out, len(v), None, 0, "ext")
        out += struct.pack(">b", item.code)
        out += v
    else:
        raise FormError(f"unknown item kind {k!r}")


# -- where order does not matter ----------------------------------------------------------
def unordered_paths(manifest: Manifest, struct_name: str, item: Item) -> set[Path]:
    """Paths of the arrays in ``item`` (a message of ``struct_name``) that hold a Set or
    FrozenSet: their elements may come in any order (SPEC §3)."""
    out: set[Path] = set()
    _typed(manifest, parse_type(struct_name), item, (), out)
    return out


def _typed(manifest: Manifest, t: T, item: Item, path: Path, out: set[Path]) -> None:
    k = t.kind
    if k == "Union":
        for arm in t.args:
            if arm.kind != "None":
                _typed(manifest, arm, item, path, out)
        return
    if item.kind == "array" and k in ("Set", "FrozenSet"):
        out.add(path)
    if k == "Ref" and t.name in manifest.structs:
        spec = manifest.structs[t.name]
        if spec.array_like and item.kind == "array":
            skip = 1 if spec.tag else 0
            for i, (f, child) in enumerate(zip(spec.fields, item.items[skip:])):
                _typed(manifest, f.type_expr, child, path + (i + skip,), out)
        elif not spec.array_like and item.kind == "map":
            by_name = {(f.encode_name or f.name): f for f in spec.fields}
            for key, child in zip(item.items[::2], item.items[1::2]):
                name = key.value.decode("utf-8", "replace") if key.kind == "str" else None
                if name in by_name:
                    _typed(manifest, by_name[name].type_expr, child, path + (name,), out)
        return
    if item.kind == "array" and t.args:
        fixed = k == "Tuple"
        for i, child in enumerate(item.items):
            arg = t.args[i] if fixed and i < len(t.args) else t.args[0]
            _typed(manifest, arg, child, path + (i,), out)
    elif item.kind == "map" and k == "Dict" and len(t.args) == 2:
        for i, child in enumerate(item.items[1::2]):
            _typed(manifest, t.args[1], child, path + (_key(item.items[2 * i]),), out)


def _key(item: Item) -> str:
    return item.value.decode("utf-8", "replace") if item.kind == "str" else item.describe()


# -- compare ------------------------------------------------------------------------------
def form_differences(got: Item, want: Item, unordered: frozenset[Path] | set[Path] = frozenset()) -> list[str]:
    """Every place where ``got`` breaks the form of ``want``, as 'path: what (rule)' lines.
    Header widths never show in an Item, so they never differ; arrays at ``unordered``
    paths (sets) may hold their elements in any order."""
    out: list[str] = []
    _compare(got, want, (), set(unordered), out)
    return out


def _render(path: Path) -> str:
    return "$" + "".join(f"[{s!r}]" if isinstance(s, str) else f"[{s}]" for s in path)


def _float_bits(item: Item) -> bytes:
    return struct.pack(">d", item.value)


def _compare(got: Item, want: Item, path: Path, unordered: set[Path], out: list[str]) -> None:
    where = _render(path)
    if got.kind != want.kind:
        out.append(f"{where}: {got.describe()} where the vector has {want.describe()} ({_rule(got, want)})")
        return
    k = got.kind
    if k in ("array", "map"):
        if len(got.items) != len(want.items):
            tagged = k == "array" and want.items and want.items[0].kind == "str" and path == ()
            rule = "SPEC R-MSG-2: every field is encoded, none dropped or added" if tagged else "a value changed"
            out.append(f"{where}: {got.describe()} where the vector has {want.describe()} ({rule})")
            return
        if path in unordered and sorted(map(write, got.items)) == sorted(map(write, want.items)):
            return
        step = 2 if k == "map" else 1
        for i in range(0, len(got.items), step):
            if k == "map":
                key = _key(want.items[i])
                if write(got.items[i]) != write(want.items[i]):
                    out.append(f"{where}: map key {got.items[i].describe()} where the vector has "
                               f"{want.items[i].describe()} (keys in field or insertion order)")
                    continue
                _compare(got.items[i + 1], want.items[i + 1], path + (key,), unordered, out)
            else:
                _compare(got.items[i], want.items[i], path + (i,), unordered, out)
        return
    if k == "ext":
        if got.code != want.code:
            out.append(f"{where}: extension code {got.code} where the vector has {want.code} (SPEC §4 registry)")
        elif got.code in BUFFER_CODES:
            _compare_buffer(got.value, want.value, path, out)
        elif got.value != want.value:
            out.append(f"{where}: extension {got.code} payload differs (SPEC R-EXT-4: forwarded unchanged)")
        return
    if k in ("float32", "float64"):
        if _float_bits(got) != _float_bits(want):
            out.append(f"{where}: {got.describe()} where the vector has {want.describe()} (a value changed)")
        return
    if got.value != want.value:
        out.append(f"{where}: {got.describe()} where the vector has {want.describe()} (a value changed)")


def _rule(got: Item, want: Item) -> str:
    kinds = {got.kind, want.kind}
    if kinds == {"float32", "float64"}:
        return "SPEC R-VAL-2: floats are written as float 64"
    if kinds == {"int", "float64"}:
        return "SPEC R-VAL-2: a float is written as float 64, never as an int"
    if kinds == {"str", "bin"}:  # the rule of the field's type: the vector's side says which
        return "SPEC §3: bytes are bin, never str" if want.kind == "bin" else "SPEC §3: a str is str, never bin"
    if "int" in kinds and "str" in kinds:
        return "SPEC R-VAL-4: an enum travels as its value" if want.kind == "int" else "a value changed"
    return "a value changed"


def _compare_buffer(got: bytes, want: bytes, path: Path, out: list[str]) -> None:
    where = _render(path)
    try:
        got_meta, got_raw = _split_buffer(got)
    except FormError as exc:
        out.append(f"{where}: extension payload is not the buffer layout: {exc} (SPEC R-EXT-1)")
        return
    want_meta, want_raw = _split_buffer(want)
    before = len(out)
    _compare(got_meta, want_meta, path + ("<metadata>",), set(), out)
    if len(out) == before and got_raw != want_raw:
        first = next((i for i, (a, b) in enumerate(zip(got_raw, want_raw)) if a != b), min(len(got_raw), len(want_raw)))
        out.append(f"{where}: raw element bytes differ from byte {first} ({len(got_raw)} vs {len(want_raw)} bytes; "
                   "SPEC R-EXT-2: C order, little-endian, no padding)")


def _split_buffer(payload: bytes) -> tuple[Item, bytes]:
    if len(payload) < 4:
        raise FormError(f"{len(payload)} bytes, shorter than the 4-byte metadata length")
    (size,) = struct.unpack_from(">I", payload)
    if 4 + size > len(payload):
        raise FormError(f"metadata length {size} runs past the {len(payload)}-byte payload")
    item, end = _item(payload, 4)
    if end != 4 + size:
        raise FormError(f"metadata length {size} but the metadata object takes {end - 4} bytes")
    return item, payload[4 + size:]


# -- values written in chosen forms -------------------------------------------------------
class Float32(float):
    """A float written as float 32 (0xca), the form a careless encoder uses where it fits."""


class WideInt(int):
    """An int written in its 64-bit form (0xcf unsigned, 0xd3 signed) whatever its size."""


class MapPairs(list[tuple[Any, Any]]):
    """A map given as (key, value) pairs: duplicate keys are written as they are."""


def from_value(value: Any) -> Item:
    """The item tree of a plain value (msgspec's untyped decode gives such values); Float32,
    WideInt and MapPairs choose forms the reference encoder never writes."""
    if value is None:
        return Item("nil")
    if value is True or value is False:
        return Item("bool", value)
    if isinstance(value, int):
        return Item("int", int(value), wide=isinstance(value, WideInt))
    if isinstance(value, float):
        return Item("float32" if isinstance(value, Float32) else "float64", float(value))
    if isinstance(value, str):
        return Item("str", value.encode("utf-8", "surrogatepass"))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Item("bin", bytes(value))
    if isinstance(value, MapPairs):
        return Item("map", items=tuple(from_value(x) for pair in value for x in pair))
    if isinstance(value, (list, tuple)):
        return Item("array", items=tuple(from_value(x) for x in value))
    if isinstance(value, dict):
        return Item("map", items=tuple(from_value(x) for pair in value.items() for x in pair))
    if isinstance(value, msgspec.msgpack.Ext):
        return Item("ext", bytes(value.data), code=value.code)
    raise TypeError(f"no msgpack form for {type(value).__name__}")


def write_value(value: Any) -> bytes:
    """The bytes of a plain value (shortest headers unless a WideInt asks otherwise)."""
    return write(from_value(value))


def read_value(data: bytes) -> Any:
    """Untyped decode: arrays are lists, maps dicts, extensions ``msgspec.msgpack.Ext``."""
    return msgspec.msgpack.decode(data)


def rewrite_value(value: Any, change: Callable[[Any], Any]) -> Any:
    """``change`` applied to every node of a plain value, children first (map keys included)."""
    if isinstance(value, list):
        value = [rewrite_value(v, change) for v in value]
    elif isinstance(value, dict):
        value = {rewrite_value(k, change): rewrite_value(v, change) for k, v in value.items()}
    return change(value)


def rewrite(item: Item, change: Callable[[Item], Item]) -> Item:
    """A copy of the tree with ``change`` applied to every item, children first (for tools
    that break the byte rules on purpose)."""
    if item.items:
        item = Item(item.kind, item.value, tuple(rewrite(child, change) for child in item.items), item.code)
    return change(item)


def fits_float32(value: float) -> bool:
    """True when a float 64 survives a trip through float 32 bit for bit (NaN payloads never do)."""
    try:
        narrowed = struct.unpack(">f", struct.pack(">f", value))[0]
    except OverflowError:
        return False
    return struct.pack(">d", narrowed) == struct.pack(">d", value)
