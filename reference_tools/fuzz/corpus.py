"""Hand-made hostile inputs for the reference codec, and the fuzzers' seed corpus.

Every case says what a correct decoder must do with it: refuse it with one WireError
(naming transport, struct and - where the input has one - the field path, and saying
why), or decode it. tests/reliability/test_hostile_bytes.py runs them all; the fuzz
targets start from them and from the golden vectors.

Messages are built around a few carrier structs, so a hostile value sits in a known field:

    DumperControlReqInput.body            Dict[str, Any]: anything msgpack can say, ext included
    BatchEmbeddingOutput.pooled_hidden_states  List[Optional[Tensor]]: a typed tensor field
    BatchTokenIDOutput.decode_ids         List[array]: token ids (the codec's fast path)
    BatchTokenIDOutput.input_top_logprobs_val_flat  List[Optional[ndarray]]
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Optional

import msgspec

GiB2 = 0x7FFFFFFF  # a "2 GiB" declared length (the largest a signed 32-bit reader accepts)
_enc = msgspec.msgpack.encode


@dataclass(frozen=True)
class Case:
    """One hostile input and the outcome it must have.

    outcome "error": a WireError whose struct is `struct` (None: no struct can be named, e.g.
    the input is not msgpack) and whose path contains `path` (None: do not check) and
    whose message contains `says`. outcome "ok": it decodes (to a value of type `decodes_to`).
    """

    name: str
    data: bytes
    outcome: str = "error"
    struct: Optional[str] = None
    path: Optional[str] = None
    says: str = ""
    decodes_to: Optional[str] = None
    trusted: bool = False  # decode with allow_pickle=True


# -- building blocks ---------------------------------------------------------------------
def buffer_ext(code: int, metadata: Any, raw: bytes = b"", meta_len: Optional[int] = None) -> msgspec.msgpack.Ext:
    """A buffer extension payload: 4-byte big-endian metadata length | msgpack metadata | raw."""
    meta = _enc(metadata)
    size = len(meta) if meta_len is None else meta_len
    return msgspec.msgpack.Ext(code, struct.pack(">I", size) + meta + raw)


def tensor_ext(shape: Any, dtype: Any = "float32", device: Any = "cpu",
               raw: Optional[bytes] = None) -> msgspec.msgpack.Ext:
    if raw is None:
        raw = b"\0" * 4
    return buffer_ext(2, [shape, dtype, device], raw)


def in_any(value: Any) -> bytes:
    """DumperControlReqInput(method="m", body={"k": value}): value in an Any position."""
    return _enc(["DumperControlReqInput", None, None, "m", {"k": value}])


def in_any_raw(raw: bytes) -> bytes:
    """Like in_any, with the value given as msgpack bytes (which may be malformed)."""
    return b"\x95" + _enc("DumperControlReqInput") + b"\xc0\xc0" + _enc("m") + b"\x81\xa1k" + raw


def in_tensor_field(value: Any) -> bytes:
    """BatchEmbeddingOutput.pooled_hidden_states = [value] (typed Optional[Tensor] items)."""
    return _enc([*_EMBEDDING_HEAD, [value]])


_EMBEDDING_HEAD = ["BatchEmbeddingOutput", ["r"], None, [None], [[0.0]], [1], [0], None, None, None, None, None]


def in_tensor_field_raw(raw: bytes) -> bytes:
    """Like in_tensor_field, with the item given as msgpack bytes (which may be malformed)."""
    return b"\x9d" + b"".join(_enc(v) for v in _EMBEDDING_HEAD) + b"\x91" + raw


@lru_cache(maxsize=None)
def golden_vectors() -> dict[str, Path]:
    """"<Struct>.<variant>" -> the .msgpack file of the reference manifest's vector (golden/vectors/)."""
    from conformance.schema.golden.store import vector_paths

    return {f"{s}.{v}": path for (s, v), path in vector_paths("sglang-0.5.23").items()}


def golden(name: str) -> bytes:
    return golden_vectors()[name].read_bytes()


@lru_cache(maxsize=None)
def token_output() -> list:
    """BatchTokenIDOutput.typical as a list of msgpack-decoded items (exts as Ext), wrappers removed."""
    items = msgspec.msgpack.decode(golden("BatchTokenIDOutput.typical"))
    from reference_impl.io_struct import BatchTokenIDOutput

    names = BatchTokenIDOutput.__struct_fields__
    for field in ("time_stats", "customized_info"):
        items[1 + names.index(field)] = None
    return items


