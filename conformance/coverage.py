"""Field-arm coverage: which (struct, field, arm) triples a set of messages exercises.

An arm is one way a field's value can travel, read off its type expression:
each Union arm (None included), the element of a non-empty List/Set/Tuple/Dict,
each enum member, each Literal value, True and False of a bool, and a non-default
value of every other leaf (int != 0, non-empty str/bytes/tensor/array, Any not None).
A field typed with a struct covers the arm naming that struct; the struct's own
fields are triples of their own, counted once per message whatever the path to them
(a bug in how a nested field travels shows wherever that struct is sent).

Arm labels are paths through the type, e.g. for Optional[List[Optional[int]]]:
"None", "List[].None", "List[].int".

Value-class coverage (`measure_edges`) goes one step further: which (struct, field, position,
value class) quadruples the EveryEdge instances reach with every value of the class
(conformance/value_classes.py). A position is a leaf arm ("List[].float", "bool",
"PickleWrapper") or a container ("List", "List[].Dict"); the None arms of Optionals are
field-arm coverage's.
"""

from __future__ import annotations

import array
import enum
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import msgspec
import numpy as np

from conformance.schema.manifest import Manifest, T
from conformance.tensors import is_tensor, numel

__all__ = ["Coverage", "EdgeCoverage", "Quad", "Triple", "arms", "class_positions", "edge_positions", "edge_universe",
           "measure", "measure_edges", "reachable", "universe"]

Triple = tuple[str, str, str]  # (struct, field, arm)
Quad = tuple[str, str, str, str]  # (struct, field, position, value class)

_SEQUENCES = {"List": "List[]", "Set": "Set[]", "FrozenSet": "FrozenSet[]", "VarTuple": "Tuple[]"}


def _join(path: str, segment: str) -> str:
    return f"{path}.{segment}" if path else segment


def arms(t: T, manifest: Manifest, path: str = "") -> list[str]:
    """Every arm label of a type expression (a field's arms, in type order)."""
    k = t.kind
    if k == "Union":
        return [label for a in t.args for label in arms(a, manifest, path)]
    if k in _SEQUENCES:
        return arms(t.args[0], manifest, _join(path, _SEQUENCES[k]))
    if k == "Tuple":
        return [label for i, a in enumerate(t.args) for label in arms(a, manifest, _join(path, f"Tuple[{i}]"))] \
            or [_join(path, "Tuple[()]")]
    if k == "Dict":
        return (arms(t.args[0], manifest, _join(path, "Dict{key}"))
                + arms(t.args[1], manifest, _join(path, "Dict{value}")))
    if k == "bool":
        return [_join(path, "bool=True"), _join(path, "bool=False")]
    if k == "Literal":
        return [_join(path, f"Literal={json.dumps(v)}") for v in t.values]
    if k == "Ref" and t.name in manifest.enums:
        return [_join(path, f"{t.name}={m}") for m in manifest.enums[t.name].members]
    if k == "Ref":
        return [_join(path, t.name or "?")]
    if k == "Array":
        return [_join(path, "Array")]
    return [_join(path, k)]  # int float str bytes None Any Tensor NDArray


def edge_positions(t: T, manifest: Manifest, path: str = "") -> list[tuple[str, T]]:
    """(label, type node) of every position a value class may fill: leaves, PickleWrapper
    positions and containers (a struct's own fields are positions of their own)."""
    k = t.kind
    if k == "Union":
        return [p for a in t.args for p in edge_positions(a, manifest, path)]
    if k in _SEQUENCES:
        return [(_join(path, k), t), *edge_positions(t.args[0], manifest, _join(path, _SEQUENCES[k]))]
    if k == "Tuple":
        return [p for i, a in enumerate(t.args) for p in edge_positions(a, manifest, _join(path, f"Tuple[{i}]"))]
    if k == "Dict":
        return [(_join(path, "Dict"), t), *edge_positions(t.args[0], manifest, _join(path, "Dict{key}")),
                *edge_positions(t.args[1], manifest, _join(path, "Dict{value}"))]
    if k in ("None", "Literal") or (k == "Ref" and t.name != "PickleWrapper"):
        return []  # no edge values of their own (enums, Literals, structs, None)
    return [(_join(path, t.ref if k == "Ref" else k), t)]


