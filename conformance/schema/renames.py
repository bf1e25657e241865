"""Structs renamed between two catalogues, paired the way fields are: a similar name and mostly
the same fields. Used by the migration report and by schema diff (a renamed message is a new tag)."""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Iterable

from conformance.schema.manifest import Manifest

__all__ = ["struct_renames"]


def _similar(a: str, b: str) -> bool:
    """Names of one struct across a rename: one extends the other, or they are close."""
    return a.startswith(b) or b.startswith(a) or SequenceMatcher(None, a, b).ratio() >= 0.8


def struct_renames(source: Manifest, target: Manifest, skip: Iterable[str] = ()) -> dict[str, str]:
    """Structs only in `source` paired with structs only in `target` of the same role, a similar
    name and mostly the same fields of their own (at least half of each side's names shared;
    fields from a base class do not count: a rename often comes with a new base), best match first.
    `skip`: names never paired."""
    gone = [n for n in source.structs if n not in target.structs and n not in set(skip)]
    new = [n for n in target.structs if n not in source.structs]
    scored = []
    for a in gone:
        fa = _own_fields(source, a)
        for b in new:
            fb = _own_fields(target, b)
            shared = len(fa & fb)
            if (_similar(a, b) and source.structs[a].role == target.structs[b].role
                    and shared * 2 >= max(len(fa), len(fb), 1)):
                scored.append((-shared / max(len(fa | fb), 1), a, b))
    pairs: dict[str, str] = {}
    for _, a, b in sorted(scored):
        if a not in pairs and b not in pairs.values():
            pairs[a] = b
    return pairs


def _own_fields(manifest: Manifest, name: str) -> set[str]:
    spec = manifest.structs[name]
    base = manifest.structs.get(spec.base or "")
    inherited = {f.name for f in base.fields} if base else set()
    return {f.name for f in spec.fields} - inherited
