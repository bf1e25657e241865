"""One exchange of a message between two versions: the writer's canonical vectors decoded by
the reader's structs (msgpack: the golden bytes; pickle: the writer's value pickled), judged ok,
loud or silent against what the writer meant. schema verify (evolution.py), each change alone
(isolation.py) and the suite's peer checks are made of these."""

from __future__ import annotations

import io
import json
import pickle
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Optional

import msgspec

from conformance.schema.diff import Compat, compat
from conformance.schema.golden.catalogue import Catalogue
from conformance.schema.golden.view import to_view
from conformance.schema.manifest import Manifest, T, parse
from conformance.schema.values import EXCHANGE_VARIANTS, ValueBuilder

__all__ = ["DIRECTIONS", "Exchange", "ImplementationSide", "LOUD", "OK", "PEER_DIRECTIONS", "SILENT", "TRANSPORTS",
           "VersionSide", "direction_of", "exchange", "exchange_once", "reach"]

OK, LOUD, SILENT = "ok", "loud", "silent"
DIRECTIONS = ("backward", "forward")  # backward: new reads old; forward: old reads new
PEER_DIRECTIONS = ("to-peer", "from-peer")  # an implementation against a release (PeerCheck)
# The diff of a peer runs from the peer's manifest to the implementation's: the
# implementation reading the peer is the diff's backward direction.
_DIFF_DIRECTION = {"backward": Compat.BACKWARD, "forward": Compat.FORWARD, "from-peer": Compat.BACKWARD,
                   "to-peer": Compat.FORWARD}
TRANSPORTS = ("msgpack", "pickle")
_SHORT = 60


def direction_of(direction: str) -> Compat:
    """The diff's direction an exchange's direction is (a peer's diff runs from the peer)."""
    return _DIFF_DIRECTION[direction]


@dataclass
class Exchange:
    """One message, one direction, one transport: what the bytes did and what the diff said."""

    message: str
    direction: str
    transport: str
    outcome: str  # ok | loud | silent
    evidence: str  # the variant and what happened ("" when ok)
    expected: str  # the diff's level for this message on this transport (FULL ... BREAKING)
    rules: list[str] = field(default_factory=list)  # the diff rules behind a forbidden direction

    @property
    def allowed(self) -> bool:
        return _DIFF_DIRECTION[self.direction] in compat(self.expected)

    @property
    def contradiction(self) -> Optional[str]:
        """Why the bytes disagree with the diff, or None when they agree."""
        if self.allowed and self.outcome != OK:
            return f"the diff says {self.expected} but the bytes fail {self.outcome}: {self.evidence}"
        if not self.allowed and self.outcome == OK:
            return (f"the diff says {self.expected} ({', '.join(self.rules)}) but every vector "
                    f"decodes into the value its writer meant")
        return None

    def line(self) -> str:
        why = f"  [{', '.join(self.rules)}]" if self.rules else ""
        text = f"{self.message} {self.direction} {self.transport}: {self.outcome}{why}"
        return text + (f"\n      {self.evidence}" if self.evidence else "")


# -- what the diff says about one message -------------------------------------------
def reach(manifest: Manifest, message: str) -> set[str]:
    """The message and every struct and enum its fields reach, at any depth."""
    seen: set[str] = set()
    todo = [message]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        spec = manifest.structs.get(name)
        if spec is not None:
            todo += [r for f in spec.fields for r in parse(f.type).refs()]
    return seen


# -- comparing what the reader holds with what the writer meant --------------------
def _short(view: Any) -> str:
    text = json.dumps(view, ensure_ascii=False, default=str)
    return text if len(text) <= _SHORT else text[:_SHORT - 3] + "..."


def _plain(view: Any) -> Any:
    """A view with container kinds forgotten (the wire has one array type) and sets sorted."""
    if isinstance(view, list):
        return [_plain(v) for v in view]
    if isinstance(view, dict):
        if len(view) == 1 and next(iter(view)) in ("$tuple", "$set", "$frozenset"):
            (key, items), = view.items()
            items = [_plain(v) for v in items]
            return sorted(items, key=json.dumps) if key != "$tuple" else items
        if "$enum" in view:  # the wire carries the value; the member's name is each side's own spelling
            return {k: v for k, v in view.items() if k != "member"}
        return {k: _plain(v) for k, v in view.items()}
    return view


def _kinds(view: Any) -> Any:
    """A view with numbers as floats (an int where a float is declared is the same number to
    Python) but container kinds kept: a tuple where a list is declared is not the same value."""
    if isinstance(view, bool) or view is None or isinstance(view, str):
        return view
    if isinstance(view, (int, float)):
        return float(view)
    if isinstance(view, list):
        return [_kinds(v) for v in view]
    if isinstance(view, dict):
        return {k: _kinds(v) for k, v in view.items()}
    return view