def _hashable_any(label: str, node: T) -> bool:
    """An Any as a dict key or set item: the instances give it a str (no edge values there)."""
    return node.kind == "Any" and label.rsplit(".", 1)[0].endswith(("Dict{key}", "Set[]", "FrozenSet[]"))


def class_positions(t: T, manifest: Manifest, value_class: Any) -> list[str]:
    """The labels of the positions of t that a value class fills."""
    return [label for label, node in edge_positions(t, manifest)
            if not _hashable_any(label, node) and value_class.applies(node)]


def edge_universe(manifest: Manifest, message: str) -> list[Quad]:
    """Every (struct, field, position, value class) a message must exercise (the PickleWrapper
    struct's own bytes are the implementation's pickle: no edge values there)."""
    from conformance.value_classes import CLASSES

    return [(s, f.name, label, vc.name) for s in reachable(manifest, message) if s != "PickleWrapper"
            for f in manifest.structs[s].fields for vc in CLASSES
            for label in class_positions(f.type_expr, manifest, vc)]


def _required_identities(node: T, class_name: str) -> set[tuple[Any, ...]]:
    from conformance.value_classes import CONTAINER_KINDS, by_name, identity

    vc = by_name(class_name)
    if node.kind in CONTAINER_KINDS:
        return {(CONTAINER_KINDS[node.kind], size) for size in vc.sizes if size is not None}
    return {identity(v) for v in vc.values(node)}


def reachable(manifest: Manifest, root: str) -> list[str]:
    """The structs a message can carry at any depth (itself first), each once."""
    seen, todo = [root], [root]
    while todo:
        for f in manifest.structs[todo.pop()].fields:
            for name in sorted(f.type_expr.refs()):
                if name in manifest.structs and name not in seen:
                    seen.append(name)
                    todo.append(name)
    return seen


def universe(manifest: Manifest, message: str) -> list[Triple]:
    """Every (struct, field, arm) a message must exercise."""
    return [(s, f.name, a) for s in reachable(manifest, message)
            for f in manifest.structs[s].fields for a in arms(f.type_expr, manifest)]


