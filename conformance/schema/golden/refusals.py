"""Refusal vectors: wire inputs every implementation MUST refuse (spec/SPEC.md §13.2).

    golden/<manifest id>/refusals.json

One family per decoding MUST of the spec: a wrong msgpack type per field type kind, a
missing required field, an unknown or non-str tag, trailing bytes, truncation at every
structural boundary of a real vector, invalid UTF-8, values outside an enum or a Literal,
bad extension payloads (§4, §5); and the encode-side MUSTs (ints beyond 64 bits, lone
surrogates, quantized tensors) as JSON views to encode. Every case is derived
deterministically from the manifest and its golden vectors (the `typical` variant, raw
msgpack edited element by element), so `ipc-conformance golden update` rewrites the file
and `golden check` fails when it is stale. Representative fields per type kind keep the
corpus reviewable, not every field of every struct.
"""

from __future__ import annotations

import base64
import json
import struct as _struct
from typing import Annotated, Any, Callable, Iterator, Literal, Optional, Union

import msgspec
from msgspec import UNSET, UnsetType

from conformance.errors import invalid_member
from conformance.schema.golden import view as jview
from conformance.schema.manifest import Manifest
from conformance.schema.manifest.model import StructSpec
from conformance.schema.manifest.typeexpr import T
from conformance.schema.msgpack_headers import read_head

__all__ = ["FILE", "FORMAT", "Corpus", "Refusal", "build", "corpus_text", "load"]

FILE = "refusals.json"
FORMAT: Literal[1] = 1
TRANSPORT: Literal["msgpack"] = "msgpack"
#: result names of the testee protocol (spec/testee.md) a refusal must answer with
CATEGORY: dict[str, Literal["parse_error", "serialize_error"]] = {"decode": "parse_error", "encode": "serialize_error"}
PER_KIND = 2  # (struct, field) pairs per field type kind
MISSING_REQUIRED = 10  # structs with a too-short array
TRUNCATIONS = 40  # prefixes per truncated vector


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """One input that MUST be refused: `payload` (decode) is the msgpack bytes, hex in the file;
    `view` (encode) is the JSON view (§13.3) of a value whose encoding MUST fail."""

    id: str  # <Struct or family subject>.<Case>: unique in the file, the check id's tail
    family: str
    struct: Optional[str]
    field: Optional[str]
    requirement: str  # the SPEC requirement id the case proves, e.g. R-MSG-5
    kind: Literal["decode", "encode"]
    transport: Literal["msgpack"] = TRANSPORT
    category: Literal["parse_error", "serialize_error"]  # the testee protocol's result it must answer with
    payload_hex: Union[Annotated[str, msgspec.Meta(pattern="^([0-9a-f]{2})*$")], UnsetType] = msgspec.field(
        default=UNSET, name="payload")  # decode: the bytes to decode, hex
    view: Any = UNSET  # encode: the JSON view of the value to encode
    why: str

    def __post_init__(self) -> None:
        if self.category != CATEGORY[self.kind]:
            raise ValueError(f"{self.id}: a {self.kind} case is refused with {CATEGORY[self.kind]}")
        if (self.payload_hex is UNSET) != (self.kind == "encode") or (self.view is UNSET) != (self.kind == "decode"):
            raise ValueError(f"{self.id}: a decode case has a payload, an encode case a view")

    @property
    def payload(self) -> Optional[bytes]:
        return None if isinstance(self.payload_hex, UnsetType) else bytes.fromhex(self.payload_hex)


class Corpus(msgspec.Struct, kw_only=True):
    """golden/<manifest id>/refusals.json."""

    format: Literal[1]
    manifest: str
    manifest_sha256: str  # of the manifest file the cases were derived from
    generated_by: str
    cases: list[Refusal]


# -- raw msgpack: decode keeping extensions, encode back, raw str bytes ---------------
def _raw(data: bytes) -> Any:
    return msgspec.msgpack.decode(data, ext_hook=lambda code, payload: msgspec.msgpack.Ext(code, bytes(payload)))


def _pack(value: Any) -> bytes:
    return msgspec.msgpack.encode(value)


def _str_with(utf8: bytes) -> msgspec.Raw:
    """A msgpack str whose bytes are `utf8` as given (valid or not)."""
    n = len(utf8)
    head = bytes([0xA0 | n]) if n < 32 else bytes([0xD9, n])
    return msgspec.Raw(head + utf8)


def _buffer(code: int, meta: bytes, raw: bytes, *, meta_len: Optional[int] = None) -> msgspec.msgpack.Ext:
    """A buffer extension (§4 R-EXT-1) with any metadata bytes and declared length."""
    size = len(meta) if meta_len is None else meta_len
    return msgspec.msgpack.Ext(code, _struct.pack(">I", size) + meta + raw)


# -- what msgpack kinds a manifest type accepts (§3) ----------------------------------
KINDS = ("nil", "bool", "int", "float", "str", "bin", "array", "map", "ext")
#: wrong values to try, in order: the first one the field's type does not accept is used
WRONG: tuple[tuple[str, Any], ...] = (("str", "wrong"), ("int", 7), ("bin", b"\x01"), ("map", {}), ("bool", True),
                                     ("array", []))


