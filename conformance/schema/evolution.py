"""Schema diff verdicts checked against real bytes.

    ipc-conformance schema verify OLD NEW [--transitive] [--all]

For every message of two manifests, in both directions (backward: a NEW reader gets what
an OLD writer sent; forward: an OLD reader gets what a NEW writer sent) and both
transports, the writer's canonical vectors (minimal, typical, edge, and bounds: typical with
ints a float64 cannot hold exactly, encoded on the spot) are decoded with the reader's structs,
generated from its manifest in-process:

    msgpack  the writer's golden bytes, decoded by the reader's top-level decoder
    pickle   pickle.dumps of the writer's value, loaded with every class the pickle names
             looked up in the reader's catalogue under the module the manifest records

Each exchange ends ok (the reader holds what the writer meant; fields the writer does not
know hold their defaults), loud (the reader raises) or silent (the reader holds another
value without an error: which field got which value). The diff's verdict for the message
(its own changes and those of every struct and enum it reaches) must agree: a direction it
allows must be ok on every vector, a direction it forbids must fail on at least one.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from conformance.schema.diff import Change, Diff, compat, diff, meet
from conformance.schema.exchange import (
    DIRECTIONS,
    LOUD,
    OK,
    PEER_DIRECTIONS,
    SILENT,
    TRANSPORTS,
    Exchange,
    ImplementationSide,
    VersionSide,
    direction_of,
    exchange,
    reach,
)
from conformance.schema.golden.catalogue import catalogue_for
from conformance.schema.isolation import verify_each_change
from conformance.schema.manifest import Manifest

__all__ = ["Exchange", "ImplementationSide", "PeerCheck", "Verification", "VersionSide", "DIRECTIONS",
           "PEER_DIRECTIONS", "TRANSPORTS", "OK", "LOUD", "SILENT", "bundled_pairs", "exchange", "reach",
           "render_text", "silent_record", "to_dict", "verify", "write_silent"]


@dataclass
class Verification:
    old: str
    new: str
    exchanges: list[Exchange]  # per message
    # per changed struct or enum, checked alone (conformance.schema.isolation): `message`
    # names the subject, the evidence the message that carried it
    changes: list[Exchange] = field(default_factory=list)

    def contradictions(self) -> list[Exchange]:
        return [e for e in self.exchanges + self.changes if e.contradiction]

    def silent(self) -> list[Exchange]:
        return [e for e in self.exchanges + self.changes if e.outcome == SILENT]


def _relevant(result: Diff, old: Manifest, new: Manifest, message: str) -> list[Change]:
    subjects = reach(old, message) | reach(new, message)
    subjects |= {result.renamed[s] for s in subjects if s in result.renamed}
    return [c for c in result.changes if c.subject in subjects]


# -- the whole check -------------------------------------------------------------------
def verify(old: Manifest, new: Manifest, *, transports: Iterable[str] = TRANSPORTS,
           each_change: bool = True) -> Verification:
    """Every message both ways on each transport; with each_change, also every changed
    struct and enum alone (a message stops at its first failure and hides the rest)."""
    for m in (old, new):
        if any(s.options.get("dataclass") for s in m.structs.values()):
            raise ValueError(f"{m.id} is a dataclass catalogue (no msgpack form): `ipc-conformance schema diff` "
                             "gives its migration report")
    result = diff(old, new)
    cats = {"old": VersionSide(catalogue_for(old)), "new": VersionSide(catalogue_for(new), reexports=True)}
    exchanges = []
    for message in sorted({s.name for s in old.messages} | {s.name for s in new.messages}):
        changes = _relevant(result, old, new, message)
        for direction in DIRECTIONS:
            writer, reader = (cats["old"], cats["new"]) if direction == "backward" else (cats["new"], cats["old"])
            sender = writer.manifest.structs.get(message)
            if sender is None or sender.role != "message":
                continue  # the writer's version cannot send it
            for transport in transports:
                level = meet(*(getattr(c, transport) for c in changes))
                bad = [c.rule for c in changes if direction_of(direction) not in compat(getattr(c, transport))]
                outcome, evidence = exchange(writer, reader, message, transport)
                exchanges.append(Exchange(message, direction, transport, outcome, evidence, level,
                                          sorted(set(bad))))
    per_change: list[Exchange] = []
    if each_change:
        per_change = verify_each_change(old, new, result, transports)
    return Verification(old.id, new.id, exchanges, per_change)


def bundled_pairs(*, transitive: bool = True) -> list[tuple[str, str]]:
    """Pairs of bundled manifests to verify, per implementation in version order: every pair
    (transitive), or each release with the next plus the first with the last. Dataclass
    catalogues (from before the msgspec migration) have no msgpack form and are left out."""
    from itertools import combinations

    from conformance.schema.diff import _version_key
    from conformance.schema.manifest import load_manifest, wire_manifests

    by_impl: dict[str, list[Manifest]] = {}
    for mid in wire_manifests():
        m = load_manifest(mid)
        by_impl.setdefault(m.implementation, []).append(m)
    pairs: list[tuple[str, str]] = []
    for releases in by_impl.values():
        ids = [m.id for m in sorted(releases, key=lambda m: _version_key(m.version))]
        if transitive:
            pairs += list(combinations(ids, 2))
        else:
            pairs += list(zip(ids, ids[1:])) + ([(ids[0], ids[-1])] if len(ids) > 2 else [])
    return pairs


class PeerCheck:
    """An implementation (its adapter, as the release `manifest` describes) against a peer on
    another release: per message, direction and transport, what the exchange does."""

    def __init__(self, adapter: Any, manifest: Manifest, peer: Manifest) -> None:
        self.manifest, self.peer_manifest = manifest, peer
        self.impl = ImplementationSide(adapter, manifest)
        self.peer = VersionSide(catalogue_for(peer))
        self.diff = diff(peer, manifest)

    def messages(self) -> list[str]:
        return sorted({s.name for s in self.manifest.messages} | {s.name for s in self.peer_manifest.messages})

    def sender(self, message: str, direction: str) -> Optional[str]:
        """Why the writer of this direction cannot send the message, or None when it can."""
        writer = self.impl if direction == "to-peer" else self.peer
        spec = writer.manifest.structs.get(message)
        if spec is None or spec.role != "message":
            return f"{writer.manifest.id} has no message {message}"
        return None

    def exchange(self, message: str, direction: str, transport: str) -> Exchange:
        writer, reader = (self.impl, self.peer) if direction == "to-peer" else (self.peer, self.impl)
        changes = _relevant(self.diff, self.peer_manifest, self.manifest, message)
        d = direction_of(direction)
        level = meet(*(getattr(c, transport) for c in changes))
        bad = sorted({c.rule for c in changes if d not in compat(getattr(c, transport))})
        outcome, evidence = exchange(writer, reader, message, transport)
        return Exchange(message, direction, transport, outcome, evidence, level, bad)


def render_text(result: Verification, *, every: bool = False) -> str:
    """Contradictions first, then every exchange that fails (every=True: all of them), per
    message and per change alone, then the silent ones by name: those are the dangerous ones."""
    lines = [_counts(f"schema verify {result.old} -> {result.new}: per message", result.exchanges)]
    for e in result.contradictions():
        lines.append(f"  CONTRADICTS THE DIFF: {e.line()}\n      {e.contradiction}")
    lines += [f"  {e.line()}" for e in result.exchanges if (every or e.outcome != OK) and not e.contradiction]
    if result.changes:
        lines.append(_counts("each changed struct and enum alone", result.changes))
        lines += [f"  {e.line()}" for e in result.changes if (every or e.outcome != OK) and not e.contradiction]
    silent = result.silent()
    lines.append("silently wrong: " + (", ".join(f"{e.message} {e.direction} {e.transport}" for e in silent)
                                       if silent else "none"))
    return "\n".join(lines) + "\n"


def silent_record(result: Verification) -> list[dict[str, str]]:
    """The silent exchanges of a verification, once each (message or changed subject, direction,
    transport), with the first evidence: what spec/diffs/silent.json records per release pair."""
    seen: dict[tuple[str, str, str], str] = {}
    for e in result.silent():
        seen.setdefault((e.message, e.direction, e.transport), e.evidence.splitlines()[0][:200])
    return [{"subject": m, "direction": d, "transport": t, "evidence": ev} for (m, d, t), ev in sorted(seen.items())]


def write_silent(path: Path, results: list[Verification]) -> None:
    """Record each pair's silent exchanges in `path` (JSON, keyed "OLD..NEW"), keeping other pairs."""
    record = json.loads(path.read_text()) if path.exists() else {}
    record.update({f"{r.old}..{r.new}": silent_record(r) for r in results})
    path.write_text(json.dumps(dict(sorted(record.items(), key=lambda kv: _pair_key(kv[0]))), indent=1,
                               ensure_ascii=False) + "\n")


def _pair_key(pair: str) -> tuple[Any, ...]:
    from conformance.schema.diff import _version_key

    old, new = pair.split("..")
    return tuple(_version_key(i.split("-", 1)[-1]) for i in (old, new))


def to_dict(result: Verification) -> dict[str, Any]:
    def one(e: Exchange) -> dict[str, Any]:
        return {**asdict(e), "allowed": e.allowed, "contradiction": e.contradiction}

    return {"old": result.old, "new": result.new, "messages": [one(e) for e in result.exchanges],
            "changes": [one(e) for e in result.changes]}


def _counts(title: str, exchanges: list[Exchange]) -> str:
    n = {o: sum(e.outcome == o for e in exchanges) for o in (OK, LOUD, SILENT)}
    bad = sum(bool(e.contradiction) for e in exchanges)
    return (f"{title}: {len(exchanges)} exchanges, {n[OK]} ok, {n[LOUD]} loud, {n[SILENT]} silent; "
            f"{bad} contradict the diff")
