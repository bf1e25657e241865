"""A decoder that meets keys that are one key after decode keeps one entry or refuses (SPEC R-VAL-6).

The runner writes, in the struct's first `Dict[str, Any]` field, a map under "nested" whose two
keys are one key to a Python peer: the int 1 in two encodings (fixint and int8), the int 1 and the
float 1.0, true and 1. The decoder may refuse the message, or keep ONE entry: the first key, the
last value ("b"). It is judged on what the decoder itself holds, never on a Python dict the runner
builds (which would collapse the two keys and hide the defect): an in-process decoder's object, a
testee's protocol-2 view (`$dict` pairs in wire order), else the raw bytes of its re-encode.
"""

from __future__ import annotations

from typing import Any, Optional

from conformance.plugin import check, harness_error
from conformance.schema.wire_form import MapPairs, parse, write_value
from conformance.suite.failure import DECODE_RUNNER_BYTES, Failure, raise_failure

ANY_MAPS = ("Dict[str, Any]", "Optional[Dict[str, Any]]")
NESTED = "nested"
#: case -> (the nested map as written, the one entry a decoder may keep, the map in words)
CASES: dict[str, tuple[MapPairs, tuple[Any, str], str]] = {
    "IntTwoEncodings": (MapPairs([(1, "a"), (1, "b")]), (1, "b"), "{1: 'a', 1: 'b'}, the second 1 as int8 d0 01"),
    "IntAndFloat": (MapPairs([(1, "a"), (1.0, "b")]), (1, "b"), "{1: 'a', 1.0: 'b'}"),
    "BoolAndInt": (MapPairs([(True, "a"), (1, "b")]), (True, "b"), "{true: 'a', 1: 'b'}"),
}


def _structs(ipc: Any) -> list[str]:
    if "msgpack" not in ipc.transports:
        return []
    return [s.name for s in ipc.manifest.messages if s.options.get("array_like")
            and any(f.type in ANY_MAPS for f in s.fields)]


def _payload(ipc: Any, struct: str, case: str) -> tuple[str, int, bytes]:
    """(field, position in the array, bytes): the typical vector with the field holding the case."""
    from conformance.schema.wire_form import read_value
    from conformance.suite.vectors import golden_vector

    spec = ipc.manifest.structs[struct]
    position = next(i for i, f in enumerate(spec.fields, 1) if f.type in ANY_MAPS)
    tree = read_value(golden_vector(ipc, struct, "typical"))
    tree[position] = MapPairs([(NESTED, CASES[case][0])])
    data = write_value(tree)
    if case == "IntTwoEncodings":  # the second key 1 as int8 d0 01, not fixint 01
        shortest = b"\x82\x01\xa1a\x01\xa1b"
        assert data.count(shortest) == 1, "the nested map's bytes are not where the runner wrote them"
        data = data.replace(shortest, b"\x82\x01\xa1a\xd0\x01\xa1b")
    return spec.fields[position - 1].name, position, data


def _kept_entries(ipc: Any, data: bytes, name: str, position: int) -> Optional[list[tuple[Any, Any]]]:
    """The entries the decoder holds under NESTED in the field, as (key, value) pairs in its order
    (None: no such map); an exception is its refusal."""
    from conformance.testee.adapter import SubprocessAdapter

    if not isinstance(ipc.adapter, SubprocessAdapter):
        field = getattr(ipc.adapter.decode(data, "msgpack"), name)
        nested = field.get(NESTED) if isinstance(field, dict) else None
        return list(nested.items()) if isinstance(nested, dict) else None
    if ipc.adapter.protocol >= 2:
        view = ipc.adapter.decoded_view(data, "msgpack").get(name)
        pairs = view.get("$dict") if isinstance(view, dict) else None
        inner = next((v for k, v in pairs or () if k == NESTED), None)
        got = inner.get("$dict") if isinstance(inner, dict) else None
        return [(k, v) for k, v in got] if isinstance(got, list) else None
    top = parse(ipc.adapter.decoded_payload(data, "msgpack"))  # protocol 1: its re-encode's bytes
    if top.kind != "array" or len(top.items) <= position or top.items[position].kind != "map":
        return None
    items = top.items[position].items
    for key, value in zip(items[::2], items[1::2]):
        if key.kind == "str" and key.value == NESTED.encode() and value.kind == "map":
            return [(k.value, v.value) for k, v in zip(value.items[::2], value.items[1::2])]
    return None


def _same(got: tuple[Any, Any], want: tuple[Any, str]) -> bool:
    (key, value), (want_key, want_value) = got, want
    if isinstance(value, bytes):  # a raw-bytes reading: the value's UTF-8 (protocol 1)
        value = value.decode("utf-8", "replace")
    if isinstance(key, bytes):
        return False
    return type(key) is type(want_key) and key == want_key and value == want_value


@check("Accepts", per=("struct",), name="CollidingKeysKeptOnce", cases={"struct": _structs})
def test_colliding_keys_kept_once(ipc, struct):
    wrong: list[str] = []
    first_data = b""
    for case, (_, want, words) in CASES.items():
        name, position, data = _payload(ipc, struct, case)
        first_data = first_data or data
        try:
            kept = _kept_entries(ipc, data, name, position)
        except Exception as exc:
            if harness_error(exc):
                raise  # a crash or a hang is no refusal
            continue  # refusing the message is allowed
        if kept is None:
            wrong.append(f"$.{name}['{NESTED}'] <- {words} ({case}): the decoded value holds no map there")
        elif len(kept) != 1 or not _same(kept[0], want):
            wrong.append(f"$.{name}['{NESTED}'] <- {words} ({case}): kept {kept!r:.160}; only a refusal or "
                         f"[{want!r}] (first key, last value) is allowed")
    if wrong:
        raise_failure(Failure(f"{struct}: a map with keys that are one key after decode was kept wrongly", "R-VAL-6",
                              f"{DECODE_RUNNER_BYTES} (its typical vector, the map in its first Dict[str, Any] "
                              "field; judged on the decoder's own value, never on a dict the runner builds)",
                              wrong, first_data), ipc)
