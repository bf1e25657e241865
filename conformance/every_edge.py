"""Deterministic instances that put one value class's edge values at every position of every
field, at every depth (conformance/value_classes.py; the EveryEdge checks).

The EveryArm instances (conformance/every_arm.py) give each arm of each field one ordinary
value. These widen the positions the class applies to: a float position of the NonFinite class
takes +inf, -inf and NaN (its width is 3, so an Optional[float] has width 4 and a List of it
holds all four), a container of the EmptyContainer class is once empty and once filled (so what
it holds is still reached), one of the OneElement class holds one element per instance. Every
other position keeps its EveryArm value. A message's instances together reach every
(struct, field, position) with every value of the class.

PickleWrapper positions hold the object itself, as engine code does before the send wraps it:
the PickleWrapperFalsy class puts its falsy objects there; every other class leaves an
Optional[PickleWrapper] None, so its checks need no pickling and run on every implementation.

``received_over`` builds the instances as they arrive over a transport (SPEC §3.1): over
msgpack a numpy scalar arrives as the Python value of its kind; pickle carries it as itself.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Optional

from conformance.coverage import edge_universe
from conformance.every_arm import EveryArmBuilder
from conformance.schema.manifest import Manifest, T
from conformance.value_classes import CLASSES, CONTAINER_KINDS, ValueClass, on_the_wire

__all__ = ["EveryEdgeBuilder", "edge_messages", "edge_sends"]


def _is_wrapper(t: T) -> bool:
    return t.kind == "Ref" and t.name == "PickleWrapper"


class EveryEdgeBuilder(EveryArmBuilder):
    def __init__(self, manifest: Manifest, classes: Mapping[str, type], value_class: ValueClass, *,
                 received_over: Optional[str] = None) -> None:
        super().__init__(manifest, classes)
        self.value_class = value_class
        self.received_over = received_over
        #: an object was placed at a PickleWrapper position: the send must wrap, the receiver unwrap
        self.holds_objects = False
        # By node identity (the manifest's nodes live as long as it does; hashing a node is slow):
        self._values: dict[int, tuple[Any, ...]] = {}
        self._plain_widths: dict[int, int] = {}  # widths of types that name no struct (no cycle to end)

    # -- widths ---------------------------------------------------------------
    def width(self, t: T, stack: tuple[str, ...] = ()) -> int:
        known = self._plain_widths.get(id(t))
        if known is not None:
            return known
        vc = self.value_class
        if self._wrapper_left_none(t):
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

    def _wrapper_left_none(self, t: T) -> bool:
        """An Optional[PickleWrapper] outside the PickleWrapperFalsy class: None (no pickling)."""
        return (not self.value_class.opaque and t.kind == "Union" and any(_is_wrapper(a) for a in t.args)
                and any(a.kind == "None" for a in t.args))

    # -- values ---------------------------------------------------------------
    def value(self, t: T, index: int, seed: int) -> Any:
        vc = self.value_class
        if self._wrapper_left_none(t):
            return None
        values = self._class_values(t)
        if values:
            if _is_wrapper(t):
                self.holds_objects = True
            chosen = copy.deepcopy(values[index])  # fresh: an encoder must not see one object twice
            return on_the_wire(chosen) if self.received_over == "msgpack" else chosen
        if t.kind in CONTAINER_KINDS and vc.sizes:
            return self._container(t, index, seed)
        if t.kind == "Dict":
            return self._dict(t, seed)
        return super().value(t, index, seed)

    def _dict(self, t: T, seed: int) -> dict:
        """Filled as EveryArm fills it, but with distinct keys: where the class has fewer key
        values than the dict needs entries ("" is one str), the other keys are ordinary ones."""
        key_t, value_t = t.args
        if self._reenters(value_t):
            return {}
        keys, values = self.width(key_t), self.width(value_t)
        return {(self._hashable(key_t, i, seed + i) if i < keys else EveryArmBuilder.value(self, key_t, 0, seed + i)):
                self.value(value_t, i % values, seed + i) for i in range(max(keys, values))}

    def _container(self, t: T, index: int, seed: int) -> Any:
        for size in self.value_class.sizes:
            span = 1 if size in (0, None) else self._element_width(t, ())
            if index < span:
                break
            index -= span
        if size is None or (size and self._reenters(t.args[-1])):
            return super().value(t, 0, seed)  # filled as EveryArm fills it (empty where a cycle must end)
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

    def _ref(self, name: str, index: int, seed: int) -> Any:
        if name == "PickleWrapper":  # a PickleWrapper position this class does not fill: a plain object
            self.holds_objects = True
            return {"seed": seed}
        return super()._ref(name, index, seed)


def edge_messages(manifest: Manifest, value_class: ValueClass) -> list[str]:
    """The messages with at least one position the class applies to (its checks' subjects)."""
    return [s.name for s in manifest.messages
            if any(q[3] == value_class.name for q in edge_universe(manifest, s.name))]


def edge_sends(manifest: Manifest, classes: Mapping[str, type]) -> dict[str, dict[str, list[Any]]]:
    """{value class: {message: instances}} that the EveryEdge checks send."""
    out: dict[str, dict[str, list[Any]]] = {}
    for vc in CLASSES:
        builder = EveryEdgeBuilder(manifest, classes, vc)
        out[vc.name] = {name: builder.instances(name) for name in edge_messages(manifest, vc)}
    return out
