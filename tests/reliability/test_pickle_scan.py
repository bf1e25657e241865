"""The memo-bomb pre-check (reference_impl/pickle_scan.py) against pickletools.genops, the
standard library's own opcode walk, on real pickles, mutated pickles and raw bytes.

The pre-check finds opcode boundaries without decoding arguments. What must hold:
- every pickle genops walks to STOP is accepted (no real pickle is refused);
- every memo index beyond the pickle's length that genops sees is refused (no bomb passes);
- whatever the pre-check accepts, genops walks to the same STOP, or fails only on an
  argument's content (a bad UTF-8 string...), which the unpickler checks itself: the two never
  disagree on where an opcode starts, so the C unpickler cannot be shown a hidden opcode.
"""

from __future__ import annotations

import datetime
import pickle
import pickletools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference_impl.engine.tracing import ReqTimeStats
from reference_impl.pickle_scan import check_memo_indices

pytestmark = pytest.mark.reliability

# genops' own words for a stream it cannot cut into opcodes (everything else it raises is
# about an argument's content).
_BOUNDARY_ERRORS = ("but only", "no newline found", "exhausted before seeing STOP", "opcode", "negative byte count",
                    "byte count", "exceeds")


def genops_verdict(data: bytes) -> tuple[str, int]:
    """('stop', position after STOP) | ('bomb', index) | ('boundary', 0) | ('content', 0)."""
    size = len(data)
    try:
        end = 0
        for op, arg, pos in pickletools.genops(data):
            if op.code in "rp" and isinstance(arg, int) and arg > size:
                return "bomb", arg
            end = pos + 1
        return "stop", end
    except ValueError as exc:
        if isinstance(exc, UnicodeDecodeError) or not any(words in str(exc) for words in _BOUNDARY_ERRORS):
            return "content", 0
        return "boundary", 0


def scan_accepts(data: bytes) -> bool:
    try:
        check_memo_indices(data)
    except pickle.UnpicklingError:
        return False
    return True


def assert_agree(data: bytes) -> None:
    kind, value = genops_verdict(data)
    accepted = scan_accepts(data)
    if kind == "stop":
        assert accepted, f"a pickle genops reads to STOP is refused: {data[:200]!r}"
    elif kind == "bomb":
        assert not accepted, f"memo index {value} passed the pre-check: {data[:200]!r}"
    elif kind == "boundary" and accepted:
        # Accepted although genops cannot cut it: only fine when no opcode names a memo index
        # at all (the pre-check skips pickles without an 'r' or 'p' byte).
        assert b"r" not in data and b"p" not in data, f"genops cannot walk what the pre-check accepted: {data[:200]!r}"


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
    | st.binary(max_size=20) | st.datetimes(max_value=datetime.datetime(3000, 1, 1)),
    lambda inner: (st.lists(inner, max_size=5) | st.tuples(inner, inner)
                   | st.dictionaries(st.text(max_size=8), inner, max_size=5)
                   | st.frozensets(st.integers(), max_size=4)),
    max_leaves=20,
)


def _real_pickles() -> list[bytes]:
    stats = ReqTimeStats("rid-1", {"tokenize": 1.5}, {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"})
    shared = ["shared"] * 3
    out = []
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        for value in (stats, [stats, stats], {"a": shared, "b": shared}, bytearray(b"xy"), 10 ** 40, -1.5, "p\nr"):
            out.append(pickle.dumps(value, protocol=protocol))
    return out


@pytest.mark.parametrize("data", _real_pickles())
def test_real_pickles_of_every_protocol_are_accepted(data):
    assert genops_verdict(data)[0] == "stop"
    check_memo_indices(data)


@pytest.mark.parametrize("data", [
    b"\x80\x02\x89r" + (1 << 25).to_bytes(4, "little") + b".",  # LONG_BINPUT 2**25
    b"(I1\np788528943\n.",  # PUT, protocol 0
    b"\x80\x05\x95\x06\x00\x00\x00\x00\x00\x00\x00(K\x01r\x0b\x00\x00\x00r\x0b\x00\x00\x00\x91r\x94.",  # truncated
    b"\x80\x02\x89r\x01\x00",  # LONG_BINPUT cut short
    b"\x80\x02\x89r\x01\x00\x00\x00",  # no STOP
    b"\x80\x02\xffr\x00\x00\x00\x00.",  # unknown opcode
    b"\x80\x02T\xff\xff\xff\xffr\x00\x00\x00\x00.",  # BINSTRING of negative length
    b"pX\n.",  # PUT index that is not a number
])
def test_bombs_and_unwalkable_pickles_are_refused(data):
    with pytest.raises(pickle.UnpicklingError):
        check_memo_indices(data)


@settings(max_examples=300, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(value=VALUES, protocol=st.integers(0, pickle.HIGHEST_PROTOCOL), data=st.data())
def test_pre_check_agrees_with_genops_on_mutated_pickles(value, protocol, data):
    raw = bytearray(pickle.dumps(value, protocol=protocol))
    assert_agree(bytes(raw))
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        where = data.draw(st.integers(0, len(raw)), label="where")
        how = data.draw(st.sampled_from(["flip", "insert", "delete", "truncate", "memo"]), label="how")
        if how == "flip" and where < len(raw):
            raw[where] = data.draw(st.integers(0, 255), label="byte")
        elif how == "insert":
            raw[where:where] = data.draw(st.binary(min_size=1, max_size=6), label="bytes")
        elif how == "delete":
            del raw[where:where + data.draw(st.integers(1, 4), label="n")]
        elif how == "truncate":
            del raw[where:]
        else:  # plant a LONG_BINPUT with an index of the fuzzer's choosing
            raw[where:where] = b"r" + data.draw(st.integers(0, 2 ** 32 - 1), label="index").to_bytes(4, "little")
        assert_agree(bytes(raw))


@settings(max_examples=300, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=64))
def test_pre_check_agrees_with_genops_on_raw_bytes(data):
    assert_agree(data)
