"""Deterministic canonical instances of every struct, built from the manifest's types.

The same manifest and variant give the same values for any implementation: the
builder only needs the implementation's classes by name. Variants:
  minimal  required fields only, smallest values (None, 0, "", [])
  typical  every field set to a representative non-default value
  edge     nested None, empty containers, unicode, extremes, 0-d/empty tensors
and, for `schema verify` only (no golden vector stores it):
  bounds   typical, with every int one a float64 cannot hold exactly: 2**53 + 1, the int64
           bounds (an int read as float is rounded without an error)
"""

from __future__ import annotations

import array
import enum
import pickle
import struct
from typing import Any, Mapping

import numpy as np

from conformance.schema.manifest import Manifest, StructSpec, T, parse

VARIANTS = ("minimal", "typical", "edge")
EXCHANGE_VARIANTS = VARIANTS + ("bounds",)
# seed % 3 picks one; lists of two items hold two different ones
_BOUNDS = (2**53 + 1, 2**63 - 1, -(2**63))
MAX_DEPTH = 4  # recursive types stop here (None / empty containers)


class ValueBuilder:
    def __init__(self, manifest: Manifest, classes: Mapping[str, type], variant: str = "typical") -> None:
        if variant not in EXCHANGE_VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(EXCHANGE_VARIANTS)}")
        self.manifest = manifest
        self.classes = classes
        self.variant = variant

    def instance(self, name: str, depth: int = 0) -> Any:
        spec: StructSpec = self.manifest.structs[name]
        cls = self.classes[name]
        kwargs = {}
        for i, field in enumerate(spec.fields):
            # Opaque defaults (a fresh uuid) would make two instances differ: always set them.
            required = field.default.kind == "required" or field.default.factory == "opaque"
            if self.variant == "minimal" and not required:
                continue
            kwargs[field.name] = self.value(field.type_expr, depth + 1, seed=i, field=field.name)
        return cls(**kwargs)

    def value(self, t: T, depth: int, seed: int = 0, field: str = "") -> Any:
        k = t.kind
        v = "typical" if self.variant == "bounds" else self.variant
        shallow = depth >= MAX_DEPTH
        if k == "None":
            return None
        if k == "Union":
            arms = [a for a in t.args if a.kind != "None"]
            if t.is_optional and (v == "minimal" or shallow or (v == "edge" and seed % 2)):
                return None
            # typical: a struct arm when there is one, so every nested struct appears in some
            # vector; otherwise rotate through the arms so unions are exercised beyond one choice.
            structs = [a for a in arms if a.kind == "Ref" and a.name in self.manifest.structs]
            if v == "typical" and structs:
                return self.value(structs[seed % len(structs)], depth, seed, field)
            return self.value(arms[seed % len(arms)], depth, seed, field)
        if k == "bool":
            return v != "minimal"
        if k == "int":
            if self.variant == "bounds":
                return _BOUNDS[seed % len(_BOUNDS)]
            return {"minimal": 0, "typical": 7 + seed, "edge": -(2**63) if seed % 2 else 2**63 - 1}[v]
        if k == "float":
            return {"minimal": 0.0, "typical": 0.5 + seed, "edge": -0.0 if seed % 2 else -1e308}[v]
        if k == "str":
            return {"minimal": "", "typical": f"{field or 'text'}-{seed}", "edge": "ünï 漢字 🙂\u0000"}[v]
        if k == "bytes":
            return {"minimal": b"", "typical": b"\x00\x01\xfe\xff", "edge": bytes(range(256))}[v]
        if k == "Any":
            return None if v == "minimal" else {"key": [1, "two", None, 3.5, True]}
        if k == "Literal":
            return t.values[0 if v != "edge" else -1]
        if k == "Ref":
            target: Any = self.classes[t.ref]
            if isinstance(target, type) and issubclass(target, enum.Enum):
                members = list(target)
                return members[0 if v != "edge" else -1]
            if t.ref == "PickleWrapper":
                # Wrapped bytes are implementation-private; a fixed protocol-4 payload is
                # byte-identical whoever encodes it.
                return target(data=pickle.dumps({"created": 1.5, "seed": seed}, protocol=4))
            return self.instance(t.ref, depth)
        if k in ("List", "Set", "FrozenSet", "VarTuple"):
            items = self._items(t.args[0], depth, seed, field)
            if k == "List":
                return items
            if k == "VarTuple":
                return tuple(items)
            members = [i for i in items if hashable(i)]
            return set(members) if k == "Set" else frozenset(members)
        if k == "Tuple":
            return tuple(self.value(a, depth + 1, seed + i, field) for i, a in enumerate(t.args))
        if k == "Dict":
            if v == "minimal" or shallow:
                return {}
            key = self.value(t.args[0], depth + 1, seed, field)
            if not hashable(key):
                return {}
            return {key: self.value(t.args[1], depth + 1, seed + 1, field)}
        if k == "Tensor":
            return _tensor(v, seed)
        if k == "NDArray":
            return _ndarray(v, seed)
        if k == "Array":
            code = t.name or "q"
            return array.array(code, [] if v == "minimal" else ([1, 2, 3] if v == "typical" else [0, -1, 2**62]))
        raise ValueError(f"no value for type {t!r}")

    def _items(self, item: T, depth: int, seed: int, field: str) -> list[Any]:
        if self.variant == "minimal" or depth >= MAX_DEPTH:
            return []
        if self.variant == "edge":
            # Nested None and empty inner lists: the logprob shapes [[None, -0.18], [], None].
            return [self.value(item, depth + 1, seed + 1, field), self.value(item, depth + 1, seed, field)]
        return [self.value(item, depth + 1, seed + j, field) for j in range(2)]


