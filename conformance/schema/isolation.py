"""Each change of a schema diff proven on its own bytes.

A message that carries two changed structs fails at the first one it meets: its failure
says nothing about the second. So every changed struct and enum (a subject of the diff) is
also checked alone: the reader is the writer's release with only that subject taken from
the other release (and whatever new structs and enums the subject's fields need), so every
byte that differs from the writer's meaning is this subject's doing. The writer's vectors
of each message that carries the subject are decoded with that reader, both directions and
both transports; the diff's verdict for the subject must agree, as in evolution.verify (which
calls this module; the exchange itself is exchange.py's).
"""

from __future__ import annotations

from typing import Iterable

import msgspec

from conformance.schema.diff import Diff, compat, meet
from conformance.schema.exchange import (
    LOUD,
    OK,
    SILENT,
    TRANSPORTS,
    Exchange,
    VersionSide,
    direction_of,
    exchange,
    reach,
)
from conformance.schema.golden.catalogue import catalogue_for
from conformance.schema.manifest import Manifest, parse

__all__ = ["hybrid", "verify_each_change"]


def _needed(source: Manifest, target: Manifest, subject: str) -> set[str]:
    """The subject and what it reaches (fields, base) that `target` lacks, from `source`."""
    out, todo = set(), [subject]
    while todo:
        name = todo.pop()
        if name in out or (name != subject and (name in target.structs or name in target.enums)):
            continue
        out.add(name)
        spec = source.structs.get(name)
        if spec is not None:
            todo += [r for f in spec.fields for r in parse(f.type).refs()] + ([spec.base] if spec.base else [])
    return out


def hybrid(writer: Manifest, reader: Manifest, subject: str) -> Manifest:
    """The writer's release with only `subject` as the reader's release defines it."""
    names = _needed(reader, writer, subject)
    structs = {**writer.structs, **{n: reader.structs[n] for n in names if n in reader.structs}}
    enums = {**writer.enums, **{n: reader.enums[n] for n in names if n in reader.enums}}
    tag = "".join(c if c.isalnum() else "-" for c in subject)
    return msgspec.structs.replace(writer, version=f"{writer.version}+{reader.version}-{tag}",
                                   structs=dict(sorted(structs.items())), enums=dict(sorted(enums.items())))


def verify_each_change(old: Manifest, new: Manifest, result: Diff,
                       transports: Iterable[str] = TRANSPORTS) -> list[Exchange]:
    """One Exchange per changed subject (struct or enum in both releases), direction and
    transport: `message` names the subject, the evidence names the message that carried it."""
    subjects = sorted({c.subject for c in result.changes}
                      & ((set(old.structs) & set(new.structs)) | (set(old.enums) & set(new.enums))))
    sides = {"old": VersionSide(catalogue_for(old)), "new": VersionSide(catalogue_for(new))}
    out = []
    for subject in subjects:
        changes = [c for c in result.changes if c.subject == subject]
        for direction in ("backward", "forward"):
            writer = sides["old"] if direction == "backward" else sides["new"]
            other = new if direction == "backward" else old
            reader = VersionSide(catalogue_for(hybrid(writer.manifest, other, subject)),
                                 reexports=direction == "backward", modules=other.modules)
            carriers = [m.name for m in writer.manifest.messages if subject in reach(writer.manifest, m.name)]
            for transport in transports:
                level = meet(*(getattr(c, transport) for c in changes))
                bad = sorted({c.rule for c in changes if direction_of(direction) not in compat(getattr(c, transport))})
                outcome, evidence = _worst(writer, reader, carriers, transport)
                out.append(Exchange(subject, direction, transport, outcome, evidence, level, bad))
    return out


def _worst(writer: VersionSide, reader: VersionSide, carriers: list[str], transport: str) -> tuple[str, str]:
    """The first silent exchange over the carrying messages, else the first loud one, else ok."""
    loud = None
    for message in carriers:
        outcome, evidence = exchange(writer, reader, message, transport)
        if outcome == SILENT:
            return outcome, f"via {message}: {evidence}"
        if outcome == LOUD and loud is None:
            loud = (outcome, f"via {message}: {evidence}")
    if not carriers:
        return OK, "no message carries it"
    return loud or (OK, "")
