"""Checks over what the tap recorded (every IPC message received) and the exported spans, for the
engine's own tests: the suite's judgements (conformance/suite/tapped.py) with the reference
decoding, and what only these tests ask (batching, tensors on the wire).

Each function returns a list of failures in plain words (empty = pass), naming the
process, link, struct and field, so a test can assert ``== []`` and show them.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import Any, Iterable

from conformance.suite import tapped
from conformance.suite.tapped import leftover_wrapper_failures, processes_in_trace
from reference_impl.engine.tap import TapRecord
from reference_tools.adapter import ReferenceAdapter
from reference_tools.e2e.expected import CHAIN, EMBED_CHAIN, link_messages

__all__ = ["CHAIN", "EMBED_CHAIN", "decode_raw", "leftover_wrapper_failures", "link_failures", "link_messages",
           "max_batch", "processes_in_trace", "struct_types", "tensors_on_wire", "time_stats_failures",
           "trace_failures", "wire_failures", "wrapped_on_wire"]


@lru_cache(maxsize=1)
def _reference() -> Any:
    return ReferenceAdapter()


def decode_raw(rec: TapRecord) -> Any:
    """The message as it came off the socket: PickleWrappers kept."""
    return tapped.decode_tapped(_reference(), rec)


def wire_failures(records: Iterable[TapRecord]) -> list[str]:
    """Every message is a struct of the catalogue, and round-trips through the reference codec."""
    return tapped.wire_failures(records, _reference())


def wrapped_on_wire(records: Iterable[TapRecord]) -> Counter:
    """How many received messages carried a PickleWrapper on the wire, per link (msgpack)."""
    return tapped.wrapped_on_wire(records, _reference())


def time_stats_failures(records: Iterable[TapRecord]) -> list[str]:
    """Every request and output message carries its time stats: a PickleWrapper on the wire under
    msgpack, the object itself under pickle, and a ReqTimeStats once received."""
    return tapped.time_stats_failures(records, _reference())


def struct_types(records: Iterable[TapRecord]) -> dict[str, set[str]]:
    return tapped.struct_types(records, _reference())


def link_failures(records: Iterable[TapRecord], dp_size: int) -> list[str]:
    """Every link carried the structs the scenario sends over it."""
    return tapped.link_failures(records, _reference(), link_messages(dp_size))


def max_batch(records: Iterable[TapRecord], type_name: str = "BatchTokenIDOutput") -> int:
    best = 0
    for rec in records:
        obj = decode_raw(rec)
        if type(obj).__name__ == type_name:
            best = max(best, len(obj.rids))
    return best


def tensors_on_wire(records: Iterable[TapRecord]) -> int:
    import torch

    count = 0
    for rec in records:
        obj = decode_raw(rec)
        for name in getattr(obj, "__struct_fields__", ()):
            value = getattr(obj, name)
            if isinstance(value, list) and any(isinstance(v, torch.Tensor) for v in value):
                count += 1
    return count


def trace_failures(spans: list[dict], trace_id: str, parent_span: str, chain: tuple[str, ...] = CHAIN) -> list[str]:
    """One linked trace across every process (conformance/suite/tapped.py), by default a generate request's."""
    return tapped.trace_failures(spans, trace_id, parent_span, chain)