class _Observer:
    """Walks values against their declared types and records the arms they take."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.seen: set[Triple] = set()
        #: (struct, field, position) -> identities of the values seen there (value-class coverage)
        self.values: dict[Triple, set[tuple[Any, ...]]] = {}

    def _note(self, where: tuple[str, str], label: str, v: Any) -> None:
        from conformance.value_classes import identity

        self.values.setdefault((*where, label), set()).add(identity(v))

    def struct(self, value: Any, name: str) -> None:
        for f in self.manifest.structs[name].fields:
            if hasattr(value, f.name):
                self._value(getattr(value, f.name), f.type_expr, "", (name, f.name))

    def _value(self, v: Any, t: T, path: str, where: tuple[str, str]) -> None:
        k = t.kind
        def hit(segment: str) -> None:
            self.seen.add((*where, _join(path, segment)))

        if k == "Union":
            arm = _arm_of(v, t.args)
            if arm is not None:
                self._value(v, arm, path, where)
        elif k == "None":
            if v is None:
                hit("None")
        elif k in _SEQUENCES:
            if isinstance(v, (list, tuple, set, frozenset)):
                self._note(where, _join(path, k), v)
                for item in v:
                    self._value(item, t.args[0], _join(path, _SEQUENCES[k]), where)
        elif k == "Tuple":
            if isinstance(v, tuple) and len(v) == len(t.args):
                if not t.args:
                    hit("Tuple[()]")
                for i, (item, a) in enumerate(zip(v, t.args)):
                    self._value(item, a, _join(path, f"Tuple[{i}]"), where)
        elif k == "Dict":
            if isinstance(v, dict):
                self._note(where, _join(path, "Dict"), v)
                for key, item in v.items():
                    self._value(key, t.args[0], _join(path, "Dict{key}"), where)
                    self._value(item, t.args[1], _join(path, "Dict{value}"), where)
        elif k == "bool":
            if isinstance(v, (bool, np.bool_)):
                hit(f"bool={bool(v)}")
                self._note(where, _join(path, "bool"), v)
        elif k == "Literal":
            if _literal_match(v, t.values):
                hit(f"Literal={json.dumps(v)}")
        elif k == "Ref" and t.name in self.manifest.enums:
            if isinstance(v, enum.Enum) and type(v).__name__ == t.name:
                hit(f"{t.name}={v.name}")
        elif k == "Ref":
            if isinstance(v, msgspec.Struct) and type(v).__name__ == t.name:
                hit(t.name or "?")
                self.struct(v, t.name or "?")
            elif t.name == "PickleWrapper" and v is not None:  # the object the send wraps
                self._note(where, _join(path, "PickleWrapper"), v)
        else:
            if _matches(v, t):
                self._note(where, _join(path, k), v)
            if _non_default_leaf(v, k):
                hit("Array" if k == "Array" else k)


def _literal_match(v: Any, values: Iterable[Any]) -> bool:
    return any(type(v) is type(x) and v == x for x in values)


def _non_default_leaf(v: Any, kind: str) -> bool:
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, (bool, enum.Enum)) and v != 0
    if kind == "float":
        return isinstance(v, float) and v != 0.0
    if kind in ("str", "bytes"):
        return isinstance(v, (str if kind == "str" else (bytes, bytearray))) and len(v) > 0
    if kind == "Tensor":
        return is_tensor(v) and numel(v) > 0
    if kind == "NDArray":
        return isinstance(v, np.ndarray) and v.size > 0
    if kind == "Array":
        return isinstance(v, array.array) and len(v) > 0
    if kind == "Any":
        return v is not None
    return False


def _matches(v: Any, t: T) -> bool:
    """Does a value belong to this type (shallowly: containers by their own class)?"""
    k = t.kind
    if k == "None":
        return v is None
    if k == "bool":
        return isinstance(v, (bool, np.bool_))
    if k == "int":  # numpy scalars too: they are in the encoder's input domain (SPEC 3.1)
        return (isinstance(v, int) and not isinstance(v, (bool, enum.Enum))) or isinstance(v, np.integer)
    if k == "float":
        return isinstance(v, (float, np.floating))
    if k == "str":
        return isinstance(v, str) and not isinstance(v, enum.Enum)
    if k == "bytes":
        return isinstance(v, (bytes, bytearray))
    if k == "List":
        return isinstance(v, list)
    if k in ("VarTuple", "Tuple"):
        return isinstance(v, tuple)
    if k == "Set":
        return isinstance(v, set)
    if k == "FrozenSet":
        return isinstance(v, frozenset)
    if k == "Dict":
        return isinstance(v, dict)
    if k == "Literal":
        return _literal_match(v, t.values)
    if k == "Tensor":
        return is_tensor(v)
    if k == "NDArray":
        return isinstance(v, np.ndarray)
    if k == "Array":
        return isinstance(v, array.array)
    if k == "Any":
        return True
    if k == "Ref":
        return type(v).__name__ == t.name
    return False


def _arm_of(v: Any, options: Iterable[T]) -> T | None:
    # Literal before str and Any last: a union's most specific arm claims the value.
    ordered = sorted(options, key=lambda a: (a.kind == "Any", a.kind != "Literal"))
    found = next((a for a in ordered if _matches(v, a)), None)
    if found is None and v is not None:  # an object at a PickleWrapper position, before the send wraps it
        found = next((a for a in ordered if a.kind == "Ref" and a.name == "PickleWrapper"), None)
    return found


@dataclass
class Coverage:
    """Covered and uncovered triples, per message."""

    manifest: Manifest
    covered: dict[str, set[Triple]] = field(default_factory=dict)
    required: dict[str, list[Triple]] = field(default_factory=dict)

    def uncovered(self, message: str | None = None) -> list[tuple[str, Triple]]:
        names = [message] if message else list(self.required)
        return [(m, t) for m in names for t in self.required[m] if t not in self.covered[m]]

    def counts(self, message: str | None = None) -> tuple[int, int]:
        """(covered, required) for one message or all of them."""
        names = [message] if message else list(self.required)
        total = sum(len(self.required[m]) for m in names)
        return total - len(self.uncovered(message)), total

    def percent(self, message: str | None = None) -> float:
        done, total = self.counts(message)
        return 100.0 * done / total if total else 100.0

    def render(self, *, per_message: bool = True, limit: int = 200) -> str:
        lines = []
        if per_message:
            for m in self.required:
                done, total = self.counts(m)
                lines.append(f"{m}: {done}/{total} ({self.percent(m):.1f}%)")
        missing = self.uncovered()
        lines += _uncovered_lines([f"{m}: {s}.{f} [{a}]" for m, (s, f, a) in missing], limit)
        done, total = self.counts()
        lines.append(f"field-arm coverage of {self.manifest.id}: {done}/{total} ({self.percent():.1f}%), "
                     f"{len(self.required)} messages, {len(missing)} uncovered")
        return "\n".join(lines)


def _uncovered_lines(missing: list[str], limit: int) -> list[str]:
    """The report's 'uncovered:' lines, at most `limit` of them, then how many more there are."""
    lines = [f"uncovered: {m}" for m in missing[:limit]]
    return lines + ([f"... and {len(missing) - limit} more uncovered"] if len(missing) > limit else [])