def _accepts(t: T, manifest: Manifest) -> set[str]:
    k = t.kind
    if k == "Any":
        return set(KINDS)
    if k in ("None", "bool", "int", "str"):
        return {"None": {"nil"}, "bool": {"bool"}, "int": {"int"}, "str": {"str"}}[k]
    if k == "float":
        return {"float", "int"}
    if k == "bytes":
        return {"bin"}
    if k in ("List", "Set", "FrozenSet", "Tuple", "VarTuple"):
        return {"array"}
    if k == "Dict":
        return {"map"}
    if k in ("Tensor", "NDArray", "Array"):
        return {"ext"}
    if k == "Union":
        return set().union(*(_accepts(a, manifest) for a in t.args))
    if k == "Literal":
        return {_kind_of(v) for v in t.values}
    if k == "Ref":
        if t.name in manifest.enums:
            return {_kind_of(v) for v in manifest.enums[t.name].members.values()}
        spec = manifest.structs.get(t.name or "")
        return {"array"} if spec is None or spec.array_like else {"map"}
    return set(KINDS)  # unknown: never claim a refusal


def _kind_of(value: Any) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    return {int: "int", float: "float", str: "str", bytes: "bin"}.get(type(value), "map")


def _wrong_for(t: T, manifest: Manifest) -> Optional[tuple[str, Any]]:
    ok = _accepts(t, manifest)
    return next(((kind, value) for kind, value in WRONG if kind not in ok), None)


def _strip_optional(t: T) -> T:
    if t.kind == "Union":
        rest = [a for a in t.args if a.kind != "None"]
        if len(rest) == 1:
            return rest[0]
    return t


def _type_label(t: T, manifest: Manifest) -> str:
    """The field's type kind, Optional stripped: what representatives are chosen by."""
    t = _strip_optional(t)
    if t.kind == "Ref":
        if t.name in manifest.enums:
            return "enum"
        if t.name == "PickleWrapper":
            return "PickleWrapper"
        spec = manifest.structs.get(t.name or "")
        return "struct" if spec is None or spec.array_like else "map-struct"
    return t.kind


def _required(spec: StructSpec) -> list[int]:
    return [i for i, f in enumerate(spec.fields) if f.default.kind == "required"]