class _Compare:
    """Walks the reader's view beside the writer's, naming the first field that differs."""

    def __init__(self, reader: Any, writer: Manifest) -> None:
        self.reader, self.writer = reader, writer

    def first_difference(self, got: Any, meant: Any, path: str) -> Optional[str]:
        if isinstance(got, dict) and "$struct" in got and isinstance(meant, dict) and "$struct" in meant:
            if got["$struct"] != meant["$struct"]:
                return f"{path} is a {got['$struct']} where the writer sent a {meant['$struct']}"
            return self._struct(got, meant, path)
        if isinstance(got, list) and isinstance(meant, list) and len(got) == len(meant):
            for i, (g, m) in enumerate(zip(got, meant)):
                found = self.first_difference(g, m, f"{path}[{i}]")
                if found:
                    return found
            return None
        if _plain(got) != _plain(meant):
            return f"{path} = {_short(got)} where the writer meant {_short(meant)}"
        return None

    def _struct(self, got: dict[str, Any], meant: dict[str, Any], path: str) -> Optional[str]:
        name = got["$struct"]
        reader_fields = [k for k in got if k != "$struct"]
        writer_fields = [k for k in meant if k != "$struct"]
        writer_spec = self.writer.structs.get(name)
        shifted = writer_spec is not None and writer_spec.array_like
        for i, fname in enumerate(reader_fields):
            here = f"{path}.{fname}"
            # array_like: the reader took position i, which the writer filled with its field i
            source = writer_fields[i] if shifted and i < len(writer_fields) else None
            renamed = (writer_spec is not None and source and source not in got
                       and writer_spec.fields[i].type == self._type(name, fname))
            if fname in meant or renamed:
                found = self.first_difference(got[fname], meant[fname if fname in meant else str(source)], here)
                if found and source and source != fname:
                    found += f" (the value is the writer's {source} = {_short(meant[source])})"
                if found:
                    return found
                continue
            default = self._default(name, fname)
            if default is not _OPAQUE and _plain(got[fname]) != _plain(default):
                text = f"{here} = {_short(got[fname])} where the writer has no {fname} (default {_short(default)})"
                if source:
                    text += f" (the value is the writer's {source})"
                return text
        return None

    def _type(self, struct: str, fname: str) -> str:
        return str(self.reader.manifest.structs[struct].field(fname).type)

    def _default(self, struct: str, fname: str) -> Any:
        cls = self.reader.classes[struct]
        for info in msgspec.structs.fields(cls):
            if info.name == fname:
                if info.default is not msgspec.NODEFAULT:
                    return to_view(info.default)
                if info.default_factory in (list, dict, set, tuple, frozenset) or (
                        isinstance(info.default_factory, type) and issubclass(info.default_factory, msgspec.Struct)):
                    return to_view(info.default_factory())
                return _OPAQUE
        return _OPAQUE


_OPAQUE = object()  # a default made fresh per instance (a uuid): any value will do


# -- the two ends of an exchange ----------------------------------------------------
class VersionSide:
    """A release, by its manifest: structs generated in-process, its golden vectors.
    reexports: reading pickles of an older release, a class named in a module that still
    exists but no longer defines it is found there (the old module re-exports what moved
    away: the diff's assumption for class-moved)."""

    def __init__(self, catalogue: Catalogue, *, reexports: bool = False, modules: frozenset[str] = frozenset()) -> None:
        self.catalogue, self.reexports = catalogue, reexports
        self.manifest: Manifest = catalogue.manifest
        self.classes = catalogue.classes
        # the modules its process has: its manifest's, and `modules` (a hybrid reader runs in the other release)
        self.modules = self.manifest.modules | modules

    def value(self, message: str, variant: str) -> Any:
        return ValueBuilder(self.manifest, self.classes, variant).instance(message)

    def msgpack_out(self, message: str, variant: str) -> tuple[bytes, Any]:
        """The golden vector (encoded now for a manifest without a golden folder), and what it means."""
        data = _golden_bytes(self.manifest.id, message, variant)
        if data is None:
            data = self.catalogue.encode(self.value(message, variant))
        return data, to_view(self.catalogue.decode(data))

    def pickle_out(self, message: str, variant: str, reader: Any) -> tuple[bytes, Any]:
        value = self.value(message, variant)
        if isinstance(reader, VersionSide):
            return pickle.dumps(value), to_view(value)
        return _renamed_pickle(value, self, reader), to_view(value)

    def msgpack_in(self, data: bytes) -> Any:
        return self.catalogue.decode(data)

    def pickle_in(self, data: bytes, writer: Any) -> Any:
        return _ReaderUnpickler(data, writer, self).load()

    def revalidate(self, obj: Any) -> Any:
        """The object through this side's own codec: what its types make of it."""
        return self.catalogue.decode(self.catalogue.encode(obj))