def hashable(value: Any) -> bool:
    """Can this value be a set member or a dict key?"""
    try:
        hash(value)
        return True
    except TypeError:
        return False


def _tensor(variant: str, seed: int) -> Any:
    """A torch tensor; where torch is not installed, the WireTensor with the same wire bytes."""
    from conformance.schema.wire_ext import WireTensor, torch_available

    if not torch_available():
        if variant == "minimal":
            return WireTensor((0,), "float32")
        if variant == "typical":
            return WireTensor((2, 3), "float32", data=struct.pack("<6f", *(float(i + seed) for i in range(6))))
        return WireTensor((), "bfloat16", data=b"\x00\x80") if seed % 2 else WireTensor((0, 4), "int64")
    import torch

    if variant == "minimal":
        return torch.zeros(0, dtype=torch.float32)
    if variant == "typical":
        return torch.arange(6, dtype=torch.float32).reshape(2, 3) + seed
    # edge: bf16 0-d, or an empty 2-d int tensor
    return torch.tensor(-0.0, dtype=torch.bfloat16) if seed % 2 else torch.zeros((0, 4), dtype=torch.int64)


def _ndarray(variant: str, seed: int) -> np.ndarray:
    if variant == "minimal":
        return np.zeros(0, dtype=np.float32)
    if variant == "typical":
        return (np.arange(6, dtype=np.float32) + seed).reshape(2, 3)
    return np.array(-0.0, dtype=np.float64) if seed % 2 else np.zeros((0, 2), dtype=np.int32)


def canonical_instances(manifest: Manifest, classes: Mapping[str, type],
                        names: Any = None) -> dict[str, dict[str, Any]]:
    """{struct: {variant: instance}} for the messages of the manifest (or the given names)."""
    names = names or [s.name for s in manifest.messages]
    return {n: {v: ValueBuilder(manifest, classes, v).instance(n) for v in VARIANTS} for n in names}


__all__ = ["EXCHANGE_VARIANTS", "VARIANTS", "ValueBuilder", "canonical_instances", "parse"]