# -- the builder -------------------------------------------------------------------------
class _Builder:
    def __init__(self, manifest: Manifest, vector: Callable[[str], bytes]) -> None:
        self.manifest = manifest
        self._vector = vector
        self.out: list[Refusal] = []
        self.messages = sorted(s.name for s in manifest.messages if s.array_like and s.tag)

    def typical(self, struct: str) -> list[Any]:
        raw = _raw(self._vector(struct))
        assert isinstance(raw, list) and raw and raw[0] == struct, f"{struct}: not a tagged array"
        return raw

    def add(self, id: str, family: str, requirement: str, why: str, *, struct: Optional[str] = None,
            field: Optional[str] = None, payload: Optional[bytes] = None, view: Any = None) -> None:
        kind: Literal["decode", "encode"] = "decode" if view is None else "encode"
        self.out.append(Refusal(id=id, family=family, struct=struct, field=field, requirement=requirement, kind=kind,
                                category=CATEGORY[kind], why=why,
                                payload_hex=(payload or b"").hex() if kind == "decode" else UNSET,
                                view=view if kind == "encode" else UNSET))

    def replaced(self, struct: str, index: int, value: Any) -> bytes:
        raw = self.typical(struct)
        raw[index + 1] = value
        return _pack(raw)

    def fields(self) -> Iterator[tuple[StructSpec, int, Any]]:
        for name in self.messages:
            spec = self.manifest.structs[name]
            for i, f in enumerate(spec.fields):
                yield spec, i, f

    def slot(self, *labels: str) -> Optional[tuple[str, int, bool]]:
        """(struct, field index, in a list) of the first message field typed one of `labels`
        or a List of it (Optional stripped at both levels)."""
        for spec, i, f in self.fields():
            t = _strip_optional(f.type_expr)
            if t.kind in labels:
                return spec.name, i, False
            if t.kind == "List" and _strip_optional(t.args[0]).kind in labels:
                return spec.name, i, True
        return None

    # families ---------------------------------------------------------------------
    def wrong_types(self) -> None:
        seen: dict[str, int] = {}
        used: set[str] = set()
        for spec, i, f in self.fields():
            label = _type_label(f.type_expr, self.manifest)
            if seen.get(label, 0) >= PER_KIND or (spec.name in used and seen.get(label, 0)):
                continue
            wrong = _wrong_for(f.type_expr, self.manifest)
            if wrong is None:
                continue
            seen[label] = seen.get(label, 0) + 1
            used.add(spec.name)
            kind, value = wrong
            self.add(f"{spec.name}.WrongType.{f.name}", "wrong-type", "R-MSG-5",
                     f"{f.name} is {f.type}; a msgpack {kind} is not one of its encodings",
                     struct=spec.name, field=f.name, payload=self.replaced(spec.name, i, value))

    def wrong_elements(self) -> None:
        """A wrong type one level down: a list item, a map key or value, a nested struct field."""
        done: set[str] = set()
        for spec, i, f in self.fields():
            t = _strip_optional(f.type_expr)
            label = _type_label(t, self.manifest)
            raw = self.typical(spec.name)
            value = raw[i + 1]
            case: Optional[tuple[str, Any, str]] = None
            if label == "List" and label not in done and isinstance(value, list) and value:
                wrong = _wrong_for(t.args[0], self.manifest)
                if wrong:
                    case = ("WrongItemType", [wrong[1]] + value[1:], f"{f.name}[0]")
            elif label == "Dict" and isinstance(value, dict) and value:
                key, val = next(iter(value.items()))
                wrong_key = _wrong_for(t.args[0], self.manifest)
                wrong_val = _wrong_for(t.args[1], self.manifest)
                if "Dict-key" not in done and wrong_key and _hashable(wrong_key[1]):
                    label, case = "Dict-key", ("WrongKeyType", {wrong_key[1]: val}, f"{f.name}{{key}}")
                elif "Dict-value" not in done and wrong_val:
                    label, case = "Dict-value", ("WrongValueType", {key: wrong_val[1]}, f"{f.name}[{key!r}]")
            elif label in ("struct", "map-struct") and label not in done:
                nested = self.manifest.structs[t.name or ""]
                for j, nf in enumerate(nested.fields):
                    wrong = _wrong_for(nf.type_expr, self.manifest)
                    if wrong is None:
                        continue
                    edited: Any
                    if isinstance(value, list) and j < len(value):
                        edited = list(value)
                        edited[j] = wrong[1]
                    elif isinstance(value, dict) and (nf.encode_name or nf.name) in value:
                        edited = {**value, (nf.encode_name or nf.name): wrong[1]}
                    else:
                        continue
                    case = ("WrongNestedType", edited, f"{f.name}.{nf.name}")
                    break
            if case is None:
                continue
            done.add(label)
            name, edited, where = case
            self.add(f"{spec.name}.{name}.{f.name}", "wrong-type", "R-MSG-5",
                     f"{where} of {f.type} holds a value of another msgpack type", struct=spec.name,
                     field=where, payload=self.replaced(spec.name, i, edited))

    def named_confusions(self) -> None:
        """The confusions a lax decoder makes silently: str for bytes and back, a float
        that is integral for an int, an int for a bool."""
        pairs = (("bytes", "StrForBytes", "wrong", "a msgpack str where bin is required (bytes are never str)"),
                 ("str", "BytesForStr", b"text", "a msgpack bin where str is required"),
                 ("int", "FloatForInt", 1.0, "an integral float 1.0 where an int is required (no conversion)"),
                 ("bool", "IntForBool", 1, "the int 1 where a bool is required"))
        for label, name, value, why in pairs:
            for spec, i, f in self.fields():
                if f.type_expr.kind == label or _strip_optional(f.type_expr).kind == label:
                    self.add(f"{spec.name}.{name}.{f.name}", "wrong-type", "R-MSG-5", f"{f.name} is {f.type}: {why}",
                             struct=spec.name, field=f.name, payload=self.replaced(spec.name, i, value))
                    break

    def enums_and_literals(self) -> None:
        enums_done: set[str] = set()
        literals = 0
        for spec, i, f in self.fields():
            t = _strip_optional(f.type_expr)
            if t.kind == "Ref" and t.name in self.manifest.enums and t.name not in enums_done and len(enums_done) < 3:
                enums_done.add(t.name)
                members = self.manifest.enums[t.name].members
                values = list(members.values())
                if all(type(v) is int for v in values):
                    outside: Any = max(int(v) for v in values) + 100
                    name = next(iter(members))
                    self.add(f"{spec.name}.EnumName.{f.name}", "enum-value", "R-VAL-4",
                             f"{f.name} is enum {t.name}: the wire carries member values, never the name {name!r}",
                             struct=spec.name, field=f.name, payload=self.replaced(spec.name, i, name))
                else:
                    outside = "not-a-member"
                self.add(f"{spec.name}.EnumValue.{f.name}", "enum-value", "R-VAL-4",
                         f"{f.name} is enum {t.name}: {outside!r} is not a member's value",
                         struct=spec.name, field=f.name, payload=self.replaced(spec.name, i, outside))
            literal = next((a for a in ([t] if t.kind == "Literal" else t.args if t.kind == "Union" else [])
                            if a.kind == "Literal"), None)
            if literal is not None and literals < 3:
                strs = [v for v in literal.values if isinstance(v, str)]
                ints = [v for v in literal.values if type(v) is int]
                outside = "not-in-literal" if strs else (max(ints) + 1 if ints else None)
                if outside is None:
                    continue
                literals += 1
                self.add(f"{spec.name}.LiteralValue.{f.name}", "literal-value", "R-MSG-5",
                         f"{f.name} is {f.type}: {outside!r} is outside the literal",
                         struct=spec.name, field=f.name, payload=self.replaced(spec.name, i, outside))

    def int_keys(self) -> None:
        """A float or a bool key in a Dict[int, V] (at any list depth, in any union arm): a type
        error, never coerced to the int it equals to a Python peer (R-VAL-6)."""
        for spec, i, f in self.fields():
            found = _int_keyed(f.type_expr, "")
            if found is None:
                continue
            build, where = found
            for name, key in (("FloatKeyForInt", 1.0), ("BoolKeyForInt", True)):
                self.add(f"{spec.name}.{name}.{f.name}", "wrong-type", "R-VAL-6",
                         f"{f.name}{where} is a Dict with int keys; the key {key!r} is a type error, not the int 1",
                         struct=spec.name, field=f"{f.name}{where}", payload=self.replaced(spec.name, i, build(key)))
            return  # one field carries the family

    def missing_required(self) -> None:
        count = 0
        for name in self.messages:
            spec = self.manifest.structs[name]
            required = _required(spec)
            if not required or count >= MISSING_REQUIRED:
                continue
            count += 1
            last = required[-1]
            raw = self.typical(name)[: last + 1]
            self.add(f"{name}.MissingRequired.{spec.fields[last].name}", "missing-required", "R-MSG-5",
                     f"the array stops before {spec.fields[last].name}, which has no default",
                     struct=name, field=spec.fields[last].name, payload=_pack(raw))
        for spec in sorted(self.manifest.structs.values(), key=lambda s: s.name):
            if spec.array_like or spec.role == "message" or not _required(spec):
                continue
            host = self._host_of(spec.name)
            if host is None:
                continue
            struct, i, value = host
            missing = spec.fields[_required(spec)[0]]
            key = missing.encode_name or missing.name
            if not isinstance(value, dict) or key not in value:
                continue
            edited = {k: v for k, v in value.items() if k != key}
            self.add(f"{struct}.MissingRequired.{self.manifest.structs[struct].fields[i].name}.{missing.name}",
                     "missing-required", "R-MSG-4",
                     f"the map of nested struct {spec.name} has no key {key!r}, which has no default",
                     struct=struct, field=f"{self.manifest.structs[struct].fields[i].name}.{missing.name}",
                     payload=self.replaced(struct, i, edited))

    def tuple_lengths(self) -> None:
        """A fixed-size tuple (`Tuple[A, B]`) one element short and one element long, at the
        first message field that reaches one (directly, in a list, or in a nested struct)."""
        for spec, i, f in self.fields():
            raw = self.typical(spec.name)
            found = self._with_tuple(f.type_expr, raw[i + 1], f.name)
            if found is None:
                continue
            for name, change, why in (("TupleTooShort", lambda items: items[:-1], "one element short"),
                                      ("TupleTooLong", lambda items: [*items, items[-1]], "one element long")):
                changed = self._with_tuple(f.type_expr, raw[i + 1], f.name, change)
                assert changed is not None  # found without the change: found with it
                edited, where, tuple_type = changed
                self.add(f"{spec.name}.{name}.{f.name}", "tuple-length", "R-MSG-11",
                         f"{_render(tuple_type)} holds exactly {len(tuple_type.args)} elements; this array is {why}",
                         struct=spec.name, field=where, payload=self.replaced(spec.name, i, edited))
            return

    def _with_tuple(self, t: T, raw: Any, where: str, change: Callable[[list[Any]], list[Any]] = lambda items: items,
                    ) -> Optional[tuple[Any, str, T]]:
        """(raw with the first fixed tuple reachable in t set to `change` of a valid tuple, the
        tuple's field path, its type), or None when no fixed tuple is reachable through raw."""
        t = _strip_optional(t)
        if t.kind == "Tuple" and t.args:
            items = [_SAMPLE.get(a.kind) for a in t.args]
            if any(item is None for item in items):
                return None
            return change(items), where, t
        if t.kind == "List":
            items = raw if isinstance(raw, list) else []
            inner = self._with_tuple(t.args[0], items[0] if items else None, f"{where}[0]", change)
            return None if inner is None else ([inner[0], *items[1:]], inner[1], inner[2])
        nested = self.manifest.structs.get(t.name or "") if t.kind == "Ref" else None
        if nested is None or nested.name == "PickleWrapper":
            return None
        for j, nf in enumerate(nested.fields):
            if isinstance(raw, list) and nested.array_like:
                key: Any = j + (1 if nested.tag else 0)
                if key >= len(raw):
                    continue
            elif isinstance(raw, dict) and not nested.array_like:
                key = nf.encode_name or nf.name
                if key not in raw:
                    continue
            else:
                return None
            inner = self._with_tuple(nf.type_expr, raw[key], f"{where}.{nf.name}", change)
            if inner is not None:
                edited = list(raw) if isinstance(raw, list) else dict(raw)
                edited[key] = inner[0]
                return edited, inner[1], inner[2]
        return None

    def _host_of(self, nested: str) -> Optional[tuple[str, int, Any]]:
        for spec, i, f in self.fields():
            t = _strip_optional(f.type_expr)
            if t.kind == "Ref" and t.name == nested:
                value = self.typical(spec.name)[i + 1]
                if value is not None:
                    return spec.name, i, value
        return None

    def tags(self) -> None:
        first = self.messages[0]
        raw = self.typical(first)
        rest = raw[1:]
        cases = (("UnknownTag", "NoSuchMessage", "R-MSG-5", "the tag names no struct of the union"),
                 ("TagCase", first.lower(), "R-MSG-5", "tags are compared exactly (case matters)"),
                 ("TagNotStr", 7, "R-MSG-6", "the first array element must be the tag, a str"),
                 ("TagNil", None, "R-MSG-6", "the first array element must be the tag, a str"),
                 ("TagAsBin", first.encode(), "R-MSG-6", "the tag is a str, never bin"))
        for name, tag, req, why in cases:
            self.add(f"Message.{name}", "tag", req, f"{why} ({tag!r})", struct=first, payload=_pack([tag, *rest]))
        bases = sorted(s.name for s in self.manifest.structs.values() if s.role == "base" and s.tag)
        if bases and bases[0] not in self.manifest.union:
            self.add("Message.BaseTag", "tag", "R-MSG-6",
                     f"{bases[0]} is a base of messages, not in the union", struct=bases[0],
                     payload=_pack([bases[0]]))
        top: tuple[tuple[str, Any, str], ...] = (("EmptyArray", [], "an empty array is no struct"),
               ("Map", {"type": first}, "a map is no message"),
               ("IntArray", [1, 2, 3], "an array whose first element is not a tag"),
               ("Extension", msgspec.msgpack.Ext(1, _struct.pack(">I", 2) + b"\xa1q"), "an extension is no message"))
        for name, value, why in top:
            self.add(f"Message.{name}", "top-level", "R-MSG-6", why, payload=_pack(value))

    def malformed(self) -> None:
        for name in self.messages[:3]:
            data = self._vector(name)
            self.add(f"{name}.TrailingBytes", "trailing-bytes", "R-MSG-11", "a nil after the whole message",
                     struct=name, payload=data + b"\xc0")
        name = self.messages[0]
        data = self._vector(name)
        self.add(f"{name}.TwoMessages", "trailing-bytes", "R-MSG-11", "the message twice in one payload",
                 struct=name, payload=data + data)
        self.add("Message.NeverUsedByte", "malformed", "R-MSG-11", "0xc1 is never used in msgpack", payload=b"\xc1")
        self.add(f"{name}.NeverUsedByte", "malformed", "R-MSG-11", "0xc1 in place of a field",
                 struct=name, payload=self.replaced(name, 0, msgspec.Raw(b"\xc1")))
        self.add("Message.Empty", "malformed", "R-MSG-11", "zero bytes are no message", payload=b"")

    def truncations(self) -> None:
        for name in self._truncation_subjects():
            data = self._vector(name)
            cuts = sorted(set(_cut_points(data)) - {0, len(data)})
            if len(cuts) > TRUNCATIONS:  # evenly spread, deterministic
                step = len(cuts) / TRUNCATIONS
                cuts = [cuts[int(k * step)] for k in range(TRUNCATIONS)]
            for cut in cuts:
                self.add(f"{name}.Truncated.at{cut}", "truncated", "R-MSG-11",
                         f"the first {cut} of {len(data)} bytes of golden {name}.typical", struct=name,
                         payload=data[:cut])

    def _truncation_subjects(self) -> list[str]:
        """A small vector with a map, and the smallest one with an extension."""
        sized = sorted(self.messages, key=lambda n: (len(self._vector(n)), n))
        with_map = next((n for n in sized if _has(self._vector(n), "map")), sized[0])
        with_ext = next((n for n in sized if _has(self._vector(n), "ext")), None)
        return [with_map] + ([with_ext] if with_ext and with_ext != with_map else [])

    def utf8(self) -> None:
        slot = next(((spec.name, i, f.name) for spec, i, f in self.fields()
                     if _strip_optional(f.type_expr).kind == "str"), None)
        cases = (("InvalidUtf8", b"\xff", "0xff is never UTF-8"),
                 ("Surrogate", b"\xed\xa0\x80", "ED A0 80 is the surrogate U+D800 (CESU-8/WTF-8), not UTF-8"),
                 ("Overlong", b"\xc0\xaf", "C0 AF is an overlong '/'"),
                 ("TruncatedSequence", b"ok\xe6\xbc", "a 3-byte sequence cut after 2 bytes"))
        if slot:
            struct, i, fname = slot
            for name, raw, why in cases:
                self.add(f"{struct}.{name}.{fname}", "utf8", "R-MSG-11", why, struct=struct, field=fname,
                         payload=self.replaced(struct, i, _str_with(raw)))
        for name, raw, why in cases[:2]:
            self.add(f"Message.{name}", "utf8", "R-MSG-6", f"a top-level str: {why}", payload=bytes(_str_with(raw)))
        first = self.messages[0]
        rest = self.typical(first)[1:]
        self.add("Message.SurrogateInTag", "utf8", "R-MSG-11", "the tag's bytes are not UTF-8", struct=first,
                 payload=_pack([_str_with(first.encode()[:-1] + b"\xed\xa0\x80"), *rest]))

    def pickle_wrapper(self) -> None:
        if "PickleWrapper" not in self.manifest.union:
            return
        self.add("PickleWrapper.DataNotBin", "pickle-wrapper", "R-MSG-5", "PickleWrapper.data is bytes (bin), not str",
                 struct="PickleWrapper", field="data", payload=_pack(["PickleWrapper", "pickle"]))
        self.add("PickleWrapper.MissingData", "pickle-wrapper", "R-MSG-5", "PickleWrapper.data has no default",
                 struct="PickleWrapper", field="data", payload=_pack(["PickleWrapper"]))
        for spec, i, f in self.fields():
            t = _strip_optional(f.type_expr)
            if t.kind == "Ref" and t.name == "PickleWrapper":
                self.add(f"{spec.name}.WrapperDataNotBin.{f.name}", "pickle-wrapper", "R-MSG-5",
                         f"{f.name} holds a PickleWrapper whose data is a str", struct=spec.name, field=f.name,
                         payload=self.replaced(spec.name, i, ["PickleWrapper", "pickle"]))
                break

    def extensions(self) -> None:
        meta = _pack
        tensor_ok = (meta([[2], "float32", "cpu"]), b"\x00" * 8)
        cases_tensor = [
            ("MetaLengthPastPayload", _buffer(2, tensor_ok[0], tensor_ok[1], meta_len=1000), "R-EXT-3",
             "the metadata length runs past the payload"),
            ("ShorterThanHeader", msgspec.msgpack.Ext(2, b"\x00\x00"), "R-EXT-1",
             "2 bytes: no room for the 4-byte length"),
            ("MetaNotMsgpack", _buffer(2, b"\xc1", tensor_ok[1]), "R-EXT-3",
             "the metadata is the never-used byte 0xc1"),
            ("MetaNotList", _buffer(2, meta({"shape": [2]}), tensor_ok[1]), "R-EXT-3", "the metadata is a map"),
            ("MetaTwoItems", _buffer(2, meta([[2], "float32"]), tensor_ok[1]), "R-EXT-3",
             "tensor metadata is [shape, dtype, device]"),
            ("NegativeDim", _buffer(2, meta([[-2], "float32", "cpu"]), tensor_ok[1]), "R-EXT-3",
             "a negative dimension"),
            ("FloatDim", _buffer(2, meta([[2.0], "float32", "cpu"]), tensor_ok[1]), "R-EXT-3", "a float dimension"),
            ("ShapeNotList", _buffer(2, meta([2, "float32", "cpu"]), tensor_ok[1]), "R-EXT-3", "the shape is an int"),
            ("TooManyDims", _buffer(2, meta([[1] * 65, "float32", "cpu"]), b"\x00" * 4), "R-EXT-3", "65 dimensions"),
            ("HugeEmptyShape", _buffer(2, meta([[0, 2**63], "float32", "cpu"]), b""), "R-EXT-3",
             "an empty tensor with a dimension of 2**63"),
            ("UnknownDtype", _buffer(2, meta([[2], "float128", "cpu"]), b"\x00" * 32), "R-TEN-1", "no dtype float128"),
            ("DtypeNotStr", _buffer(2, meta([[2], 6, "cpu"]), tensor_ok[1]), "R-TEN-1", "the dtype is an int"),
            ("QuantizedDtype", _buffer(2, meta([[2], "qint8", "cpu"]), b"\x01\x02"), "R-TEN-1",
             "quantized tensors have no raw-byte form"),
            ("ShortData", _buffer(2, tensor_ok[0], tensor_ok[1][:-1]), "R-EXT-2", "7 bytes for 2 float32"),
            ("LongData", _buffer(2, tensor_ok[0], tensor_ok[1] + b"\x00"), "R-EXT-2", "9 bytes for 2 float32"),
            ("UnknownDevice", _buffer(2, meta([[2], "float32", "nosuchdevice"]), tensor_ok[1]), "R-TEN-3",
             "no device type 'nosuchdevice'"),
            ("AbsentDevice", _buffer(2, meta([[2], "float32", "cuda:4096"]), tensor_ok[1]), "R-TEN-3",
             "device indices end at 127 (torch's is 8-bit: torch.device('cuda:4096') is cuda:0)"),
            ("DeviceIndexAbove127", _buffer(2, meta([[2], "float32", "cuda:128"]), tensor_ok[1]), "R-TEN-3",
             "device indices end at 127 (torch's is 8-bit: torch.device('cuda:128') is cuda:-128)"),
            *((name, _buffer(2, meta([[2], "float32", device]), tensor_ok[1]), "R-TEN-3",
               f"{device!r} is outside the device grammar: {why}") for name, device, why in (
                ("DeviceIndexLeadingZero", "cuda:01", "an index has no leading zeros (one device, one string)"),
                ("DeviceIndexPlusSign", "cuda:+1", "an index has no sign"),
                ("DeviceIndexNegative", "cuda:-1", "an index has no sign (torch's -1 means 'the current device')"),
                ("DeviceCpuIndexed", "cpu:0", "the CPU is 'cpu', never indexed (torch reads 'cpu:0', str() keeps it)"),
                ("DeviceUpperCase", "CUDA:0", "a device type is lowercase"))),
        ]
        cases_ndarray = [
            ("MetaLengthPastPayload", _buffer(3, meta([[2], "<f4"]), b"\x00" * 8, meta_len=1000), "R-EXT-3",
             "the metadata length runs past the payload"),
            ("MetaThreeItems", _buffer(3, meta([[2], "<f4", "cpu"]), b"\x00" * 8), "R-EXT-3",
             "ndarray metadata is [shape, dtype]"),
            ("ObjectDtype", _buffer(3, meta([[1], "|O"]), b"\x00" * 8), "R-EXT-3", "dtype |O holds Python objects"),
            ("StructuredDtype", _buffer(3, meta([[1], [["a", "<i4"]]]), b"\x00" * 4), "R-EXT-3",
             "a record dtype is not a dtype.str string"),
            ("SubarrayDtype", _buffer(3, meta([[1], "(2,)<i4"]), b"\x00" * 8), "R-EXT-3", "a sub-array dtype"),
            ("ZeroSizeDtype", _buffer(3, meta([[1], "|V0"]), b""), "R-EXT-3", "a dtype of size 0"),
            ("UnknownDtype", _buffer(3, meta([[1], "<x9"]), b"\x00" * 9), "R-EXT-3", "no dtype <x9"),
            ("NegativeDim", _buffer(3, meta([[-1], "<f4"]), b""), "R-EXT-3", "a negative dimension"),
            ("TooManyDims", _buffer(3, meta([[1] * 65, "<f4"]), b"\x00" * 4), "R-EXT-3", "65 dimensions"),
            ("ShortData", _buffer(3, meta([[2], "<f4"]), b"\x00" * 7), "R-EXT-2", "7 bytes for 2 float32"),
            ("NotCodePoint", _buffer(3, meta([[1], "<U1"]), _struct.pack("<I", 0x110000)), "R-EXT-3",
             "0x110000 is beyond the last Unicode code point"),
        ]
        cases_array = [
            ("MetaLengthPastPayload", _buffer(1, meta("q"), b"\x00" * 8, meta_len=1000), "R-EXT-3",
             "the metadata length runs past the payload"),
            ("UnknownTypecode", _buffer(1, meta("z"), b"\x00" * 8), "R-EXT-3", "no typecode 'z'"),
            ("TypecodeNotStr", _buffer(1, meta(113), b"\x00" * 8), "R-EXT-3", "the typecode is an int"),
            ("TypecodeTwoChars", _buffer(1, meta("qq"), b"\x00" * 8), "R-EXT-3", "a typecode is one character"),
            ("PartialItem", _buffer(1, meta("q"), b"\x00" * 12), "R-EXT-2", "12 bytes are not a multiple of 8"),
        ]
        for subject, labels, cases in (("Tensor", ("Tensor",), cases_tensor), ("NDArray", ("NDArray",), cases_ndarray),
                                       ("Array", ("Array",), cases_array)):
            slot = self.slot(*labels)
            if slot is None:
                continue
            struct, i, in_list = slot
            fname = self.manifest.structs[struct].fields[i].name
            for name, value, req, why in cases:
                self.add(f"{subject}.{name}", "extension", req, why, struct=struct,
                         field=fname + ("[0]" if in_list else ""),
                         payload=self.replaced(struct, i, [value] if in_list else value))

    def encode_side(self) -> None:
        def view_with(struct: str, fname: str, value: Any) -> Any:
            from conformance.schema.golden.store import Case  # the canonical typical instance, as a view

            case = Case(self.manifest, struct, "typical")
            view = jview.to_view(case.value())
            view[fname] = value
            return view

        int_slot = next(((s.name, f.name) for s, _, f in self.fields() if f.type_expr.kind == "int"), None)
        str_slot = next(((s.name, f.name) for s, _, f in self.fields()
                         if _strip_optional(f.type_expr).kind == "str"), None)
        if int_slot:
            for name, value in (("IntAbove64Bits", 2**64), ("IntBelow64Bits", -(2**63) - 1)):
                self.add(f"{int_slot[0]}.{name}.{int_slot[1]}", "encode", "R-VAL-1",
                         f"{value} is outside [-2**63, 2**64-1]: no msgpack int holds it",
                         struct=int_slot[0], field=int_slot[1], view=view_with(*int_slot, value))
        if str_slot:
            self.add(f"{str_slot[0]}.LoneSurrogate.{str_slot[1]}", "encode", "R-VAL-3",
                     "'\\ud800' is a lone surrogate: no UTF-8 form", struct=str_slot[0], field=str_slot[1],
                     view=view_with(*str_slot, "a\ud800"))
        slot = self.slot("Tensor")
        if slot:
            struct, i, in_list = slot
            fname = self.manifest.structs[struct].fields[i].name
            tensor = {"$tensor": {"dtype": "qint8", "shape": [2], "device": "cpu",
                                  "data": base64.b64encode(b"\x01\x02").decode()}}
            self.add(f"{struct}.QuantizedTensor.{fname}", "encode", "R-TEN-1",
                     "a quantized tensor has no raw-byte form: the encoder must refuse it", struct=struct,
                     field=fname, view=view_with(struct, fname, [tensor] if in_list else tensor))
        if "int" in self.manifest.union:
            self.add("Primitive.IntAbove64Bits", "encode", "R-VAL-1", "a top-level int of 2**64", view=2**64)
        self.add("Primitive.LoneSurrogate", "encode", "R-VAL-3", "a top-level str with a lone surrogate",
                 view="\udfff")