class ImplementationSide:
    """An implementation under test, through its adapter (encode, decode, classes), as the
    release its manifest describes."""

    def __init__(self, adapter: Any, manifest: Manifest) -> None:
        self.adapter, self.manifest = adapter, manifest
        self.classes = adapter.classes()

    def value(self, message: str, variant: str) -> Any:
        return ValueBuilder(self.manifest, self.classes, variant).instance(message)

    def msgpack_out(self, message: str, variant: str) -> tuple[bytes, Any]:
        value = self.value(message, variant)
        meant = to_view(value)
        return self.adapter.encode(value, "msgpack"), meant

    def pickle_out(self, message: str, variant: str, reader: Any) -> tuple[bytes, Any]:
        value = self.value(message, variant)
        meant = to_view(value)
        return self.adapter.encode(value, "pickle"), meant

    def msgpack_in(self, data: bytes) -> Any:
        return self.adapter.decode(data, "msgpack")

    def pickle_in(self, data: bytes, writer: Any) -> Any:
        return self.adapter.decode(data, "pickle")

    def revalidate(self, obj: Any) -> Any:
        if self.adapter.supports("msgpack"):
            return self.adapter.decode(self.adapter.encode(obj, "msgpack"), "msgpack")
        return obj


class _ReaderUnpickler(pickle.Unpickler):
    """Loads a pickle written with the writer's classes using the reader's: a class is named
    by the module its manifest records (as the real implementation's pickle would name it)."""

    def __init__(self, data: bytes, writer: Any, reader: Any) -> None:
        super().__init__(io.BytesIO(data))
        self.writer, self.reader = writer, reader
        self.reader_modules = getattr(reader, "modules", None) or reader.manifest.modules

    def find_class(self, module: str, name: str) -> Any:
        cls = self.writer.classes.get(name)
        if cls is None or cls.__module__ != module:
            return super().find_class(module, name)
        spec = self.writer.manifest.structs.get(name) or self.writer.manifest.enums[name]
        mine = self.reader.manifest.structs.get(name) or self.reader.manifest.enums.get(name)
        if spec.module not in self.reader_modules:
            raise ModuleNotFoundError(f"No module named {spec.module!r}")
        if mine is None or (mine.module != spec.module and not getattr(self.reader, "reexports", False)):
            raise AttributeError(f"Can't get attribute {name!r} on <module {spec.module!r}>")
        return self.reader.classes[name]


def _renamed_pickle(value: Any, writer: VersionSide, reader: ImplementationSide) -> bytes:
    """The writer's pickle as the implementation would receive it from that release: each
    class named where the implementation keeps the class of that name (protocol 2 names
    classes in plain text). A class the implementation lacks keeps the writer's module."""
    data = pickle.dumps(value, protocol=2)
    for name, cls in writer.classes.items():
        mine = reader.classes.get(name)
        spec = writer.manifest.structs.get(name) or writer.manifest.enums.get(name)
        target = mine.__module__ if mine is not None else spec.module if spec is not None else cls.__module__
        data = data.replace(f"c{cls.__module__}\n{name}\n".encode(), f"c{target}\n{name}\n".encode())
    return data


@lru_cache(maxsize=None)
def _golden_bytes(manifest_id: str, message: str, variant: str) -> Optional[bytes]:
    path = _vector_paths(manifest_id).get((message, variant))
    return path.read_bytes() if path is not None and path.exists() else None


@lru_cache(maxsize=64)
def _vector_paths(manifest_id: str) -> dict[tuple[str, str], Any]:
    from conformance.schema.golden.store import vector_paths

    return vector_paths(manifest_id)  # once per manifest, not once per message and variant


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]


def _named(exc: BaseException, reader: Any, writer: Any, message: str, meant: Any) -> str:
    """The error, and the field its msgspec path ($[8][28]) points at, by name."""
    text = _error(exc)
    at = re.search(r"- at `(\$[^`]*)`", text)
    if at:
        text += f" = {_where(reader.manifest, writer.manifest, message, at.group(1), meant)}"
    return text


def _arm(t: T, token: str) -> T:
    """The arm of a union that a path step (an index or a key) goes into."""
    if t.kind != "Union":
        return t
    arms = [a for a in t.args if a.kind != "None"]
    return next((a for a in arms if a.kind in ("Ref", "List", "VarTuple", "Tuple", "Set", "FrozenSet")
                 and token.isdigit()), arms[0] if arms else t)


