"""Schema diff: every change between two manifests, in plain words, under a named rule,
classified for array_like msgpack peers and, separately, for pickle peers.

    ipc-conformance schema diff OLD NEW [--check MODE] [--peers P] [--transitive] [--format json]

OLD and NEW are manifest files, bundled ids (sglang-0.5.22), or live catalogues
(`reference`, `sglang`, `live:<module>`). Classification (spec/SPEC.md, "Compatibility"):

    FULL      BACKWARD and FORWARD
    BACKWARD  a reader with the NEW schema decodes everything a writer with the OLD one sends
    FORWARD   a reader with the OLD schema decodes everything a writer with the NEW one sends
    BREAKING  neither

The whole change is the intersection of its parts. For array_like structs the position
of a field IS the wire format, so every rule is double-checked position by position.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Optional

from conformance.schema.manifest import Manifest, StructSpec, T, bundled_manifests, load_manifest, parse
from conformance.schema.manifest.model import Field
from conformance.schema.renames import struct_renames

__all__ = [
    "Change", "Compat", "Diff", "FULL", "BACKWARD", "FORWARD", "BREAKING", "MODES", "RULES",
    "allowed", "compat", "meet", "diff", "older_manifests", "render_text",
]


# -- classifications: the set of directions that still work -------------------------
class Compat(enum.Flag):
    """A classification as the set of directions that still work; its name is the level."""

    BREAKING = 0
    BACKWARD = enum.auto()  # a reader with the NEW schema decodes what a writer with the OLD one sends
    FORWARD = enum.auto()  # a reader with the OLD schema decodes what a writer with the NEW one sends
    FULL = BACKWARD | FORWARD


#: The level names, as changes, reports and JSON carry them.
FULL, BACKWARD, FORWARD, BREAKING = (str(c.name) for c in (Compat.FULL, Compat.BACKWARD, Compat.FORWARD,
                                                           Compat.BREAKING))
MODES = ("FULL", "BACKWARD", "FORWARD", "NONE")


def compat(level: str) -> Compat:
    """The directions a level name allows (KeyError for a name that is no level)."""
    return Compat[level]


def meet(*levels: str) -> str:
    """The level of a change made of parts at these levels: the directions all of them allow."""
    dirs = Compat.FULL
    for level in levels:
        dirs &= Compat[level]
    return str(dirs.name)


def allowed(level: str, mode: str) -> bool:
    """Does a change classified `level` pass `--check mode`?"""
    if mode == "NONE":
        return True
    return Compat[mode] in Compat[level]


# -- the rules --------------------------------------------------------------------
RULES: dict[str, str] = {
    "struct-added": "a struct that is not a message was added (reached through a field)",
    "struct-removed": "a struct that is not a message was removed",
    "message-added": "a message joined the top-level union: old receivers reject its tag",
    "message-removed": "a message left the top-level union: new receivers reject the tag old senders still send "
                       "(breaking for every peer that still sends it; that new senders never send it is no "
                       "compatibility)",
    "message-renamed": "a message's class was renamed, its fields alike (paired as renamed fields are): pickle "
                       "names the class, so neither version unpickles the other's; its tag changes with it "
                       "unless set explicitly (tag-changed)",
    "primitive-added": "a primitive joined the top-level union",
    "primitive-removed": "a primitive left the top-level union",
    "tag-changed": "the wire tag of a struct changed: receivers on the other version reject it",
    "encoding-changed": "a struct switched between array_like (positions) and map (names) encoding",
    "option-changed": "a struct option changed",
    "base-changed": "a struct moved in the class hierarchy (its fields are compared as they are)",
    "class-moved": "the Python module of a class changed (pickle names classes by module)",
    "field-appended-with-default": "a field was added after every existing field, with a default",
    "field-appended-without-default": "a field was added after every existing field, without a default",
    "field-inserted": "a field was added before an existing field: later positions shift",
    "field-added-with-default": "a field was added to a map-encoded struct, with a default",
    "field-added-without-default": "a field was added to a map-encoded struct, without a default",
    "field-removed-last": "the last field was removed",
    "field-removed": "a field that is not the last was removed: later positions shift",
    "fields-reordered": "fields that exist in both versions changed their order",
    "field-renamed": "a field changed its name at the same position, with the same type",
    "type-respelled": "a field type changed spelling but accepts exactly the same wire values",
    "type-widened": "a field type accepts more than before (new readers read old data)",
    "int-to-float": "ints became floats: a msgpack reader decodes an int beyond 2**53 (int64 bounds included) to "
                    "the nearest float64 without an error, so no direction is safe on msgpack; pickle keeps the "
                    "int object (new readers read old data)",
    "float-to-int": "floats became ints: an old msgpack reader decodes a new int beyond 2**53 to the nearest "
                    "float64 without an error, new readers reject old floats; pickle keeps the int object "
                    "(old readers read new data)",
    "type-narrowed": "a field type accepts less than before (old readers read new data)",
    "type-changed": "a field type changed incompatibly",
    "ext-code-changed": "a field switched between extension types (1 array, 2 tensor, 3 ndarray)",
    "default-added": "a required field got a default",
    "default-removed": "a field lost its default (it is required now)",
    "default-changed": "the default of a field changed",
    "fields-shifted": "values land in other fields than their writer meant (position check)",
    "enum-added": "an enum was added",
    "enum-removed": "an enum was removed",
    "enum-member-added": "an enum gained a value: old readers reject it",
    "enum-member-removed": "an enum lost a value: new readers reject it",
    "enum-member-renamed": "an enum member changed its name but kept its value (the wire carries values)",
    "enum-member-value-changed": "an enum member kept its name but changed its value",
}

_NO_WIRE_OPTIONS = {"frozen", "eq", "order", "dict", "weakref", "gc", "cache_hash", "repr_omit_defaults"}


@dataclass
class Change:
    rule: str
    subject: str  # struct or enum name; "<union>" for the top-level union
    detail: str
    msgpack: str
    pickle: str
    field: Optional[str] = None

    def line(self) -> str:
        return f"{self.rule}: {self.detail}  [msgpack {self.msgpack}, pickle {self.pickle}]"


@dataclass
class Diff:
    old: str
    new: str
    changes: list[Change] = field(default_factory=list)
    # nested struct -> the messages whose bytes carry it (in either version)
    carried_by: dict[str, list[str]] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)  # message old name -> new name

    @property
    def msgpack(self) -> str:
        return meet(*(c.msgpack for c in self.changes))

    @property
    def pickle(self) -> str:
        return meet(*(c.pickle for c in self.changes))

    def level(self, peers: str) -> str:
        if peers == "msgpack":
            return self.msgpack
        if peers == "pickle":
            return self.pickle
        return meet(self.msgpack, self.pickle)

    def subjects(self) -> dict[str, list[Change]]:
        out: dict[str, list[Change]] = {}
        for c in self.changes:
            out.setdefault(c.subject, []).append(c)
        return out

    def violations(self, mode: str, peers: str) -> list[Change]:
        def level(c: Change) -> str:
            return {"msgpack": c.msgpack, "pickle": c.pickle}.get(peers) or meet(c.msgpack, c.pickle)

        return [c for c in self.changes if not allowed(level(c), mode)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "msgpack": self.msgpack,
            "pickle": self.pickle,
            "subjects": {
                name: {"msgpack": meet(*(c.msgpack for c in cs)), "pickle": meet(*(c.pickle for c in cs)),
                       "changes": [{k: v for k, v in asdict(c).items() if k != "subject" and v is not None}
                                   for c in cs]}
                for name, cs in self.subjects().items()
            },
            "carried_by": {n: m for n, m in self.carried_by.items() if n in self.subjects()},
        }


# -- types: does a reader of type R accept every value a writer of type W sends? -------
_ARRAYS = {"List", "Set", "FrozenSet", "VarTuple"}
_EXT = {"Tensor": 2, "NDArray": 3, "Array": 1}


# floats hold every int up to 2**53 exactly, none beyond it
_EXACT_IN_FLOAT = 2**53


def accepts(reader: T, writer: T, *, pickle: bool = False, lossy: bool = False) -> bool:
    """msgpack (default): judged on decoded wire values, so list/tuple/set are one thing, and an
    int read as float must come back exact (lossy=True forgets that: any int is a float);
    pickle: Python types travel as they are, so container kinds must match (an int stays an int)."""
    if reader.kind == "Any":
        # msgpack: an untyped reader holds a struct or enum as plain data, not what was meant
        return pickle or not writer.refs()
    if writer.kind == "Union":
        return all(accepts(reader, arm, pickle=pickle, lossy=lossy) for arm in writer.args)
    if reader.kind == "Union":
        return any(accepts(arm, writer, pickle=pickle, lossy=lossy) for arm in reader.args)
    if writer.kind == "Literal":
        if reader.kind == "Literal":
            return set(map(json.dumps, writer.values)) <= set(map(json.dumps, reader.values))
        scalar = {str: "str", bool: "bool", int: "int", type(None): "None"}
        return all(scalar.get(type(v)) == reader.kind or (reader.kind == "float" and type(v) is int and (
                   pickle or lossy or abs(v) <= _EXACT_IN_FLOAT)) for v in writer.values)
    if reader.kind == "float" and writer.kind == "int":
        return pickle or lossy
    if reader.kind in _ARRAYS and writer.kind in _ARRAYS:
        if pickle and reader.kind != writer.kind:
            return False
        return accepts(reader.args[0], writer.args[0], pickle=pickle, lossy=lossy)
    if reader.kind in _ARRAYS and writer.kind == "Tuple" and not pickle:
        return all(accepts(reader.args[0], a, pickle=pickle, lossy=lossy) for a in writer.args)
    if reader.kind == "Tuple" and writer.kind == "Tuple":
        return len(reader.args) == len(writer.args) and all(
            accepts(r, w, pickle=pickle, lossy=lossy) for r, w in zip(reader.args, writer.args))
    if reader.kind == "Dict" and writer.kind == "Dict":
        return all(accepts(r, w, pickle=pickle, lossy=lossy) for r, w in zip(reader.args, writer.args))
    if reader.kind == "Array" and writer.kind == "Array":
        return reader.name is None or writer.name is None or reader.name == writer.name
    if reader.kind == "Ref" and writer.kind == "Ref":
        return reader.name == writer.name  # the struct's own changes are judged under its name
    return reader.kind == writer.kind and not reader.args and reader.kind != "Ref"


def _ext_skeleton(t: T) -> tuple[T, tuple[str, ...]]:
    """The type with extension leaves blanked, and those leaves in order."""
    leaves: list[str] = []

    def blank(node: T) -> T:
        if node.kind in _EXT:
            leaves.append(node.kind)
            return T("Any")
        return T(node.kind, tuple(blank(a) for a in node.args), node.values, node.name)

    return blank(t), tuple(leaves)


def _type_level(old: T, new: T, pickle: bool, lossy: bool = False) -> str:
    backward = accepts(new, old, pickle=pickle, lossy=lossy)
    forward = accepts(old, new, pickle=pickle, lossy=lossy)
    return FULL if backward and forward else BACKWARD if backward else FORWARD if forward else BREAKING


# -- structs ------------------------------------------------------------------------
def _default_text(f: Field) -> str:
    d = f.default
    if d.kind == "required":
        return "required"
    if d.kind == "factory":
        return f"{d.factory}()"
    return json.dumps(d.value) if d.kind == "value" else f"{d.value}"


def _has_default(f: Field) -> bool:
    return bool(f.default.kind != "required")


def _field_text(f: Field, index: int) -> str:
    default = "" if not _has_default(f) else f" = {_default_text(f)}"
    return f"{f.name}: {f.type}{default} (position {index})"


def _class_moved(name: str, old_module: str, new_module: str, new_modules: frozenset[str]) -> Change:
    """Pickle names a class by module: an old pickle still loads while the old module exists and
    re-exports the class (0.5.23's schedule_batch.py re-exports Modality); a module the new
    catalogue no longer has cannot, so that move breaks pickle readers of old data."""
    if old_module in new_modules:
        return Change("class-moved", name, f"{old_module} -> {new_module} (old pickles name {old_module}: new "
                      "readers find the class there only while that module re-exports it)", FULL, BACKWARD)
    return Change("class-moved", name, f"{old_module} -> {new_module} ({old_module} is gone: pickles of the "
                  "old version name a module the new one does not have)", FULL, BREAKING)


class _StructDiff:
    def __init__(self, name: str, old: StructSpec, new: StructSpec, out: list[Change],
                 new_modules: frozenset[str] = frozenset(), old_names: frozenset[str] = frozenset()) -> None:
        self.name, self.old, self.new, self.out = name, old, new, out
        self.new_modules, self.old_names = new_modules, old_names
        self.array_like = old.array_like and new.array_like
        self.kw_only = old.options.get("kw_only", False) and new.options.get("kw_only", False)

    def add(self, rule: str, detail: str, msgpack: str, pickle: str, field: Optional[str] = None) -> None:
        self.out.append(Change(rule, self.name, detail, msgpack, pickle, field))

    def run(self) -> None:
        old, new = self.old, self.new
        if old.tag != new.tag:
            self.add("tag-changed", f"tag {old.tag!r} -> {new.tag!r}", BREAKING, FULL)
        if old.tag_field != new.tag_field:
            self.add("tag-changed", f"tag field {old.tag_field!r} -> {new.tag_field!r}", BREAKING, FULL)
        if old.array_like != new.array_like:
            self.add("encoding-changed", f"array_like {old.array_like} -> {new.array_like}", BREAKING, FULL)
        self._options()
        if old.base != new.base:
            self.add("base-changed", f"base {old.base} -> {new.base}", FULL, FULL)
        if old.module != new.module:
            self.out.append(_class_moved(self.name, old.module, new.module, self.new_modules))
        if old.role != new.role and "message" in (old.role, new.role):
            joined = new.role == "message"
            self.add("message-added" if joined else "message-removed",
                     f"{'joined' if joined else 'left'} the top-level union (role {old.role} -> {new.role})",
                     BACKWARD if joined else BREAKING, BACKWARD if joined else BREAKING)
        self._fields()

    def _options(self) -> None:
        keys = sorted((set(self.old.options) | set(self.new.options)) - {"array_like"})
        for key in keys:
            a, b = self.old.options.get(key, False), self.new.options.get(key, False)
            if a == b:
                continue
            what = f"option {key}: {a} -> {b}"
            if key == "kw_only":
                # a kw_only struct pickles as cls(**fields), which a positional class takes too;
                # a positional one as cls(*values), which a kw_only class refuses
                self.add("option-changed", what + " (pickle rebuilds by keyword vs by position: a kw_only reader "
                         "refuses positional pickles)", FULL, FORWARD if b else BACKWARD)
            elif key == "forbid_unknown_fields":
                self.add("option-changed", what + (" (fields appended later will break these readers)" if b else ""),
                         FULL, FULL)
            elif key == "omit_defaults":
                self.add("option-changed", what + " (encoders omit fields equal to their default)", FULL, FULL)
            else:
                self.add("option-changed", what + (" (no wire effect)" if key in _NO_WIRE_OPTIONS else ""), FULL, FULL)

    def _fields(self) -> None:
        old_f, new_f = self.old.fields, self.new.fields
        old_names, new_names = [f.name for f in old_f], [f.name for f in new_f]
        renames: dict[str, str] = {}
        if self.array_like:
            for i in range(min(len(old_f), len(new_f))):
                a, b = old_f[i], new_f[i]
                if a.name != b.name and a.name not in new_names and b.name not in old_names and a.type == b.type:
                    renames[a.name] = b.name
        renamed_to = set(renames.values())
        kept_old = [n for n in old_names if n in new_names or n in renames]
        kept_new = [n for n in new_names if n in old_names or n in renamed_to]

        for i, f in enumerate(new_f):
            if f.name in old_names or f.name in renamed_to:
                continue
            tail = not any(n in kept_new for n in new_names[i + 1:])
            self._added(f, i, tail)
        for i, f in enumerate(old_f):
            if f.name in new_names or f.name in renames:
                continue
            tail = not any(n in kept_old for n in old_names[i + 1:])
            self._removed(f, i, tail)
        for was, now in renames.items():
            i = old_names.index(was)
            self.add("field-renamed", f"{was} -> {now} at position {i} ({old_f[i].type})", FULL,
                     FULL if not self.kw_only else BREAKING, field=now)
        common_old = [n for n in old_names if n in new_names]
        common_new = [n for n in new_names if n in old_names]
        if common_old != common_new:
            moved = [n for n, m in zip(common_old, common_new) if n != m]
            self.add("fields-reordered", f"{', '.join(moved)}: order {common_old.index(moved[0])}.. was "
                     f"[{', '.join(common_old)}], now [{', '.join(common_new)}]",
                     BREAKING if self.array_like else FULL, FULL if self.kw_only else BREAKING)
        for name in common_new:
            self._common(old_f[old_names.index(name)], new_f[new_names.index(name)], new_names.index(name))
        if self.array_like:
            self._positions(renames)

    def _added(self, f: Field, index: int, tail: bool) -> None:
        text = _field_text(f, index)
        if self.array_like:
            if not tail:
                self.add("field-inserted", text, BREAKING, self._pickle_added(f, tail), field=f.name)
                return
            rule = "field-appended-with-default" if _has_default(f) else "field-appended-without-default"
            self.add(rule, text, FULL if _has_default(f) else FORWARD, self._pickle_added(f, tail), field=f.name)
            return
        rule = "field-added-with-default" if _has_default(f) else "field-added-without-default"
        self.add(rule, text, FULL if _has_default(f) else FORWARD, self._pickle_added(f, tail), field=f.name)

    def _pickle_added(self, f: Field, tail: bool) -> str:
        # kw_only structs unpickle as cls(**fields): old classes reject the unknown keyword.
        # Positional ones as cls(*values): old classes reject the extra value.
        if not _has_default(f):
            return BREAKING
        return BACKWARD if (self.kw_only or tail) else BREAKING

    def _removed(self, f: Field, index: int, tail: bool) -> None:
        text = _field_text(f, index)
        pickle = (FORWARD if _has_default(f) else BREAKING) if (self.kw_only or tail) else BREAKING
        if self.array_like and not tail:
            self.add("field-removed", text, BREAKING, pickle, field=f.name)
            return
        self.add("field-removed-last" if self.array_like else "field-removed", text,
                 FULL if _has_default(f) else BACKWARD, pickle, field=f.name)

    def _common(self, a: Field, b: Field, index: int) -> None:
        if a.type != b.type:
            old_t, new_t = parse(a.type), parse(b.type)
            level, pickle = _type_level(old_t, new_t, False), _type_level(old_t, new_t, True)
            if (new_t.refs() - old_t.refs()) - self.old_names and pickle in (FULL, FORWARD):
                # the new type names a class the old release does not have: its pickle readers fail
                pickle = BACKWARD if pickle == FULL else BREAKING
            (sk_a, leaves_a), (sk_b, leaves_b) = _ext_skeleton(old_t), _ext_skeleton(new_t)
            if sk_a == sk_b and leaves_a != leaves_b and leaves_a and leaves_b:
                def codes(ls: tuple[str, ...]) -> str:
                    return "/".join(f"{k} (ext {_EXT[k]})" for k in ls)

                rule = "ext-code-changed"
                detail = f"{a.name}: {a.type} -> {b.type}: {codes(leaves_a)} -> {codes(leaves_b)}"
            elif level != (lenient := _type_level(old_t, new_t, False, lossy=True)):
                # only int -> float stands between this change and a milder verdict
                rule = ("int-to-float" if Compat.BACKWARD in Compat[lenient] & ~Compat[level]
                        else "float-to-int")
                detail = f"{a.name}: {a.type} -> {b.type} (position {index})"
            else:
                rule = {FULL: "type-respelled", BACKWARD: "type-widened", FORWARD: "type-narrowed",
                        BREAKING: "type-changed"}[level]
                detail = f"{a.name}: {a.type} -> {b.type} (position {index})"
            self.add(rule, detail, level, pickle, field=b.name)
        if a.default != b.default:
            omits = not self.array_like and self.new.options.get("omit_defaults", False)
            detail = f"{b.name}: {_default_text(a)} -> {_default_text(b)}"
            if not _has_default(a):
                self.add("default-added", detail, BACKWARD if omits else FULL, FULL, field=b.name)
            elif not _has_default(b):
                self.add("default-removed", detail, FORWARD if omits else FULL, FULL, field=b.name)
            else:
                self.add("default-changed", detail + (" (omit_defaults: a value equal to the writer's default "
                         "is not sent, the reader substitutes its own)" if omits else
                         " (values are always sent; only readers of older writers see it)"),
                         BREAKING if omits else FULL, FULL, field=b.name)
        if a.encode_name != b.encode_name:
            self.add("field-renamed", f"{b.name}: wire name {a.encode_name or a.name} -> {b.encode_name or b.name}",
                     BREAKING if not self.array_like else FULL, FULL, field=b.name)

    def _positions(self, renames: dict[str, str]) -> None:
        """The ground truth for array_like: what each reader finds at each position."""
        old_f, new_f = self.old.fields, self.new.fields

        def same(r: Field, w: Field) -> bool:
            return r.name == w.name or renames.get(r.name) == w.name or renames.get(w.name) == r.name

        def direction(reader: list[Field], writer: list[Field]) -> Optional[str]:
            for i in range(max(len(reader), len(writer))):
                r = reader[i] if i < len(reader) else None
                w = writer[i] if i < len(writer) else None
                if r is None:
                    continue  # extra trailing values are ignored
                if w is None:
                    if not _has_default(r):
                        return f"position {i} ({r.name}) is missing and has no default"
                    continue
                if not same(r, w):
                    return f"position {i} carries {w.name} ({w.type}) where the reader expects {r.name} ({r.type})"
                if not accepts(parse(r.type), parse(w.type)):
                    return f"position {i} ({r.name}) carries {w.type}, the reader expects {r.type}"
            return None

        backward, forward = direction(new_f, old_f), direction(old_f, new_f)
        level = meet(*(FORWARD if backward else FULL,), *(BACKWARD if forward else FULL,))
        mine = meet(*(c.msgpack for c in self.out if c.subject == self.name))
        if Compat[level] in Compat[mine] and level != mine:  # strictly fewer directions than the rest say
            reasons = "; ".join(filter(None, [backward and f"new readers: {backward}",
                                              forward and f"old readers: {forward}"]))
            self.add("fields-shifted", reasons, level, FULL)


def _carriers(manifest: Manifest) -> dict[str, set[str]]:
    """nested struct -> messages that reach it through their fields."""
    refs = {n: set().union(*(parse(f.type).refs() for f in s.fields)) for n, s in manifest.structs.items()}
    out: dict[str, set[str]] = {}
    for message in (s.name for s in manifest.messages):
        seen, todo = set(), list(refs[message])
        while todo:
            name = todo.pop()
            if name in seen or name not in refs:
                continue
            seen.add(name)
            out.setdefault(name, set()).add(message)
            todo += refs[name]
    return out


def diff(old: Manifest, new: Manifest, *, modules: bool = True) -> Diff:
    """Every change from old to new. modules=False ignores where classes live (a generated
    catalogue such as the reference's keeps every struct in one module by design)."""
    result = Diff(old.id, new.id)
    out = result.changes
    carriers = _carriers(old)
    for name, messages in _carriers(new).items():
        carriers.setdefault(name, set()).update(messages)
    result.carried_by = {n: sorted(m) for n, m in sorted(carriers.items())
                         if (new.structs.get(n) or old.structs[n]).role != "message"}
    new_modules = new.modules | {new.module}
    old_names = frozenset(old.structs) | frozenset(old.enums)
    renamed = result.renamed = {a: b for a, b in struct_renames(old, new).items() if old.structs[a].role == "message"}
    for name in sorted(set(old.structs) | set(new.structs)):
        a, b = old.structs.get(name), new.structs.get(name)
        if name in renamed:  # one message under two names: judged under its new name
            assert a is not None  # renamed pairs are old messages
            to = renamed[name]
            out.append(Change("message-renamed", to, f"{name} -> {to} (pickles name the class: neither version "
                              "finds the other's)", FULL, BREAKING))
            _StructDiff(to, a, new.structs[to] if modules else _with_module(new.structs[to], a.module), out,
                        new_modules, old_names).run()
            continue
        if a is None and name in renamed.values():
            continue
        if a is None:
            assert b is not None  # the name is in one of the two
            if b.role == "message":
                out.append(Change("message-added", name, f"new message {name} ({len(b.fields)} fields)",
                                  BACKWARD, BACKWARD))
            else:
                out.append(Change("struct-added", name, f"new {b.role} struct {name} ({len(b.fields)} fields)",
                                  FULL, FULL))
        elif b is None:
            if a.role == "message":
                out.append(Change("message-removed", name, f"message {name} removed", BREAKING, BREAKING))
            else:
                out.append(Change("struct-removed", name, f"{a.role} struct {name} removed", FULL, FULL))
        else:
            _StructDiff(name, a, b if modules else _with_module(b, a.module), out, new_modules, old_names).run()
    for name in sorted(set(old.enums) | set(new.enums)):
        ea, eb = old.enums.get(name), new.enums.get(name)
        if ea is None:
            assert eb is not None  # the name is in one of the two
            out.append(Change("enum-added", name, f"new enum {name} {eb.members}", FULL, FULL))
            continue
        if eb is None:
            out.append(Change("enum-removed", name, f"enum {name} removed", FULL, FULL))
            continue
        if modules and ea.module != eb.module:
            out.append(_class_moved(name, ea.module, eb.module, new_modules))
        by_value_a = {json.dumps(v): k for k, v in ea.members.items()}
        by_value_b = {json.dumps(v): k for k, v in eb.members.items()}
        for member in sorted(set(ea.members) & set(eb.members)):
            if ea.members[member] != eb.members[member]:
                out.append(Change("enum-member-value-changed", name, f"{member}: {ea.members[member]!r} -> "
                                  f"{eb.members[member]!r}", BREAKING, BREAKING, member))
        for value, member in by_value_b.items():
            if value not in by_value_a and member not in ea.members:
                out.append(Change("enum-member-added", name, f"{member} = {value}", BACKWARD, BACKWARD, member))
            elif value in by_value_a and by_value_a[value] != member and member not in ea.members:
                out.append(Change("enum-member-renamed", name, f"{by_value_a[value]} -> {member} (value {value})",
                                  FULL, FULL, member))
        for value, member in by_value_a.items():
            if value not in by_value_b and member not in eb.members:
                out.append(Change("enum-member-removed", name, f"{member} = {value}", FORWARD, FORWARD, member))
    structs = set(old.structs) | set(new.structs)
    prims_a = [u for u in old.union if u not in structs]
    prims_b = [u for u in new.union if u not in structs]
    for p in prims_b:
        if p not in prims_a:
            out.append(Change("primitive-added", "<union>", f"top-level {p}", BACKWARD, BACKWARD))
    for p in prims_a:
        if p not in prims_b:
            out.append(Change("primitive-removed", "<union>", f"top-level {p}", FORWARD, FORWARD))
    return result


def _with_module(spec: StructSpec, module: str) -> StructSpec:
    import msgspec

    return msgspec.structs.replace(spec, module=module)


def _version_key(version: str) -> tuple[Any, ...]:
    try:
        from packaging.version import Version

        return (0, Version(version))
    except Exception:  # noqa: BLE001 - not a PEP 440 version: compare its parts
        return (1, tuple(int(p) if p.isdigit() else p for p in re.split(r"[.\-+]", version)))


def older_manifests(new: Manifest) -> list[Manifest]:
    """Bundled manifests of the same implementation and era (msgspec structs, or dataclasses) with
    a lower version, oldest first: the releases a transitive check holds `new` to."""
    out = []
    for mid in bundled_manifests():
        m = load_manifest(mid)
        if (m.implementation == new.implementation and _version_key(m.version) < _version_key(new.version)
                and m.is_dataclass_catalogue == new.is_dataclass_catalogue):
            out.append(m)
    return sorted(out, key=lambda m: _version_key(m.version))


# -- output -------------------------------------------------------------------------
def render_text(result: Diff, *, limit: Optional[int] = None) -> str:
    lines = [f"schema diff {result.old} -> {result.new}",
             f"array_like msgpack peers: {result.msgpack}   pickle peers: {result.pickle}"]
    subjects = result.subjects()
    if not subjects:
        lines.append("no changes")
    shown = 0
    for name, changes in subjects.items():
        if limit is not None and shown >= limit:
            lines.append(f"... {len(subjects) - shown} more")
            break
        shown += 1
        lines.append("")
        levels = f"msgpack {meet(*(c.msgpack for c in changes))}, pickle {meet(*(c.pickle for c in changes))}"
        lines.append(f"{name}  [{levels}]")
        carriers = result.carried_by.get(name)
        if carriers:
            shown_carriers = ", ".join(carriers[:6]) + (f" and {len(carriers) - 6} more" if len(carriers) > 6 else "")
            lines.append(f"  (nested: travels inside {shown_carriers})")
        lines += [f"  - {c.line()}" for c in changes]
    return "\n".join(lines) + "\n"


def render_json(results: Iterable[Diff]) -> str:
    return json.dumps([r.to_dict() for r in results], indent=1) + "\n"
