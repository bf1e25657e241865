"""Structs renamed between two catalogues. Used by the migration report and by schema diff (a
renamed message is a new tag, and pickle names the class).

A struct only in the old catalogue and one only in the new of the same role are one struct under
two names when either:

- their names are similar (one extends the other, or close) and they share fields of their own:
  at least half of the smaller side's (a rename across releases often comes with new fields and
  a new base class, whose fields do not count); two structs with no fields of their own (a
  message that only carries its base's) pair on a close name alone;
- or an alias line says so: a name the old catalogue module binds to the old struct is bound to
  the new one in the new module (`LoadLoRAAdapterReqOutput = LoRAUpdateResult` in 0.4.10,
  `LoadLoRAAdapterReqOutput = LoRAUpdateOutput` in 0.5.23), or one side names the other
  (`OldName = NewName` kept for compatibility). Aliases come from extraction
  (`extracted_with["aliases"]`).

Best match first: alias evidence, then the share of fields in common, then name similarity.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Iterable

from conformance.schema.manifest import Manifest
from conformance.schema.manifest.model import aliases_of

__all__ = ["struct_renames"]

_CLOSE = 0.8  # SequenceMatcher ratio of two names of one struct


def _ratio(a: str, b: str) -> float:
    return SequenceMatcher(None, a, b).ratio()


def _similar(a: str, b: str) -> bool:
    """Names of one struct across a rename: one extends the other, or they are close."""
    return a.startswith(b) or b.startswith(a) or _ratio(a, b) >= _CLOSE


def _aliased(source: Manifest, target: Manifest) -> set[tuple[str, str]]:
    """(old, new) pairs an alias line ties together."""
    old, new = aliases_of(source), aliases_of(target)
    pairs = {(old[n], new[n]) for n in old.keys() & new.keys()}
    pairs |= {(name, new[name]) for name in new if name in source.structs}  # OldName = NewName in the new
    pairs |= {(old[name], name) for name in old if name in target.structs}  # NewName = OldName in the old
    return pairs


def struct_renames(source: Manifest, target: Manifest, skip: Iterable[str] = ()) -> dict[str, str]:
    """Structs only in `source` paired with structs only in `target` (see the module's doc).
    `skip`: names never paired."""
    skipped = set(skip)
    gone = [n for n in source.structs if n not in target.structs and n not in skipped]
    new = [n for n in target.structs if n not in source.structs]
    aliased = _aliased(source, target)
    scored = []
    for a in gone:
        fa = _own_fields(source, a)
        for b in new:
            if source.structs[a].role != target.structs[b].role:
                continue
            fb = _own_fields(target, b)
            shared = len(fa & fb)
            by_alias = (a, b) in aliased
            by_fields = _similar(a, b) and (shared * 2 >= min(len(fa), len(fb)) if fa and fb else
                                            not fa and not fb and _ratio(a, b) >= _CLOSE)
            if by_alias or by_fields:
                scored.append((not by_alias, -shared / max(len(fa | fb), 1), -_ratio(a, b), a, b))
    pairs: dict[str, str] = {}
    for *_, a, b in sorted(scored):
        if a not in pairs and b not in pairs.values():
            pairs[a] = b
    return pairs


def _own_fields(manifest: Manifest, name: str) -> set[str]:
    spec = manifest.structs[name]
    base = manifest.structs.get(spec.base or "")
    inherited = {f.name for f in base.fields} if base else set()
    return {f.name for f in spec.fields} - inherited