def measure(manifest: Manifest, sent: Mapping[str, Iterable[Any]]) -> Coverage:
    """Coverage of the given instances, {message: [instance, ...]}; every message of the
    manifest is counted (one sent nothing: all of its triples uncovered)."""
    result = Coverage(manifest)
    for spec in manifest.messages:
        observer = _Observer(manifest)
        for value in sent.get(spec.name, ()):
            observer.struct(value, spec.name)
        result.required[spec.name] = universe(manifest, spec.name)
        result.covered[spec.name] = observer.seen & set(result.required[spec.name])
    return result


@dataclass
class EdgeCoverage:
    """Covered and uncovered (struct, field, position, value class) quadruples, per message."""

    manifest: Manifest
    covered: dict[str, set[Quad]] = field(default_factory=dict)
    required: dict[str, list[Quad]] = field(default_factory=dict)

    def uncovered(self) -> list[tuple[str, Quad]]:
        return [(m, q) for m in self.required for q in self.required[m] if q not in self.covered[m]]

    def counts(self) -> tuple[int, int]:
        total = sum(len(r) for r in self.required.values())
        return total - len(self.uncovered()), total

    def percent(self) -> float:
        done, total = self.counts()
        return 100.0 * done / total if total else 100.0

    def by_class(self) -> dict[str, tuple[int, int]]:
        """value class -> (covered, required) over every message."""
        out: dict[str, list[int]] = {}
        for m, quads in self.required.items():
            for q in quads:
                entry = out.setdefault(q[3], [0, 0])
                entry[0] += q in self.covered[m]
                entry[1] += 1
        return {name: (done, total) for name, (done, total) in out.items()}

    def render(self, *, per_class: bool = True, limit: int = 200) -> str:
        lines = []
        if per_class:
            for name, (done, total) in self.by_class().items():
                lines.append(f"{name}: {done}/{total} ({100.0 * done / total if total else 100.0:.1f}%)")
        missing = self.uncovered()
        lines += _uncovered_lines([f"{m}: {s}.{f} [{position}] {name}" for m, (s, f, position, name) in missing],
                                  limit)
        done, total = self.counts()
        lines.append(f"value-class coverage of {self.manifest.id}: {done}/{total} ({self.percent():.1f}%), "
                     f"{len(self.required)} messages, {len(missing)} uncovered")
        return "\n".join(lines)


def measure_edges(manifest: Manifest, sent: Mapping[str, Mapping[str, Iterable[Any]]]) -> EdgeCoverage:
    """Value-class coverage of {value class: {message: [instance, ...]}}: a quadruple is covered
    when the instances of its class put every value of the class at that position."""
    result = EdgeCoverage(manifest)
    for spec in manifest.messages:
        required = edge_universe(manifest, spec.name)
        nodes = {(s, f.name, label): node for s in reachable(manifest, spec.name) if s != "PickleWrapper"
                 for f in manifest.structs[s].fields for label, node in edge_positions(f.type_expr, manifest)}
        seen: dict[str, dict[Triple, set[tuple[Any, ...]]]] = {}
        for name in {q[3] for q in required}:
            observer = _Observer(manifest)
            for value in sent.get(name, {}).get(spec.name, ()):
                observer.struct(value, spec.name)
            seen[name] = observer.values
        result.required[spec.name] = required
        result.covered[spec.name] = {q for q in required
                                     if _required_identities(nodes[q[:3]], q[3]) <= seen[q[3]].get(q[:3], set())}
    return result
