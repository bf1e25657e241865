"""Deterministic instances that put one value class's edge values at every position of every
field, at every depth (conformance/value_classes.py; the EveryEdge checks).

The EveryArm instances (conformance/every_arm.py) give each arm of each field one ordinary
value. These widen the positions the class applies to: a float position of the NonFinite class
takes +inf, -inf and NaN (its width is 3, so an Optional[float] has width 4 and a List of it
holds all four), a container of the EmptyContainer class is once empty and once filled (so what
it holds is still reached), one of the OneElement class holds one element per instance. A
position that holds nothing of the class, at any depth, takes its simplest value (None where
Optional, else its first EveryArm value), so a defect there never fails this class's checks. A
message's instances together reach every (struct, field, position) with every value of the
class (conformance.coverage.measure_edges). Where the implementation's own class refuses an
edge value when it is built, that field keeps its EveryArm value (`refused` names it).

PickleWrapper positions hold the object itself, as engine code does before the send wraps it:
the PickleWrapperFalsy class puts its falsy objects there; every other class leaves an
Optional[PickleWrapper] None, so its checks need no pickling and run on every implementation.

`as_received` gives an instance as it arrives over a transport (SPEC §3.1): over msgpack a
numpy scalar arrives as the Python value of its kind; pickle carries it as itself. It maps the
built instance, not the values put in: a class may change a value when it is built (SGLang
masks a multimodal item's hash), and the wire carries what the object holds.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Mapping

import msgspec

from conformance.coverage import class_positions, edge_universe, reachable
from conformance.every_arm import EveryArmBuilder, _seed
from conformance.schema.manifest import Manifest, T
from conformance.value_classes import CLASSES, CONTAINER_KINDS, ValueClass, on_the_wire

__all__ = ["EveryEdgeBuilder", "as_received", "edge_messages", "edge_sends"]


def _is_wrapper(t: T) -> bool:
    return t.kind == "Ref" and t.name == "PickleWrapper"


class EveryEdgeBuilder(EveryArmBuilder):
    def __init__(self, manifest: Manifest, classes: Mapping[str, type], value_class: ValueClass) -> None:
        super().__init__(manifest, classes)
        self.value_class = value_class
        #: an object was placed at a PickleWrapper position: the send must wrap, the receiver unwrap
        self.holds_objects = False
        #: "Struct.field" where the implementation's own class refused the edge value at construction
        self.refused: list[str] = []
        self._ordinary = EveryArmBuilder(manifest, classes)
        # By node identity (the manifest's nodes live as long as it does; hashing a node is slow):
        self._values: dict[int, tuple[Any, ...]] = {}
        self._plain_widths: dict[int, int] = {}  # widths of types that name no struct (no cycle to end)
        self._relevance: dict[int, bool] = {}
        self._struct_relevance: dict[str, bool] = {}

    # -- which positions the class fills ----------------------------------------
    def _relevant(self, t: T) -> bool:
        """Does a value of t hold a position of the class at any depth? Where it does not, the
        position takes its simplest value (None where Optional): a defect elsewhere in the
        message never fails this class's check, and the instances stay small."""
        found = self._relevance.get(id(t))
        if found is None:
            found = bool(class_positions(t, self.manifest, self.value_class)) or any(
                self._struct_relevant(name) for name in t.refs()
                if name in self.manifest.structs and name != "PickleWrapper")
            self._relevance[id(t)] = found
        return found

    def _struct_relevant(self, name: str) -> bool:
        found = self._struct_relevance.get(name)
        if found is None:
            structs = [s for s in reachable(self.manifest, name) if s != "PickleWrapper"]
            found = self._struct_relevance[name] = any(
                class_positions(f.type_expr, self.manifest, self.value_class)
                for s in structs for f in self.manifest.structs[s].fields)
        return found

    # -- widths ---------------------------------------------------------------
    def width(self, t: T, stack: tuple[str, ...] = ()) -> int:
        known = self._plain_widths.get(id(t))
        if known is not None:
            return known
        vc = self.value_class
        if not self._relevant(t):
            width = 1
        elif self._class_values(t):
            width = len(self._class_values(t))
        elif t.kind in CONTAINER_KINDS and vc.sizes:
            width = sum(1 if size in (0, None) else self._element_width(t, stack) for size in vc.sizes)
        else:
            width = super().width(t, stack)
        if not any(name in self.manifest.structs and name != "PickleWrapper" for name in t.refs()):
            self._plain_widths[id(t)] = width
        return width

    def _class_values(self, t: T) -> tuple[Any, ...]:
        found = self._values.get(id(t))
        if found is None:
            found = self._values[id(t)] = self.value_class.values(t)
        return found

    def _element_width(self, t: T, stack: tuple[str, ...]) -> int:
        return max(self.width(a, stack) for a in t.args)

    # -- values ---------------------------------------------------------------
    def value(self, t: T, index: int, seed: int) -> Any:
        vc = self.value_class
        if not self._relevant(t):
            return None if t.is_optional else super().value(t, 0, seed)
        values = self._class_values(t)
        if values:
            if _is_wrapper(t):
                self.holds_objects = True
            return copy.deepcopy(values[index])  # fresh: an encoder must not see one object twice
        if t.kind in CONTAINER_KINDS and vc.sizes:
            return self._container(t, index, seed)
        if t.kind == "Dict":
            return self._dict(t, seed)
        return super().value(t, index, seed)

    def _dict(self, t: T, seed: int) -> dict[str, Any]:
        """Filled as EveryArm fills it, but with distinct keys: where the class has fewer key
        values than the dict needs entries ("" is one str), the other keys are ordinary ones."""
        key_t, value_t = t.args
        if self._reenters(value_t):
            return {}
        keys, values = self.width(key_t), self.width(value_t)
        ordinary = self._ordinary.width(key_t)
        return {(self._hashable(key_t, i, seed + i) if i < keys else
                 self._ordinary._hashable(key_t, i % ordinary, seed + i)):
                self.value(value_t, i % values, seed + i) for i in range(max(keys, values))}

    def _container(self, t: T, index: int, seed: int) -> Any:
        for size in self.value_class.sizes:
            span = 1 if size in (0, None) else self._element_width(t, ())
            if index < span:
                break
            index -= span
        if size is None or (size and self._reenters(t.args[-1])):  # filled (empty where a cycle must end)
            return self._dict(t, seed) if t.kind == "Dict" else super().value(t, 0, seed)
        kind = t.kind
        if size == 0:
            return {"List": list, "Set": set, "FrozenSet": frozenset, "VarTuple": tuple, "Dict": dict}[kind]()
        if kind == "Dict":
            key_t, value_t = t.args
            return {self._hashable(key_t, index % self.width(key_t), seed):
                    self.value(value_t, index % self.width(value_t), seed)}
        item = self.value(t.args[0], index, seed) if kind in ("List", "VarTuple") else \
            self._hashable(t.args[0], index, seed)
        return {"List": list, "Set": set, "FrozenSet": frozenset, "VarTuple": tuple}[kind]([item])

    def instance(self, name: str, index: int) -> Any:
        spec = self.manifest.structs[name]
        self._building.append(name)
        try:
            kwargs = {f.name: self.value(f.type_expr, index % self.width(f.type_expr), _seed(name, f.name))
                      for f in spec.fields}
            try:
                return self.classes[name](**kwargs)
            except (TypeError, ValueError, OverflowError, RuntimeError) as exc:
                return self._despite_refusal(name, index, kwargs, exc)
        finally:
            self._building.pop()

    def _despite_refusal(self, name: str, index: int, kwargs: dict[str, Any], exc: Exception) -> Any:
        """The implementation's own class refuses an edge value when it is built (SGLang checks
        that a watermark key is hex): such a value never reaches its wire. The fields take their
        EveryArm values, one at a time, until the class accepts them; `refused` names them."""
        cls, fields = self.classes[name], self.manifest.structs[name].fields
        ordinary = {f.name: self._ordinary.value(f.type_expr, index % self._ordinary.width(f.type_expr),
                                                 _seed(name, f.name)) for f in fields}
        for f in fields:  # one field alone first, then field after field
            try:
                built = cls(**{**kwargs, f.name: ordinary[f.name]})
            except (TypeError, ValueError, OverflowError, RuntimeError):
                continue
            self.refused.append(f"{name}.{f.name}")
            return built
        for i, f in enumerate(fields):
            kwargs[f.name] = ordinary[f.name]
            try:
                built = cls(**kwargs)
            except (TypeError, ValueError, OverflowError, RuntimeError):
                continue
            self.refused += [f"{name}.{g.name}" for g in fields[:i + 1]]
            return built
        raise ValueError(f"cannot build {name} (EveryEdge {self.value_class.name} instance {index}) from the "
                         f"manifest's fields: {type(exc).__name__}: {exc}") from exc

    def _ref(self, name: str, index: int, seed: int) -> Any:
        if name == "PickleWrapper":  # a PickleWrapper position this class does not fill: a plain object
            self.holds_objects = True
            return {"seed": seed}
        return super()._ref(name, index, seed)


