"""The receive path's shortcut for the time stats of a step message (pickle_wrapper.call_of_admitted):
a pickle that is exactly one call of an admitted data class with one bytes argument is opened
without the unpickler. Differential: on those pickles and on every mutation of them, the
shortcut gives what the allow-listed unpickler gives (the same value, or the same refusal)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference_impl import pickle_wrapper
from reference_impl.engine.tracing import ReqTimeStats, TimeStatsBatch
from reference_impl.errors import WireError
from reference_impl.io_struct import PickleWrapper


def _batch(n: int) -> TimeStatsBatch:
    return TimeStatsBatch([ReqTimeStats(rid=f"r{i}", stamps={"created": 1.7e9 + i},
                                        trace_carrier={"traceparent": f"00-{i + 1:032x}-{i + 1:016x}-01"})
                           if i % 3 else None for i in range(n)])


# Small, medium and over pickle's 64 KiB frame (its bytes then sit outside the first frame).
PICKLES = [pickle.dumps(_batch(n), protocol=p) for n in (0, 1, 40, 700) for p in (4, 5)]


def _open(data: bytes, shortcut: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """unwrap_value's result, or the WireError it raised, with or without the shortcut."""
    with monkeypatch.context() as m:
        if not shortcut:
            m.setattr(pickle_wrapper, "call_of_admitted", lambda data: pickle_wrapper.MISS)
        try:
            return pickle_wrapper.unwrap_value(PickleWrapper(data), allow_pickle=True, transport="msgpack",
                                               where=("BatchStrOutput", ".time_stats"))
        except WireError as exc:
            return ("refused", str(exc))


def test_the_time_stats_of_every_size_take_the_shortcut_and_give_the_same_value(monkeypatch):
    pickle_wrapper.AllowListUnpickler(PICKLES[0]).load()  # admits TimeStatsBatch, as a first message does
    for data in PICKLES:
        fast = pickle_wrapper.call_of_admitted(data)
        assert fast is not pickle_wrapper.MISS, len(data)
        assert type(fast) is TimeStatsBatch and fast == pickle.loads(data) == _open(data, False, monkeypatch)


def test_a_class_not_admitted_never_takes_the_shortcut(tmp_path):
    """The same shape naming a callable that is not an admitted data class: left to the unpickler,
    which refuses it (bytearray is allow-listed but guarded; os.system never)."""
    for module, name in (("os", "system"), ("builtins", "bytearray"), ("reference_impl.engine.tracing", "Tracing")):
        data = PICKLES[2].replace(b"\x8c\x1dreference_impl.engine.tracing\x94\x8c\x0eTimeStatsBatch",
                                  b"\x8c" + bytes([len(module)]) + module.encode() + b"\x94\x8c"
                                  + bytes([len(name)]) + name.encode())
        data = data[:3] + (int.from_bytes(data[3:11], "little") + len(data) - len(PICKLES[2])).to_bytes(8, "little") \
            + data[11:]
        assert pickle_wrapper.call_of_admitted(data) is pickle_wrapper.MISS, (module, name)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=st.sampled_from(PICKLES[:6]), edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255),
                                                                 st.sampled_from(["set", "insert", "delete"])),
                                                       min_size=1, max_size=3),
       cut=st.integers(0, 12))
def test_any_mutation_gives_what_the_unpickler_gives(monkeypatch, base: bytes, edits: list, cut: int):
    pickle_wrapper.AllowListUnpickler(PICKLES[0]).load()
    data = bytearray(base)
    for at, value, how in edits:
        at %= len(data) + (how == "insert")
        if how == "set" and at < len(data):
            data[at] = value
        elif how == "insert":
            data.insert(at, value)
        elif len(data) > 1:
            del data[at % len(data)]
    mutated = bytes(data[:len(data) - cut] if cut < len(data) else data)
    fast, full = _open(mutated, True, monkeypatch), _open(mutated, False, monkeypatch)
    if isinstance(full, tuple):  # refused by the unpickler: refused with the shortcut too
        assert isinstance(fast, tuple), (mutated, fast)
    else:
        assert fast == full and type(fast) is type(full), mutated
