"""The migration report: what moving a dataclass catalogue (sent with pickle, as SGLang did
before its msgspec migration) onto a msgspec catalogue costs, struct by struct.

    ipc-conformance manifest extract my_fork.io_struct --out fork.json   # dataclasses extract too
    ipc-conformance schema diff fork.json sglang-0.5.23                 # prints this report

Reported: structs missing on each side; per struct in both, fields to add, to remove, possibly
renamed (one removed and one added field of the same type), retyped, and defaults changed;
enum members that differ; and the fields whose values have no msgpack form (a Python object
of a class the manifest cannot describe, or an untyped Any) with what the target declares
there: a PickleWrapper, or a precise type to convert to.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Optional

from conformance.schema.diff import diff
from conformance.schema.manifest import Manifest, StructSpec, parse
from conformance.schema.renames import struct_renames

__all__ = ["FieldNote", "Migration", "StructMigration", "is_dataclass_catalogue", "migration", "render_text"]

_ADDED = ("field-added-with-default", "field-added-without-default", "field-appended-with-default",
          "field-appended-without-default", "field-inserted")
_REMOVED = ("field-removed", "field-removed-last")
_RETYPED = ("type-respelled", "type-widened", "type-narrowed", "type-changed", "ext-code-changed")
_DEFAULTS = ("default-added", "default-removed", "default-changed")
_PYTHON = "python:"


def is_dataclass_catalogue(manifest: Manifest) -> bool:
    return manifest.is_dataclass_catalogue


@dataclass
class FieldNote:
    """A field whose values have no msgpack form, and what the target declares for it."""

    struct: str
    field: str
    holds: str  # "python:<module>.<class>" or the untyped type
    target: Optional[str]  # the target's type for the field, None when it has no such field

    def line(self) -> str:
        what = (f"holds {self.holds[len(_PYTHON):]} objects" if self.holds.startswith(_PYTHON)
                else f"is untyped ({self.holds})")
        if self.target is None:
            advice = "the target has no such field: wrap it in a PickleWrapper or give it a precise type"
        elif "PickleWrapper" in self.target:
            advice = f"the target wraps it: {self.target}"
        elif "Any" in self.target:
            advice = f"the target keeps it untyped too ({self.target}): only plain data crosses msgpack"
        else:
            advice = f"convert to the target's type {self.target}"
        return f"{self.struct}.{self.field} {what}: {advice}"


@dataclass
class StructMigration:
    name: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    renamed: list[str] = field(default_factory=list)
    retyped: list[str] = field(default_factory=list)
    defaults: list[str] = field(default_factory=list)
    struct_renamed: Optional[str] = None  # "OldName -> NewName": one struct under two names

    def empty(self) -> bool:
        return not (self.added or self.removed or self.renamed or self.retyped or self.defaults
                    or self.struct_renamed)


@dataclass
class Migration:
    source: str
    target: str
    only_source: dict[str, list[str]]  # role -> struct names found only in the dataclass catalogue
    only_target: dict[str, list[str]]
    structs: list[StructMigration]
    enums: list[str]
    no_msgpack_form: list[FieldNote]
    source_era: str = "dataclasses, pickle"
    target_era: str = "msgspec structs"
    http_side: list[str] = field(default_factory=list)  # in the source, not IPC: they stay dataclasses


def _untyped(type_text: str) -> bool:
    return any(n.kind == "Any" for n in parse(type_text).walk())


def _notes(source: Manifest, target: Manifest) -> list[FieldNote]:
    notes = []
    for spec in source.structs.values():
        other = target.structs.get(spec.name)
        for f in spec.fields:
            python = [a for a in f.annotations if a.startswith(_PYTHON)]
            if not python and not _untyped(f.type):
                continue
            target_type = next((g.type for g in other.fields if g.name == f.name), None) if other else None
            notes.append(FieldNote(spec.name, f.name, python[0] if python else f.type, target_type))
    return notes


def _renames(spec: StructMigration, old: StructSpec, new: StructSpec) -> None:
    """Pair a removed and an added field of the same type when each is the only one of it."""
    old_t = {f.name: f.type for f in old.fields}
    new_t = {f.name: f.type for f in new.fields}
    removed = [n for n in old_t if n not in new_t]
    added = [n for n in new_t if n not in old_t]
    for a in removed:
        same = [b for b in added if new_t[b] == old_t[a]]
        if len(same) == 1 and [r for r in removed if old_t[r] == old_t[a]] == [a]:
            spec.renamed.append(f"{a} -> {same[0]} ({old_t[a]})")
            spec.removed = [r for r in spec.removed if not r.startswith(a + ":")]
            spec.added = [x for x in spec.added if not x.startswith(same[0] + ":")]


_HTTP_SIDE = {"GenerateReqInput", "EmbeddingReqInput"}  # HTTP-side request objects, never sent over IPC


def _era(m: Manifest) -> str:
    return "dataclasses, pickle" if is_dataclass_catalogue(m) else "msgspec structs"


def _renamed_as(manifest: Manifest, renames: dict[str, str]) -> Manifest:
    """The manifest with each struct renamed (and the fields that name it retyped)."""
    import re

    import msgspec

    if not renames:
        return manifest
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, renames)) + r")\b")
    structs = {}
    for name, spec in manifest.structs.items():
        fields = [msgspec.structs.replace(f, type=pattern.sub(lambda m: renames[m.group(1)], f.type))
                  for f in spec.fields]
        new_name = renames.get(name, name)
        structs[new_name] = msgspec.structs.replace(spec, name=new_name, fields=fields,
                                                    base=renames.get(spec.base, spec.base) if spec.base else None)
    return msgspec.structs.replace(manifest, structs=structs,
                                   union=[renames.get(u, u) for u in manifest.union])


def _only_typecode(detail: str) -> bool:
    """`Array` -> `Array[q]`: an older manifest left the typecode out; q is the default
    (spec/SPEC.md §4), so the field is not retyped."""
    spelled = detail.split(": ", 1)[-1].split(" (position")[0].replace("Array[q]", "Array")
    old, _, new = spelled.partition(" -> ")
    return "Array" in detail and old.strip() == new.strip()


def migration(source: Manifest, target: Manifest) -> Migration:
    """What it takes to move the catalogue `source` onto `target` (one of them dataclasses)."""
    renames = struct_renames(source, target, skip=_HTTP_SIDE)
    source = _renamed_as(original := source, renames)
    result = diff(source, target, modules=False)
    by_struct: dict[str, StructMigration] = {}
    enums: list[str] = []
    common = set(source.structs) & set(target.structs)
    for c in result.changes:
        if c.subject in source.enums or c.subject in target.enums:
            enums.append(f"{c.subject}: {c.rule}: {c.detail}")
            continue
        if c.subject not in common:
            continue
        entry = by_struct.setdefault(c.subject, StructMigration(c.subject))
        text = c.detail.split(" (position")[0]
        if c.rule in _ADDED:
            entry.added.append(text if " = " in text else text + "  (required: every sender must fill it)")
        elif c.rule in _REMOVED:
            entry.removed.append(text)
        elif c.rule in _RETYPED:
            if not _only_typecode(c.detail):
                entry.retyped.append(text)
        elif c.rule in _DEFAULTS:
            entry.defaults.append(text)
    for name, entry in by_struct.items():
        _renames(entry, source.structs[name], target.structs[name])
    back = {b: a for a, b in renames.items()}
    for b, a in back.items():
        entry = by_struct.setdefault(b, StructMigration(b))
        entry.struct_renamed = f"{a} -> {b}"
        entry.name = f"{a} -> {b}"

    def only(a: Manifest, b: Manifest) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for spec in a.structs.values():
            if spec.name not in b.structs:
                out.setdefault(spec.role, []).append(spec.name)
        return out

    only_source = only(source, target)
    http = sorted(n for names in only_source.values() for n in names if n in _HTTP_SIDE)
    only_source = {role: [n for n in names if n not in _HTTP_SIDE] for role, names in only_source.items()}
    return Migration(original.id, target.id, {r: n for r, n in only_source.items() if n}, only(target, source),
                     [by_struct[n] for n in sorted(by_struct) if not by_struct[n].empty()], enums,
                     _notes(source, target), _era(original), _era(target), http)


def _names(names: list[str]) -> list[str]:
    return textwrap.wrap(", ".join(sorted(names)), 96, initial_indent="    ", subsequent_indent="    ")


def render_text(m: Migration) -> str:
    lines = [f"migration report {m.source} ({m.source_era}) -> {m.target} ({m.target_era})"]
    if m.target_era == "msgspec structs":
        lines.append("every struct becomes a msgspec.Struct (tagged, array_like on msgpack): field order is then "
                     "wire format, so append new fields at the end, with a default")
    else:
        lines.append("every struct becomes a dataclass sent with pickle: msgpack peers are lost")
    if m.http_side:
        lines.append(f"HTTP-side, not IPC: stays a dataclass: {', '.join(m.http_side)}")
    for title, groups in ((f"only in {m.source} (drop them, or add them to the new catalogue)", m.only_source),
                          (f"only in {m.target} (new to this catalogue)", m.only_target)):
        for role, names in sorted(groups.items()):
            lines.append(f"{role} structs {title}: {len(names)}")
            lines += _names(names)
    lines.append("")
    lines.append(f"fields with no msgpack form: {len(m.no_msgpack_form)}")
    lines += [f"  ! {n.line()}" for n in m.no_msgpack_form]
    for s in m.structs:
        lines.append("")
        lines.append(s.name + ("  (renamed struct: a similar name and shared fields, or an alias line; a new wire tag)"
                               if s.struct_renamed else ""))
        for mark, title, items in (("+", "add", s.added), ("-", "remove", s.removed),
                                   ("~", "renamed?", s.renamed), ("~", "retype", s.retyped),
                                   ("~", "default", s.defaults)):
            lines += [f"  {mark} {title}: {item}" for item in items]
    if m.enums:
        lines.append("")
        lines.append("enums")
        lines += [f"  ~ {e}" for e in m.enums]
    return "\n".join(lines) + "\n"