def _where(reader: Manifest, writer: Manifest, message: str, path: str, meant: Any) -> str:
    """A msgspec error path ($[8][28]) as field names, with what the writer put there."""
    t, node, names, source = T("Ref", name=message), meant, [message], ""
    for index, key in re.findall(r"\[(\d+)\]|\.(\w+)", path):
        token = index or key
        t = _arm(t, token)
        spec = reader.structs.get(t.ref) if t.kind == "Ref" else None
        if spec is not None:
            wspec = writer.structs.get(spec.name)
            pos = int(index) - (spec.tag is not None) if index and spec.array_like else None
            if pos is None:
                fields = [f for f in spec.fields if f.name == key]
            else:
                fields = spec.fields[pos:pos + 1] if pos >= 0 else []
            if not fields:
                break
            f = fields[0]
            wname = (wspec.fields[pos].name if wspec and pos is not None and pos < len(wspec.fields)
                     else f.name)
            names.append(f.name)
            here = node.get(wname) if isinstance(node, dict) else None
            source = (f" (position {pos}, where the writer put its {wname} = {_short(here)})"
                      if pos is not None and wname != f.name else "")
            node, t = here, parse(f.type)
        elif t.kind in ("List", "VarTuple", "Set", "FrozenSet", "Tuple") and index:
            items = node.get(next(iter(node)), []) if isinstance(node, dict) else node
            node = items[int(index)] if isinstance(items, list) and int(index) < len(items) else None
            t = t.args[0] if t.kind != "Tuple" else t.args[min(int(index), len(t.args) - 1)]
            names[-1] += f"[{index}]"
        else:
            break
    return ".".join(names) + source


def exchange_once(writer: Any, reader: Any, message: str, variant: str, transport: str) -> tuple[str, str]:
    """(outcome, evidence) for one canonical vector of one message, from writer to reader
    (a VersionSide or an ImplementationSide each)."""
    if transport == "msgpack":
        data, meant = writer.msgpack_out(message, variant)
        load: Callable[[], Any] = lambda: reader.msgpack_in(data)
    else:
        data, meant = writer.pickle_out(message, variant, reader)
        load = lambda: reader.pickle_in(data, writer)
    try:
        got = load()
    except Exception as exc:  # noqa: BLE001 - whatever the reader raises, it refused the bytes: loud
        return LOUD, f"{variant}: {_named(exc, reader, writer, message, meant)}"
    found = _Compare(reader, writer.manifest).first_difference(to_view(got), meant, message)
    if found:
        return SILENT, f"{variant}: {found}"
    if transport == "pickle":
        # pickle checks no types: a value the reader's own codec refuses is silently wrong
        try:
            typed = reader.revalidate(got)
        except Exception as exc:  # noqa: BLE001 - its own codec refuses the value
            return SILENT, (f"{variant}: decoded without error into a {message} its own types reject: "
                            f"{_named(exc, reader, writer, message, meant)}")
        # nor does it check container kinds: a tuple where the reader's type says List
        found = _Kinds().first_difference(to_view(got), to_view(typed), message)
        if found:
            return SILENT, f"{variant}: decoded without error into a {message} its own types spell otherwise: {found}"
    return OK, ""


class _Kinds:
    """The first place where what a pickle reader holds differs in kind from what its own types make of it."""

    def first_difference(self, got: Any, typed: Any, path: str) -> Optional[str]:
        if isinstance(got, dict) and isinstance(typed, dict) and got.keys() == typed.keys():
            for key in got:
                found = self.first_difference(got[key], typed[key], path if key.startswith("$") else f"{path}.{key}")
                if found:
                    return found
            return None
        if isinstance(got, list) and isinstance(typed, list) and len(got) == len(typed):
            for i, (g, t) in enumerate(zip(got, typed)):
                found = self.first_difference(g, t, f"{path}[{i}]")
                if found:
                    return found
            return None
        if _kinds(got) != _kinds(typed):
            return f"{path} = {_short(got)}, its types make it {_short(typed)}"
        return None


def exchange(writer: Any, reader: Any, message: str, transport: str) -> tuple[str, str]:
    """The worst outcome over the canonical variants (silent over loud over ok) and its evidence."""
    worst = (OK, "")
    for variant in EXCHANGE_VARIANTS:
        outcome, evidence = exchange_once(writer, reader, message, variant, transport)
        if outcome == SILENT:
            return outcome, evidence
        if outcome == LOUD and worst[0] == OK:
            worst = (outcome, evidence)
    return worst