#: a valid wire value per scalar kind, to build a fixed-size tuple the typical vector leaves empty
_SAMPLE: dict[str, Any] = {"int": 1, "float": 0.5, "str": "s", "bool": True, "bytes": b"\x00"}


def _int_keyed(t: T, where: str) -> Optional[tuple[Callable[[Any], Any], str]]:
    """For the first Dict[int, V] reachable through Optional, List and union arms (V a scalar):
    a function of a key giving the field's value with one entry under that key, and the path."""
    t = _strip_optional(t)
    if t.kind == "Dict" and _strip_optional(t.args[0]).kind == "int":
        sample = _SAMPLE.get(_strip_optional(t.args[1]).kind)
        if sample is None:
            return None
        return (lambda key: {key: sample}), f"{where}{{key}}"
    if t.kind in ("List", "VarTuple"):
        inner = _int_keyed(t.args[0], f"{where}[0]")
        if inner is None:
            return None
        build, path = inner
        return (lambda key: [build(key)]), path
    if t.kind == "Union":
        return next((found for a in t.args if (found := _int_keyed(a, where)) is not None), None)
    return None


def _render(t: T) -> str:
    from conformance.schema.manifest.typeexpr import render

    return render(t)


def _hashable(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def _tokens(data: bytes) -> Iterator[tuple[int, int, int, str]]:
    """(offset, header length, body length, kind) of every msgpack token in order (kind:
    scalar, str, bin, ext, array, map); containers have body length 0 (items follow)."""
    i = 0
    while i < len(data):
        head = read_head(data, i)  # a ValueError where no token starts
        kind = head.kind if head.kind in ("str", "bin", "ext", "array", "map") else "scalar"
        body = 0 if kind in ("array", "map") else head.length
        yield i, head.size, body, kind
        i += head.size + body


def _cut_points(data: bytes) -> Iterator[int]:
    """Every structural boundary: each token's start, inside a multi-byte header, inside a body."""
    for offset, head, body, _ in _tokens(data):
        yield offset
        if head > 1:
            yield offset + 1
        if body:
            yield offset + head
            if body > 1:
                yield offset + head + body // 2


def _has(data: bytes, kind: str) -> bool:
    return any(k == kind for *_, k in _tokens(data))


# -- file -------------------------------------------------------------------------------
def build(manifest: Manifest, vector: Callable[[str], bytes]) -> list[Refusal]:
    """Every refusal case of the manifest; vector(struct) gives the golden typical bytes."""
    b = _Builder(manifest, vector)
    for family in (b.wrong_types, b.wrong_elements, b.named_confusions, b.int_keys, b.enums_and_literals,
                   b.missing_required, b.tuple_lengths, b.tags, b.malformed, b.truncations, b.utf8, b.pickle_wrapper,
                   b.extensions, b.encode_side):
        family()
    ids = [r.id for r in b.out]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"duplicate refusal ids: {duplicates}"
    return b.out


def corpus_text(manifest: Manifest, vector: Callable[[str], bytes], digest: str, generated_by: str) -> str:
    cases = build(manifest, vector)
    doc = Corpus(format=FORMAT, manifest=manifest.id, manifest_sha256=digest, generated_by=generated_by, cases=cases)
    # The standard json module writes it: ASCII only, one member a line, as the file always was.
    return json.dumps(msgspec.to_builtins(doc), indent=1, ensure_ascii=True) + "\n"


def load(text: str) -> list[Refusal]:
    """The cases of a refusals.json, validated through the Corpus struct (a ValueError naming the member)."""
    try:
        return msgspec.convert(json.loads(text), Corpus).cases
    except msgspec.ValidationError as exc:
        raise ValueError(f"not a refusals.json: {invalid_member(exc)}") from None
