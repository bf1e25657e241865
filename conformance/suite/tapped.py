"""Judging what an end-to-end run recorded: the tapped IPC messages (decoded with the adapter's own
decode), the exported spans. Each function returns failures in plain words (empty = pass), naming
process, link, struct and field. Used by the E2E checks and by the reference engine's own tests."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from conformance.compare import differences
from conformance.suite.fields import find_wrappers

#: Requests and outputs that carry their time stats in a PickleWrapper-typed field.
TIMED = ("TokenizedGenerateReqInput", "TokenizedEmbeddingReqInput", "BatchTokenIDOutput", "BatchStrOutput",
         "BatchEmbeddingOutput")


def decode_tapped(adapter: Any, rec: Any) -> Any:
    """The message as it came off the socket, PickleWrappers kept."""
    return adapter.decode_frames(rec.frames, rec.transport)


def wire_failures(records: Iterable[Any], adapter: Any) -> list[str]:
    """Every message decodes to a message type of the catalogue, round-trips, re-encodes to the
    same msgpack bytes, and opens (unwrapped) to the type the receive path handed on."""
    catalogue = set(adapter.message_types())
    failures = []
    for n, rec in enumerate(records):
        where = f"#{n} {rec.process} ({rec.link}, {rec.transport})"
        try:
            obj = decode_tapped(adapter, rec)
        except Exception as exc:  # noqa: BLE001 - bytes that do not decode are the finding
            failures.append(f"{where}: does not decode: {exc}")
            continue
        if type(obj) not in catalogue:
            failures.append(f"{where}: {type(obj).__name__} is not a struct of the catalogue")
            continue
        data = adapter.encode(obj, rec.transport)
        diff = differences(obj, adapter.decode(data, rec.transport))
        if diff:
            failures.append(f"{where}: {type(obj).__name__} does not round-trip: {diff[:3]}")
        if rec.transport == "msgpack" and data != rec.frames[0]:
            failures.append(f"{where}: {type(obj).__name__} re-encodes to different msgpack bytes")
        opened = adapter.unwrap(obj)
        if type(opened).__name__ != rec.delivered_type:
            failures.append(f"{where}: handed on a {rec.delivered_type}, decoded a {type(opened).__name__}")
    return failures


def leftover_wrapper_failures(records: Iterable[Any]) -> list[str]:
    """No PickleWrapper survives a receive path (what each process handed downstream, as its tap saw it)."""
    return [f"{rec.process} ({rec.link}, {rec.transport}): {rec.delivered_type} handed on with a PickleWrapper "
            f"at {', '.join(rec.leftover_wrappers)}" for rec in records if rec.leftover_wrappers]


def wrapped_on_wire(records: Iterable[Any], adapter: Any) -> Counter[str]:
    """How many received messages carried a PickleWrapper on the wire, per link (msgpack)."""
    out: Counter[str] = Counter()
    for rec in records:
        if rec.transport == "msgpack" and find_wrappers(decode_tapped(adapter, rec)):
            out[rec.link] += 1
    return out


def time_stats_failures(records: Iterable[Any], adapter: Any) -> list[str]:
    """Every request and output message carries its time stats: on the wire a PickleWrapper under
    msgpack, the object itself under pickle, and once received the kind of object the
    implementation keeps there (its opaque_value)."""
    failures = []
    for rec in records:
        raw = decode_tapped(adapter, rec)
        name = type(raw).__name__
        if name not in TIMED:
            continue
        wire = raw.time_stats
        where = f"{rec.process} ({rec.link}, {rec.transport}): {name}.time_stats"
        if wire is None:
            failures.append(f"{where} is missing")
            continue
        if (type(wire).__name__ == "PickleWrapper") != (rec.transport == "msgpack"):
            failures.append(f"{where} travels as {type(wire).__name__}")
        sample = adapter.opaque_value(name, "time_stats")  # a batch output's may be a list of them
        kept = {type(t).__name__ for t in (sample if isinstance(sample, list) else [sample]) if t is not None}
        opened = adapter.unwrap(raw).time_stats
        items = opened if isinstance(opened, list) else [opened]
        if not all(type(t).__name__ in kept for t in items):
            failures.append(f"{where} opens to {[type(t).__name__ for t in items]}")
    return failures


def struct_types(records: Iterable[Any], adapter: Any) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for rec in records:
        out.setdefault(rec.link, set()).add(type(decode_tapped(adapter, rec)).__name__)
    return out


def link_failures(records: Iterable[Any], adapter: Any, wanted_by_link: Mapping[str, set[str]]) -> list[str]:
    """Every link carried the structs the scenario sends over it."""
    seen = struct_types(records, adapter)
    return [f"{link} never carried {sorted(wanted - seen.get(link, set()))} (saw {sorted(seen.get(link, set()))})"
            for link, wanted in wanted_by_link.items() if not wanted <= seen.get(link, set())]


def trace_failures(spans: list[dict[str, Any]], trace_id: str, parent_span: str, chain: Sequence[str]) -> list[str]:
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


def processes_in_trace(spans: list[dict[str, Any]], trace_id: str) -> set[str]:
    return {s["process"] for s in spans if s["trace_id"] == trace_id}