def token_output_with(field: str, value: Any) -> bytes:
    from reference_impl.io_struct import BatchTokenIDOutput

    items = list(token_output())
    items[1 + BatchTokenIDOutput.__struct_fields__.index(field)] = value
    return _enc(items)


# -- the cases ---------------------------------------------------------------------------
def cases() -> list[Case]:
    typical = golden("BatchTokenIDOutput.typical")
    clean = token_output_with("time_stats", None)
    out: list[Case] = []
    add = out.append

    # Not msgpack at all / the envelope
    add(Case("empty input", b"", says="truncated"))
    add(Case("reserved byte 0xc1", b"\xc1", says="invalid"))
    add(Case("trailing bytes after the message", clean + b"\x00", struct="BatchTokenIDOutput", says="trailing"))
    add(Case("top-level map", _enc({"rid": "x"}), says="Expected"))
    add(Case("top-level nil", b"\xc0", outcome="ok", decodes_to="NoneType"))

    # Truncation: at every kind of boundary, the struct (and the field) still named
    tag_end = 1 + len(_enc("BatchTokenIDOutput"))
    for label, cut in (("after the array header", 1), ("inside the tag", 5), ("in the first field", tag_end + 3),
                       ("half way", len(clean) // 2), ("one byte short", len(clean) - 1)):
        add(Case(f"truncated {label}", clean[:cut], struct="BatchTokenIDOutput" if cut >= tag_end else None,
                 path="." if cut > tag_end + 1 else None, says="truncated"))

    # Tags
    add(Case("unknown tag", _enc(["NoSuchStruct", 1, 2]), struct="NoSuchStruct", says="unknown struct tag"))
    add(Case("tag is an int", _enc([7, 1, 2]), says="Expected"))
    add(Case("tag of a nested struct at top level", _enc(["SamplingParams"]), struct="SamplingParams",
             says="unknown struct tag"))

    # Array lengths
    add(Case("too few fields", _enc(["BatchTokenIDOutput", ["r"], None]), struct="BatchTokenIDOutput",
             says="at least length"))
    add(Case("extra trailing fields are ignored (forward compatibility)",
             _enc(["AbortReq", "r", None, False, None, None, None, "future-field", 42]), outcome="ok",
             decodes_to="AbortReq"))
    add(Case("array header claims more items than present", b"\x9f" + _enc("AbortReq") + b"\xc0",
             struct="AbortReq", says="truncated"))

    # Wrong types, with the field path
    add(Case("wrong element type in List[array]", token_output_with("decode_ids", [1, 2]),
             struct="BatchTokenIDOutput", path=".decode_ids[0]", says="Expected"))
    add(Case("str where bool", _enc(["AbortReq", None, None, "yes"]), struct="AbortReq", path=".abort_all",
             says="Expected `bool`"))
    add(Case("nested None where a float list is required",
             token_output_with("input_top_logprobs_val", [[[None]]]), struct="BatchTokenIDOutput",
             path=".input_top_logprobs_val[0][0][0]", says="Expected"))
    add(Case("nested None where the type allows it", token_output_with("input_top_logprobs_val", [[None], None]),
             outcome="ok", decodes_to="BatchTokenIDOutput"))

    # Strings
    add(Case("non-UTF-8 rid", b"\x92" + _enc("AbortReq") + b"\xa2\xff\xfe",
             struct="AbortReq", path=".rid", says="UTF-8"))
    add(Case("non-UTF-8 top-level str", b"\xa2\xff\xfe", says="UTF-8"))
    add(Case("non-UTF-8 map key in Any", in_any_raw(b"\x81\xa2\xc3\x28\x01"), struct="DumperControlReqInput",
             path=".body", says="UTF-8"))

    # Declared lengths far beyond the input (no 2 GiB allocation)
    for what, head in (("array32", b"\xdd"), ("map32", b"\xdf"), ("bin32", b"\xc6"), ("str32", b"\xdb")):
        add(Case(f"{what} declaring 2 GiB in an Any field", in_any_raw(head + struct.pack(">I", GiB2)),
                 struct="DumperControlReqInput", path=".body", says="truncated"))
    add(Case("ext32 declaring 2 GiB in a tensor field",
             in_tensor_field_raw(b"\xc9" + struct.pack(">I", GiB2) + b"\x02"),
             struct="BatchEmbeddingOutput", path=".pooled_hidden_states[0]", says="truncated"))
    add(Case("top-level array32 declaring 2 GiB", b"\xdd" + struct.pack(">I", GiB2), says="truncated"))

    # Nesting
    deep = 100_000
    add(Case(f"{deep} nested arrays in an Any field", in_any_raw(b"\x91" * deep + b"\xc0"),
             struct="DumperControlReqInput", path=".body", says="nest"))
    add(Case(f"{deep} nested maps in an Any field", in_any_raw(b"\x81\xa1k" * deep + b"\xc0"),
             struct="DumperControlReqInput", path=".body", says="nest"))
    add(Case("nesting of 200 is fine", in_any_raw(b"\x91" * 200 + b"\xc0"), outcome="ok",
             decodes_to="DumperControlReqInput"))

    # Extension types
    add(Case("unknown ext code in an Any field decodes to a raw Ext", in_any(msgspec.msgpack.Ext(99, b"xyz")),
             outcome="ok", decodes_to="DumperControlReqInput"))
    add(Case("unknown ext code in a tensor field", in_tensor_field(msgspec.msgpack.Ext(99, b"xyz")),
             struct="BatchEmbeddingOutput", path=".pooled_hidden_states[0]", says="Expected"))
    add(Case("buffer ext shorter than its 4-byte metadata length", in_tensor_field(msgspec.msgpack.Ext(2, b"\0\0")),
             struct="BatchEmbeddingOutput", path=".pooled_hidden_states[0]", says="4-byte metadata length"))
    add(Case("buffer ext metadata length beyond the payload",
             in_tensor_field(buffer_ext(2, [[1], "float32", "cpu"], b"\0" * 4, meta_len=GiB2)),
             struct="BatchEmbeddingOutput", path=".pooled_hidden_states[0]", says="metadata bytes"))
    add(Case("buffer ext metadata is not msgpack", in_tensor_field(msgspec.msgpack.Ext(2, b"\0\0\0\1\xc1")),
             struct="BatchEmbeddingOutput", path=".pooled_hidden_states[0]", says="not msgpack"))
    add(Case("tensor metadata not a triple", in_tensor_field(buffer_ext(2, [[1], "float32"], b"\0" * 4)),
             struct="BatchEmbeddingOutput", path=".pooled_hidden_states[0]", says="[shape, dtype, device]"))
    add(Case("negative shape", in_tensor_field(tensor_ext([-1])), struct="BatchEmbeddingOutput",
             path=".pooled_hidden_states[0]", says="shape"))
    add(Case("shape of floats", in_tensor_field(tensor_ext([1.0])), struct="BatchEmbeddingOutput",
             path=".pooled_hidden_states[0]", says="shape"))
    add(Case("huge shape", in_tensor_field(tensor_ext([2 ** 62, 2 ** 62])), struct="BatchEmbeddingOutput",
             path=".pooled_hidden_states[0]", says="bytes"))
    add(Case("huge shape with a zero dimension", in_tensor_field(tensor_ext([2 ** 62, 2 ** 62, 0], raw=b"")),
             struct="BatchEmbeddingOutput", path=".pooled_hidden_states[0]", says="shape"))
    add(Case("dimension beyond int64", in_tensor_field(tensor_ext([2 ** 63, 0], raw=b"")),
             struct="BatchEmbeddingOutput", path=".pooled_hidden_states[0]", says="shape"))
    add(Case("1000 dimensions", in_tensor_field(tensor_ext([1] * 1000)), struct="BatchEmbeddingOutput",
             path=".pooled_hidden_states[0]", says="dimensions"))
    add(Case("shape/bytes mismatch", in_tensor_field(tensor_ext([2, 2])), struct="BatchEmbeddingOutput",
             path=".pooled_hidden_states[0]", says="needs 16 bytes, got 4"))
    for name in ("float128", "Tensor", "device", "", "__class__", "qint8", "quint8", "qint32", "quint4x2",
                 "quint2x4"):
        add(Case(f"dtype {name!r} is not a wire dtype", in_tensor_field(tensor_ext([1], name, raw=b"\0")),
                 struct="BatchEmbeddingOutput", path=".pooled_hidden_states[0]", says="dtype"))
    for name in ("bits8", "uint1", "int3", "float4_e2m1fn_x2", "complex32"):  # torch sends these: they travel
        itemsize = 4 if name == "complex32" else 1
        add(Case(f"dtype {name!r} travels", in_tensor_field(tensor_ext([1], name, raw=b"\0" * itemsize)),
                 outcome="ok", decodes_to="BatchEmbeddingOutput"))
    add(Case("dtype is an int", in_tensor_field(tensor_ext([1], 5)), struct="BatchEmbeddingOutput",
             path=".pooled_hidden_states[0]", says="dtype"))
    for device in ("hpu", "privateuseone", "", "meta", "cuda:99999999999999999999", "nonsense:0", "xla"):
        add(Case(f"device {device!r}", in_tensor_field(tensor_ext([1], device=device)),
                 struct="BatchEmbeddingOutput", path=".pooled_hidden_states[0]", says="device"))
    add(Case("ndarray dtype that is not a dtype", token_output_with(
        "input_top_logprobs_val_flat", [buffer_ext(3, [[1], "not-a-dtype"], b"\0")]),
        struct="BatchTokenIDOutput", path=".input_top_logprobs_val_flat[0]", says="dtype"))
    add(Case("ndarray of Python objects", token_output_with(
        "input_top_logprobs_val_flat", [buffer_ext(3, [[1], "|O"], b"\0" * 8)]),
        struct="BatchTokenIDOutput", path=".input_top_logprobs_val_flat[0]", says="Python objects"))
    add(Case("ndarray with 65 dimensions", token_output_with(
        "input_top_logprobs_val_flat", [buffer_ext(3, [[1] * 65, "<f4"], b"\0" * 4)]),
        struct="BatchTokenIDOutput", path=".input_top_logprobs_val_flat[0]", says="dimensions"))
    add(Case("ndarray of invalid code points", token_output_with(
        "input_top_logprobs_val_flat", [buffer_ext(3, [[1], "<U1"], b"\xff\xff\xff\xff")]),
        struct="BatchTokenIDOutput", path=".input_top_logprobs_val_flat[0]", says="code point"))
    add(Case("array typecode that is not one", token_output_with("decode_ids", [buffer_ext(1, "Z", b"")]),
             struct="BatchTokenIDOutput", path=".decode_ids[0]", says="typecode"))
    add(Case("array payload not a whole number of items",
             token_output_with("decode_ids", [buffer_ext(1, "q", b"\0" * 7)]),
             struct="BatchTokenIDOutput", path=".decode_ids[0]", says="multiple of 8"))
    add(Case("bad array among many (fast path)", token_output_with(
        "decode_ids", [buffer_ext(1, "q", b"\0" * 8)] * 40 + [buffer_ext(1, "q", b"\0" * 7)]),
        struct="BatchTokenIDOutput", path=".decode_ids[40]", says="multiple of 8"))

    # PickleWrapper from an untrusted peer never reaches pickle
    evil = _evil_pickle()
    add(Case("top-level PickleWrapper, untrusted", _enc(["PickleWrapper", evil]), struct="PickleWrapper",
             says="refused"))
    add(Case("PickleWrapper field, untrusted", token_output_with("time_stats", ["PickleWrapper", evil]),
             struct="BatchTokenIDOutput", path=".time_stats", says="refused"))
    add(Case("PickleWrapper field naming os.system, trusted", token_output_with("time_stats", ["PickleWrapper", evil]),
             struct="BatchTokenIDOutput", path=".time_stats", says="allow-list", trusted=True))
    add(Case("PickleWrapper holding garbage, trusted",
             token_output_with("time_stats", ["PickleWrapper", b"\x80\x05garbage"]),
             struct="BatchTokenIDOutput", path=".time_stats", says="refused", trusted=True))
    assert typical  # the unmodified vector stays a seed (golden_seeds)
    return out


def _evil_pickle() -> bytes:
    """A pickle that would run `touch /tmp/ipc-fuzz-pwned` when loaded (never loaded here)."""
    import os
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, ("touch /tmp/ipc-fuzz-pwned",))

    return pickle.dumps(Evil(), protocol=2)


def golden_seeds(max_len: int = 1 << 16) -> Iterator[tuple[str, bytes]]:
    """Every golden vector of the reference manifest up to max_len bytes."""
    for name, path in sorted(golden_vectors().items()):
        data = path.read_bytes()
        if len(data) <= max_len:
            yield name, data
