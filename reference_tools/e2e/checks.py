"""Checks over what the tap recorded (every IPC message received) and the exported spans.

Each function returns a list of failures in plain words (empty = pass), naming the
process, link, struct and field, so a test can assert ``== []`` and show them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from conformance.compare import differences
from reference_impl import codec
from reference_impl.engine.tap import TapRecord, find_wrappers


def decode_raw(rec: TapRecord) -> Any:
    """The message as it came off the socket: PickleWrappers kept."""
    return codec.decode_frames(rec.frames, rec.transport, allow_pickle=True, unwrap_wrappers=False)


def wire_failures(records: Iterable[TapRecord]) -> list[str]:
    """Every message is a struct of the catalogue, and round-trips through the reference codec."""
    catalogue = set(codec.message_types())
    failures = []
    for n, rec in enumerate(records):
        where = f"#{n} {rec.process} ({rec.link}, {rec.transport})"
        try:
            obj = decode_raw(rec)
        except Exception as exc:
            failures.append(f"{where}: does not decode: {exc}")
            continue
        if type(obj) not in catalogue:
            failures.append(f"{where}: {type(obj).__name__} is not a struct of the catalogue")
            continue
        again = codec.decode(codec.encode(obj, rec.transport), rec.transport, allow_pickle=True,
                             unwrap_wrappers=False)
        diff = differences(obj, again)
        if diff:
            failures.append(f"{where}: {type(obj).__name__} does not round-trip: {diff[:3]}")
        if rec.transport == "msgpack" and codec.encode(obj, "msgpack") != rec.frames[0]:
            failures.append(f"{where}: {type(obj).__name__} re-encodes to different msgpack bytes")
        opened = codec.decode_frames(rec.frames, rec.transport, allow_pickle=True)
        if type(opened).__name__ != rec.delivered_type:
            failures.append(f"{where}: handed on a {rec.delivered_type}, decoded a {type(opened).__name__}")
    return failures


def leftover_wrapper_failures(records: Iterable[TapRecord]) -> list[str]:
    """No PickleWrapper survives a receive path (what each process handed downstream)."""
    return [f"{rec.process} ({rec.link}, {rec.transport}): {rec.delivered_type} handed on with a PickleWrapper "
            f"at {', '.join(rec.leftover_wrappers)}" for rec in records if rec.leftover_wrappers]


def wrapped_on_wire(records: Iterable[TapRecord]) -> Counter:
    """How many received messages carried a PickleWrapper on the wire, per link (msgpack)."""
    out: Counter = Counter()
    for rec in records:
        if rec.transport == "msgpack" and find_wrappers(decode_raw(rec)):
            out[rec.link] += 1
    return out


TIMED = ("TokenizedGenerateReqInput", "TokenizedEmbeddingReqInput", "BatchTokenIDOutput", "BatchStrOutput",
         "BatchEmbeddingOutput")


def time_stats_failures(records: Iterable[TapRecord]) -> list[str]:
    """Every request and output message carries its time stats: on the wire a PickleWrapper under
    msgpack, the object itself under pickle (upstream's layout), and a ReqTimeStats once received."""
    from reference_impl.engine.tracing import ReqTimeStats
    from reference_impl.io_struct import PickleWrapper

    failures = []
    for rec in records:
        raw = decode_raw(rec)
        name = type(raw).__name__
        if name not in TIMED:
            continue
        wire = raw.time_stats
        where = f"{rec.process} ({rec.link}, {rec.transport}): {name}.time_stats"
        if wire is None:
            failures.append(f"{where} is missing")
            continue
        expected = PickleWrapper if rec.transport == "msgpack" else (ReqTimeStats, list)
        if not isinstance(wire, expected):
            failures.append(f"{where} travels as {type(wire).__name__}")
        opened = codec.unwrap(raw, allow_pickle=True).time_stats
        items = opened if isinstance(opened, list) else [opened]
        if not all(isinstance(t, ReqTimeStats) for t in items):
            failures.append(f"{where} opens to {[type(t).__name__ for t in items]}")
    return failures


def struct_types(records: Iterable[TapRecord]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for rec in records:
        out.setdefault(rec.link, set()).add(type(decode_raw(rec)).__name__)
    return out


def link_messages(dp_size: int) -> dict[str, set[str]]:
    """The structs the scenario must send over each link (at least)."""
    control = {"AbortReq", "FlushCacheReqInput", "UpdateWeightsFromTensorReqInput"}
    out = {
        "controller<-tokenizer_manager": {"TokenizedGenerateReqInput", "TokenizedEmbeddingReqInput", *control},
        "detokenizer<-schedulers": {"BatchTokenIDOutput", "BatchEmbeddingOutput"},
        "tokenizer_manager<-engine": {"BatchStrOutput", "BatchEmbeddingOutput", "FlushCacheReqOutput",
                                      "UpdateWeightsFromTensorReqOutput"},
    }
    for rank in range(dp_size):
        out[f"scheduler_{rank}<-controller"] = {"TokenizedGenerateReqInput", *control}
    return out


def link_failures(records: Iterable[TapRecord], dp_size: int) -> list[str]:
    """Every link carried the structs the scenario sends over it."""
    seen = struct_types(records)
    return [f"{link} never carried {sorted(wanted - seen.get(link, set()))} (saw {sorted(seen.get(link, set()))})"
            for link, wanted in link_messages(dp_size).items() if not wanted <= seen.get(link, set())]


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


# -- tracing ---------------------------------------------------------------------------
CHAIN = ("tokenizer_manager.request", "controller.dispatch", "scheduler.request", "detokenizer.decode",
         "tokenizer_manager.response")


def trace_failures(spans: list[dict], trace_id: str, parent_span: str, chain: tuple[str, ...] = CHAIN) -> list[str]:
    """One linked trace across every process: the client's trace id everywhere, the root under the
    client's span, every other span under a span of the same trace, and the process chain in order."""
    mine = [s for s in spans if s["trace_id"] == trace_id]
    if not mine:
        return [f"no span carries trace id {trace_id} (seen: {sorted({s['trace_id'] for s in spans})[:5]})"]
    failures = []
    by_id = {s["span_id"]: s for s in mine}
    for s in mine:
        if s["parent_id"] != parent_span and s["parent_id"] not in by_id:
            failures.append(f"{s['process']}:{s['name']} has parent {s['parent_id']}, not a span of the trace")
    names = {s["name"] for s in mine}
    for name in chain:
        if name not in names:
            failures.append(f"no {name} span in trace {trace_id} (have {sorted(names)})")
    if failures:
        return failures
    roots = [s for s in mine if s["name"] == chain[0]]
    if len(roots) != 1 or roots[0]["parent_id"] != parent_span:
        failures.append(f"{chain[0]} is not the single child of the client span {parent_span}")
    for parent_name, child_name in zip(chain, chain[1:]):
        children = [s for s in mine if s["name"] == child_name]
        if not any(by_id.get(s["parent_id"], {}).get("name") == parent_name for s in children):
            failures.append(f"no {child_name} span is a child of a {parent_name} span")
    return failures


def processes_in_trace(spans: list[dict], trace_id: str) -> set[str]:
    return {s["process"] for s in spans if s["trace_id"] == trace_id}

