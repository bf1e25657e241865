"""What changes in the golden vectors between two manifests, for a reviewer.

    ipc-conformance golden diff OLD NEW

Per message and variant: the bytes (size, SHA-256, first differing byte) and the decoded
values, field by field, only the fields that changed; messages and cases added or removed.
A vector that did not change prints nothing. NEW need not be bundled: its vectors are built
in memory. `golden update` prints the same review of what it rewrote, against what was on disk.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional

from conformance.schema.golden.store import cases, index_file, read_index, require_wire
from conformance.schema.manifest import Manifest

__all__ = [
    "ABSENT", "FieldChange", "GoldenDiff", "Vector", "VectorChange", "diff_vectors", "files_vectors", "golden_diff",
    "index_lines", "manifest_vectors", "recorded_vectors", "refusal_lines", "render_text", "snapshot",
    "update_review",
]


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


#: The side of a FieldChange where the field (or list item) does not exist.
ABSENT: Any = _Absent()


@dataclass(frozen=True)
class Vector:
    """One case as a reviewer sees it: the exact bytes and the JSON view of the value."""

    msgpack: bytes
    view: Any

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.msgpack).hexdigest()


CaseKey = tuple[str, str]  # (struct, variant)


@dataclass(frozen=True)
class FieldChange:
    path: str  # inside the message: `rid`, `weight_versions[0].start`, `$struct` for a renamed class
    old: Any   # JSON view, or ABSENT
    new: Any


@dataclass(frozen=True)
class VectorChange:
    struct: str
    variant: str
    old_size: int
    new_size: int
    old_sha256: str
    new_sha256: str
    first_difference: Optional[int]  # byte offset; None when the bytes are equal
    fields: tuple[FieldChange, ...]  # empty when the views are equal

    @property
    def bytes_changed(self) -> bool:
        return self.old_sha256 != self.new_sha256


@dataclass(frozen=True)
class GoldenDiff:
    old: str
    new: str
    changed: tuple[VectorChange, ...] = ()
    added_messages: tuple[str, ...] = ()    # every case of these is new
    removed_messages: tuple[str, ...] = ()
    added_cases: tuple[CaseKey, ...] = ()   # new cases of messages both sides have
    removed_cases: tuple[CaseKey, ...] = ()
    unchanged: int = 0
    cases_per_message: Mapping[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.changed or self.added_messages or self.removed_messages
                    or self.added_cases or self.removed_cases)

    def summary(self) -> str:
        if self.empty:
            return f"golden diff {self.old} -> {self.new}: no change ({self.unchanged} vectors unchanged)"
        parts = [f"{len(self.changed)} changed"]
        for count, word in ((len(self.added_messages), "added message"),
                            (len(self.removed_messages), "removed message"),
                            (len(self.added_cases), "added case"), (len(self.removed_cases), "removed case")):
            if count:
                parts.append(f"{count} {word}{'s' if count != 1 else ''}")
        parts.append(f"{self.unchanged} unchanged")
        return f"golden diff {self.old} -> {self.new}: " + ", ".join(parts)


def manifest_vectors(manifest: Manifest) -> dict[CaseKey, Vector]:
    """Every case of the manifest, built in memory (the manifest need not be bundled)."""
    return {(c.struct, c.variant): Vector(c.msgpack, c.view) for c in cases(manifest)}


def recorded_vectors(manifest_id: str, root: Path) -> Optional[dict[CaseKey, Vector]]:
    """The cases golden/ holds for a manifest (None: no index). Reads golden format 1 too
    (file names relative to the manifest's folder), so the update that migrates can be reviewed."""
    index = read_index(manifest_id, root)
    if index is None:
        return None
    base = root / manifest_id if index.get("format") == 1 else root
    out: dict[CaseKey, Vector] = {}
    for c in index.get("cases", []):
        msgpack_path, view_path = base / c["msgpack"], base / c["view"]
        if not msgpack_path.is_file() or not view_path.is_file():
            continue  # check reports the missing file; the review shows the case as added
        out[(c["struct"], c["variant"])] = Vector(msgpack_path.read_bytes(),
                                                  json.loads(view_path.read_text())["value"])
    return out


def files_vectors(manifest_id: str, files: Mapping[str, bytes]) -> dict[CaseKey, Vector]:
    """The cases a manifest's golden files hold ({path relative to golden/: content}, its
    index among them); a case whose files are not there is left out."""
    index = json.loads(files[index_file(manifest_id)])
    out = {}
    for c in index.get("cases", []):
        if c["msgpack"] in files and c["view"] in files:
            out[(c["struct"], c["variant"])] = Vector(files[c["msgpack"]], json.loads(files[c["view"]])["value"])
    return out


def _header_changes(name: str, old: dict[str, Any], new: dict[str, Any]) -> Iterator[str]:
    def show(key: str, value: Any) -> str:
        text = json.dumps(value)
        return text[:17] + '..."' if key.endswith("sha256") and isinstance(value, str) else text

    for key in [*old, *(k for k in new if k not in old)]:
        if key != "cases" and old.get(key) != new.get(key):
            yield f"~ {name}: {key}: {show(key, old.get(key))} -> {show(key, new.get(key))}"


def index_lines(manifest_id: str, stored: Mapping[str, bytes], received: Mapping[str, bytes],
                old_name: Optional[str] = None, new_name: str = "the encoder") -> list[str]:
    """What a manifest's index changes in meaning, stored -> received (both {path relative to
    golden/: content}, the index among them): per changed case its fields, old -> new value
    (render_text), then the index's own members (manifest_sha256, variants, ...)."""
    idx = index_file(manifest_id)
    try:
        review = diff_vectors(old_name or f"golden/{manifest_id}", files_vectors(manifest_id, stored), new_name,
                              files_vectors(manifest_id, received))
        lines = render_text(review).splitlines()
        lines += _header_changes(idx, json.loads(stored[idx]), json.loads(received[idx]))
    except (ValueError, KeyError, TypeError) as exc:
        lines = [f"~ {idx}: not readable as an index ({exc})"]
    return lines


def refusal_lines(name: str, old_text: Optional[bytes], new_text: Optional[bytes]) -> Iterator[str]:
    """What a refusals.json changes: its header members, the refusals added, removed, changed."""
    if old_text == new_text:
        return
    if old_text is None or new_text is None:
        yield f"{'+' if old_text is None else '-'} {name}"
        return
    old, new = json.loads(old_text), json.loads(new_text)
    yield from _header_changes(name, old, new)
    before = {c["id"]: c for c in old.get("cases", [])}
    after = {c["id"]: c for c in new.get("cases", [])}
    added = [i for i in after if i not in before]
    removed = [i for i in before if i not in after]
    changed = [i for i in after if i in before and before[i] != after[i]]
    for word, ids in (("added", added), ("removed", removed), ("changed", changed)):
        if ids:
            shown = ", ".join(ids[:6]) + (f" and {len(ids) - 6} more" if len(ids) > 6 else "")
            yield f"~ {name}: {len(ids)} refusal{'s' if len(ids) != 1 else ''} {word}: {shown}"


def golden_diff(old: Manifest, new: Manifest) -> GoldenDiff:
    """The vector changes from old to new, both built in memory from the manifests."""
    require_wire(old), require_wire(new)
    return diff_vectors(old.id, manifest_vectors(old), new.id, manifest_vectors(new))


def diff_vectors(old_name: str, old: Mapping[CaseKey, Vector], new_name: str,
                 new: Mapping[CaseKey, Vector]) -> GoldenDiff:
    old_messages, new_messages = {s for s, _ in old}, {s for s, _ in new}
    added_messages = new_messages - old_messages
    removed_messages = old_messages - new_messages
    changed, unchanged = [], 0
    for key in [k for k in new if k in old]:
        change = _vector_change(key, old[key], new[key])
        if change is None:
            unchanged += 1
        else:
            changed.append(change)
    per_message: dict[str, int] = {}
    for s, _ in [*old, *new]:
        per_message[s] = per_message.get(s, 0) + 1
    return GoldenDiff(
        old=old_name, new=new_name, changed=tuple(changed),
        added_messages=tuple(sorted(added_messages)), removed_messages=tuple(sorted(removed_messages)),
        added_cases=tuple(k for k in new if k not in old and k[0] not in added_messages),
        removed_cases=tuple(k for k in old if k not in new and k[0] not in removed_messages),
        unchanged=unchanged,
        cases_per_message={s: sum(1 for k in (new if s in added_messages else old) if k[0] == s)
                           for s in added_messages | removed_messages},
    )


def _vector_change(key: CaseKey, old: Vector, new: Vector) -> Optional[VectorChange]:
    fields = tuple(_field_changes("", old.view, new.view))
    if old.msgpack == new.msgpack and not fields:
        return None
    first = None
    if old.msgpack != new.msgpack:
        first = next((i for i, (a, b) in enumerate(zip(old.msgpack, new.msgpack)) if a != b),
                     min(len(old.msgpack), len(new.msgpack)))
    return VectorChange(key[0], key[1], len(old.msgpack), len(new.msgpack), old.sha256, new.sha256, first, fields)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _field_changes(path: str, old: Any, new: Any) -> list[FieldChange]:
    """The smallest parts of two views that differ: into structs of one class field by field,
    into lists of one length item by item; anything else is compared whole."""
    if _same(old, new):
        return []
    if isinstance(old, dict) and isinstance(new, dict) and "$struct" in old and "$struct" in new:
        out = [] if old["$struct"] == new["$struct"] else [FieldChange(_join(path, "$struct"), old["$struct"],
                                                                       new["$struct"])]
        names = [k for k in old if k != "$struct"] + [k for k in new if k != "$struct" and k not in old]
        for name in names:
            out += _field_changes(_join(path, name), old.get(name, ABSENT), new.get(name, ABSENT))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [c for i, (a, b) in enumerate(zip(old, new)) for c in _field_changes(f"{path}[{i}]", a, b)]
    return [FieldChange(path or "$", old, new)]


def _same(old: Any, new: Any) -> bool:
    # JSON-level equality that keeps 1 and 1.0 (and True and 1) apart, as the view does.
    if old is ABSENT or new is ABSENT:
        return old is new
    return json.dumps(old) == json.dumps(new)


def snapshot(manifest_ids: Iterable[str], root: Path) -> dict[str, Optional[dict[CaseKey, Vector]]]:
    """What golden/ holds for each manifest now: take it before `update`, review after."""
    return {mid: recorded_vectors(mid, root) for mid in manifest_ids}


def update_review(before: Mapping[str, Optional[Mapping[CaseKey, Vector]]], root: Path) -> list[GoldenDiff]:
    """Per manifest, what an update changed: its vectors on disk before against after. A manifest
    that had none is compared with the newest older bundled release of its implementation."""
    from conformance.schema.diff import older_manifests
    from conformance.schema.manifest import load_manifest

    out = []
    for mid, old in before.items():
        new = recorded_vectors(mid, root) or {}
        if old is not None:
            out.append(diff_vectors(f"{mid} (before)", old, mid, new))
            continue
        base = next((m.id for m in reversed(older_manifests(load_manifest(mid)))
                     if read_index(m.id, root) is not None), None)
        base_vectors = recorded_vectors(base, root) if base else None
        out.append(diff_vectors(base or "(no golden vectors)", base_vectors or {}, mid, new))
    return out


# -- text -----------------------------------------------------------------------------
def _show(view: Any, width: int = 100) -> str:
    if view is ABSENT:
        return "(absent)"
    text = json.dumps(view, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render_text(result: GoldenDiff, fields: Optional[int] = 12) -> str:
    """The review: a summary line first, then nothing for a vector that did not change, and at
    most `fields` changed fields per case (None: all). The canonical values follow field
    positions, so a field inserted into an array_like struct renumbers every value after it."""
    if result.empty:
        return result.summary() + "\n"
    lines = [result.summary()]
    for name in result.added_messages:
        lines.append(f"+ {name}: new message ({_plural(result.cases_per_message.get(name, 0), 'case')})")
    for name in result.removed_messages:
        lines.append(f"- {name}: removed message ({_plural(result.cases_per_message.get(name, 0), 'case')})")
    lines += [f"+ {s}.{v}: new case" for s, v in result.added_cases]
    lines += [f"- {s}.{v}: removed case" for s, v in result.removed_cases]
    for c in result.changed:
        if c.bytes_changed:
            delta = c.new_size - c.old_size
            lines.append(f"~ {c.struct}.{c.variant}: {c.old_size} -> {c.new_size} bytes ({delta:+d}), sha256 "
                         f"{c.old_sha256[:16]} -> {c.new_sha256[:16]}, first difference at byte {c.first_difference}")
        else:
            lines.append(f"~ {c.struct}.{c.variant}: same {c.new_size} bytes (sha256 {c.new_sha256[:16]}), "
                         "another value")
        # fields that exist on one side only (added, removed) first: they are the change itself
        ordered = sorted(c.fields, key=lambda f: not (f.old is ABSENT or f.new is ABSENT))
        shown = ordered if fields is None else ordered[:fields]
        for f in shown:
            lines.append(f"    {f.path}: {_show(f.old)} -> {_show(f.new)}")
        if len(shown) < len(c.fields):
            lines.append(f"    ... and {len(c.fields) - len(shown)} more changed fields (the values follow field "
                         f"positions: an inserted field renumbers those after it; all: --fields 0)")
    return "\n".join(lines) + "\n"