def as_received(value: Any, transport: str) -> Any:
    """A freshly built instance as it arrives over the transport (changed in place)."""
    return _received(value) if transport == "msgpack" else value


def _received(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            msgspec.structs.force_setattr(value, name, _received(getattr(value, name)))
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # pre-msgspec catalogues
        for f in dataclasses.fields(value):
            object.__setattr__(value, f.name, _received(getattr(value, f.name)))
        return value
    if type(value) in (list, tuple, set, frozenset):
        return type(value)(_received(v) for v in value)
    if type(value) is dict:
        return {_received(k): _received(v) for k, v in value.items()}
    return on_the_wire(value)


def edge_messages(manifest: Manifest, value_class: ValueClass) -> list[str]:
    """The messages with at least one position the class applies to (its checks' subjects)."""
    return [name for name, found in _classes_by_message(manifest).items() if value_class.name in found]


_CLASSES_BY_MESSAGE: dict[int, tuple[Manifest, dict[str, set[str]]]] = {}


def _classes_by_message(manifest: Manifest) -> dict[str, set[str]]:
    """{message: the value classes it has positions of}, once per manifest (collection asks per class)."""
    cached = _CLASSES_BY_MESSAGE.get(id(manifest))
    if cached is None or cached[0] is not manifest:
        cached = _CLASSES_BY_MESSAGE[id(manifest)] = (manifest, {
            s.name: {q[3] for q in edge_universe(manifest, s.name)} for s in manifest.messages})
    return cached[1]


def edge_sends(manifest: Manifest, classes: Mapping[str, type]) -> dict[str, dict[str, list[Any]]]:
    """{value class: {message: instances}} that the EveryEdge checks send."""
    out: dict[str, dict[str, list[Any]]] = {}
    for vc in CLASSES:
        builder = EveryEdgeBuilder(manifest, classes, vc)
        out[vc.name] = {name: builder.instances(name) for name in edge_messages(manifest, vc)}
    return out
