"""Deterministic instances that give every field, at every depth, a value of each of its arms.

The canonical variants (conformance/schema/values.py) stop at depth 3-4 and choose one arm per
union; the instances here reach every (struct, field, arm) of conformance.coverage.

Every type has a width: how many values it takes to cover its arms, each value picked
by an index below the width. A union's width is the sum of its arms' widths (index i
falls in one arm's range); a List holds one item per index of its element, so one
list covers its element entirely (width 1); a struct's width is the widest of its
fields, and its instance number i gives each field the value of index i modulo that
field's width. A message's instances are instance 0 .. width-1, so a struct nested
anywhere inside goes through all of its own instances (the same ones on every path).
Leaf values are non-default and differ from field to field, so a field that is dropped,
zeroed or moved shows.
"""

from __future__ import annotations

import array
import enum
import pickle
import zlib
from functools import lru_cache
from typing import Any, Mapping

import numpy as np

from conformance.coverage import reachable as _reachable
from conformance.schema.manifest import Manifest, T
from conformance.tensors import tensor

__all__ = ["EveryArmBuilder", "deterministic_sends"]


class EveryArmBuilder:
    def __init__(self, manifest: Manifest, classes: Mapping[str, type]) -> None:
        self.manifest = manifest
        self.classes = classes
        self._building: list[str] = []  # structs under construction: a cycle ends at its second turn
        self.struct_width = lru_cache(maxsize=None)(self._struct_width)
        self._reach = lru_cache(maxsize=None)(lambda name: frozenset(_reachable(manifest, name)))

    def instances(self, message: str) -> list[Any]:
        """The instances of one message that together cover all of its (struct, field, arm)."""
        return [self.instance(message, i) for i in range(self.struct_width(message))]

    def instance(self, name: str, index: int) -> Any:
        spec = self.manifest.structs[name]
        self._building.append(name)
        try:
            kwargs = {}
            for f in spec.fields:
                t = f.type_expr
                kwargs[f.name] = self.value(t, index % self.width(t), _seed(name, f.name))
            try:
                return self.classes[name](**kwargs)
            except (TypeError, ValueError) as exc:  # the implementation's class refuses the manifest's fields
                raise ValueError(f"cannot build {name} (EveryArm instance {index}) from the manifest's fields: "
                                 f"{exc}") from exc
        finally:
            self._building.pop()

    # -- widths ---------------------------------------------------------------
    def _struct_width(self, name: str, _stack: tuple[str, ...] = ()) -> int:
        return max([self.width(f.type_expr, (*_stack, name)) for f in self.manifest.structs[name].fields] or [1])

    def width(self, t: T, stack: tuple[str, ...] = ()) -> int:
        k = t.kind
        if k == "Union":
            return sum(self.width(a, stack) for a in t.args)
        if k == "bool":
            return 2
        if k == "Literal":
            return len(t.values)
        if k == "Ref" and t.name in self.manifest.enums:
            return len(self.manifest.enums[t.name].members)
        if k == "Ref" and t.name in self.manifest.structs and t.name != "PickleWrapper":
            if t.name in stack or t.name in self._building:
                return 1  # a cycle: its arms are covered by the outer instances
            return self._struct_width(t.name, stack) if stack else self.struct_width(t.name)
        if k == "Tuple":
            return max([self.width(a, stack) for a in t.args] or [1])
        return 1  # leaves; List/Set/Dict hold all of their element's values at once

    # -- values ---------------------------------------------------------------
    def value(self, t: T, index: int, seed: int) -> Any:
        k = t.kind
        if k == "Union":
            for arm in t.args:
                w = self.width(arm)
                if index < w:
                    if self._reenters(arm):  # a cycle: end it with an arm that does not recurse
                        arm = next((a for a in t.args if not self._reenters(a)), arm)
                        index = 0
                    return self.value(arm, index, seed)
                index -= w
            raise IndexError("index past the union's width")
        if k == "None":
            return None
        if k == "bool":
            return index == 0
        if k == "int":
            return 1 + seed % 9973
        if k == "float":
            return 0.1 + seed % 997  # not integral, not exact in float32
        if k == "str":
            return f"s{seed % 9973}"
        if k == "bytes":
            return bytes([1 + seed % 251, 0, 255])
        if k == "Any":
            return {"any": [seed % 97, "x", None, 2.5, True]}
        if k == "Literal":
            return t.values[index]
        if k == "Ref":
            return self._ref(t.name or "", index, seed)
        if k in ("List", "Set", "FrozenSet", "VarTuple"):
            count = 0 if self._reenters(t.args[0]) else self.width(t.args[0])
            item = self.value if k in ("List", "VarTuple") else self._hashable
            items = [item(t.args[0], i, seed + i) for i in range(count)]
            if k == "List":
                return items
            return tuple(items) if k == "VarTuple" else set(items) if k == "Set" else frozenset(items)
        if k == "Tuple":
            return tuple(self.value(a, index % self.width(a), seed + i) for i, a in enumerate(t.args))
        if k == "Dict":
            key_t, value_t = t.args
            n = 0 if self._reenters(value_t) else max(self.width(key_t), self.width(value_t))
            return {self._hashable(key_t, i % self.width(key_t), seed + i):
                    self.value(value_t, i % self.width(value_t), seed + i) for i in range(n)}
        if k == "Tensor":
            return tensor([float(i + seed % 89) for i in range(6)], "float32", (2, 3))
        if k == "NDArray":
            return (np.arange(6, dtype=np.float64) + seed % 89).reshape(3, 2)
        if k == "Array":
            return array.array(t.name or "q", [seed % 89 + 1, -2, 3])
        raise ValueError(f"no value for type {t!r}")

    def _hashable(self, t: T, index: int, seed: int) -> Any:
        """A value of t that can be a dict key or set item: an Any there holds a str."""
        return f"any{seed % 9973}" if t.kind == "Any" else self.value(t, index, seed)

    def _reenters(self, t: T) -> bool:
        """Would a value of t contain a struct that is being built (a cycle of the manifest)?"""
        # A struct may hold itself once (so the arm that recurses is covered), not twice.
        nested_twice = {name for name in self._building if self._building.count(name) >= 2}
        return any(nested_twice & self._reach(name) for name in t.refs() if name in self.manifest.structs)

    def _ref(self, name: str, index: int, seed: int) -> Any:
        target: Any = self.classes[name]
        if isinstance(target, type) and issubclass(target, enum.Enum):
            members = list(target)
            return members[index % len(members)]
        if name == "PickleWrapper":
            # Wrapped bytes are implementation-private: a fixed protocol-4 payload.
            return target(data=pickle.dumps({"seed": seed}, protocol=4))
        if self._building.count(name) >= 2:
            raise ValueError(f"{name} contains itself with no Optional or container to end the cycle")
        return self.instance(name, index)


def _seed(struct: str, field: str) -> int:
    """A stable number per field, so neighbouring fields carry different values."""
    return zlib.crc32(f"{struct}.{field}".encode())


def deterministic_sends(manifest: Manifest, classes: Mapping[str, type], *,
                        every_arm: bool = True) -> dict[str, list[Any]]:
    """{message: instances} that the suite's deterministic checks send: the canonical
    variants (RoundTrip.Identical, the golden vectors) and, unless every_arm is False,
    the EveryArm instances."""
    from conformance.schema.values import canonical_instances

    sent = {name: list(by_variant.values()) for name, by_variant in canonical_instances(manifest, classes).items()}
    if every_arm:
        builder = EveryArmBuilder(manifest, classes)
        for name in sent:
            sent[name] += builder.instances(name)
    return sent
