"""Hypothesis strategies derived from the manifest's field types, for any implementation.

`StrategyBuilder(manifest, classes).for_struct(name)` draws instances of that
implementation's class. Overrides: by type expression ("Tensor", "Array[q]",
"SamplingParams") or by field ("BatchTokenIDOutput.decode_ids"), via
`register_override` or the builder's `overrides` argument.

`exclude` names triggers of known defects (conformance/expectations: a cause line's
``trigger: ...``) that the builder never draws, so a search listed for one known defect goes
on finding others instead of shrinking to that defect's example. The vocabulary is
`expectations.TRIGGERS`: ``ndarray-0d``, ``tensor-0d``, ``ndarray-dtype:<glob>``,
``tensor-dtype:<glob>`` (dtype names as numpy / torch print them, e.g. ``float8_*``),
``float-nan``, ``float-inf``.
"""

from __future__ import annotations

import array
import enum
import fnmatch
import math
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np
from hypothesis import strategies as st

from conformance.schema.manifest import Manifest, T, parse
from conformance.schema.values import hashable
from conformance.schema.wire_ext import ITEMSIZE, WireTensor, torch_available

MAX_DEPTH = 3
MAX_ITEMS = 3

_OVERRIDES: dict[str, st.SearchStrategy] = {}


def register_override(key: str, strategy: st.SearchStrategy) -> None:
    """Use `strategy` for a type expression (e.g. "Tensor") or a field ("Struct.field")."""
    _OVERRIDES[key] = strategy


#: The tensor dtypes drawn, by name: torch dtypes where torch is installed (those it has), else
#: WireTensors of these names (conformance.schema.wire_ext).
TENSOR_DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
                      "complex64", "float8_e4m3fn", "float8_e5m2")


def tensor_dtypes() -> list[Any]:
    if not torch_available():
        return list(TENSOR_DTYPE_NAMES)
    import torch

    return [getattr(torch, n) for n in TENSOR_DTYPE_NAMES if isinstance(getattr(torch, n, None), torch.dtype)]


NUMPY_DTYPES = [np.dtype(x) for x in ("<f4", "<f8", "<f2", "<i8", "<i4", "|i1", "|u1", "|b1", ">i4", "<c8")]
shapes = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)


def _shapes(min_dims: int) -> st.SearchStrategy:
    return shapes if not min_dims else st.lists(st.integers(0, 4), min_size=min_dims, max_size=3).map(tuple)


@st.composite
def tensors(draw: Callable[..., Any], devices: tuple[str, ...] = ("cpu",), dtypes: Optional[Sequence[Any]] = None,
            min_dims: int = 0) -> Any:
    """Any dtype (bf16, fp8 too), 0-d/empty shapes, random bits; sometimes a non-contiguous
    transpose or a sliced view of a bigger tensor; on CUDA too when available. Where torch is
    not installed, WireTensors of those dtypes, shapes and bits."""
    dtype = draw(st.sampled_from(list(tensor_dtypes() if dtypes is None else dtypes)))
    shape = draw(_shapes(min_dims))
    if isinstance(dtype, str):  # no torch: the wire form
        size = math.prod(shape) * ITEMSIZE[dtype]
        raw = draw(st.binary(min_size=size, max_size=size))
        if dtype == "bool":
            raw = bytes(b & 1 for b in raw)
        return WireTensor(shape, dtype, "cpu", raw)
    import torch

    extra = draw(st.integers(0, 2))  # rows the view will drop
    full = (shape[0] + extra,) + shape[1:] if shape else shape
    n = math.prod(full) * dtype.itemsize
    raw = bytearray(draw(st.binary(min_size=n, max_size=n)))
    base = torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(full) if n else torch.empty(full, dtype=dtype)
    if dtype is torch.bool:
        base = base.view(torch.uint8).clamp(0, 1).view(torch.bool) if n else base
    t = base[extra:] if shape and extra else base
    if t.dim() >= 2 and draw(st.booleans()):
        t = t.transpose(0, 1)
    device = draw(st.sampled_from(devices))
    return t.to(device) if device != "cpu" else t


@st.composite
def ndarrays(draw: Callable[..., Any], dtypes: Sequence[np.dtype] = NUMPY_DTYPES, min_dims: int = 0) -> np.ndarray:
    dtype = draw(st.sampled_from(list(dtypes)))
    shape = draw(_shapes(min_dims))
    n = math.prod(shape) * dtype.itemsize
    raw = draw(st.binary(min_size=n, max_size=n))
    arr: np.ndarray = np.frombuffer(raw, dtype=np.uint8).view(dtype).reshape(shape).copy()
    if dtype.kind == "b":
        arr = np.asarray(arr.view(np.uint8).clip(0, 1)).view(dtype)
    if arr.ndim >= 2 and draw(st.booleans()):
        arr = arr.T
    return arr


_ARRAY_RANGES = {"b": (-128, 127), "B": (0, 255), "h": (-2**15, 2**15 - 1), "H": (0, 2**16 - 1),
                 "i": (-2**31, 2**31 - 1), "I": (0, 2**32 - 1), "l": (-2**63, 2**63 - 1),
                 "L": (0, 2**64 - 1), "q": (-2**63, 2**63 - 1), "Q": (0, 2**64 - 1)}


def arrays(typecode: Optional[str], nan: bool = True, inf: bool = True) -> st.SearchStrategy:
    codes = [typecode] if typecode else list(_ARRAY_RANGES) + ["f", "d"]

    def build(code: str) -> st.SearchStrategy:
        if code in ("f", "d"):
            items = st.floats(width=32 if code == "f" else 64, allow_nan=nan, allow_infinity=inf)
        else:
            items = st.integers(*_ARRAY_RANGES[code])
        return st.lists(items, max_size=8).map(lambda xs: array.array(code, xs))

    return st.sampled_from(codes).flatmap(build)


def json_like(floats: Optional[st.SearchStrategy] = None) -> st.SearchStrategy:
    """What an `Any` field can carry through msgpack unchanged: no tuples, str keys."""
    floats = st.floats() if floats is None else floats
    leaves = st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | floats | st.text(max_size=8)
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


def _name(dtype: Any) -> str:
    if isinstance(dtype, str) and dtype in ITEMSIZE or type(dtype).__module__ == "torch":
        return str(dtype).removeprefix("torch.")
    return str(np.dtype(dtype).name)


def _without(dtypes: Sequence[Any], globs: list[str]) -> list[Any]:
    kept = [d for d in dtypes if not any(fnmatch.fnmatchcase(_name(d), g) for g in globs)]
    if not kept:
        raise ValueError(f"the excluded dtypes {globs} leave no dtype to draw")
    return kept


def local_devices() -> tuple[str, ...]:
    """cpu, and cuda where torch is installed and sees a GPU."""
    if not torch_available():
        return ("cpu",)
    import torch

    return ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)


class StrategyBuilder:
    def __init__(self, manifest: Manifest, classes: Mapping[str, type],
                 overrides: Optional[Mapping[str, st.SearchStrategy]] = None,
                 devices: Optional[tuple[str, ...]] = ("cpu",), exclude: Iterable[str] = ()):
        """devices None: the devices torch sees here (cpu, and cuda with a GPU), asked only when a
        tensor strategy is built (asking imports torch)."""
        self.manifest = manifest
        self.classes = classes
        self.overrides = {**_OVERRIDES, **(overrides or {})}
        self.devices = devices
        self.exclude = frozenset(exclude)
        unknown = [t for t in self.exclude if not _known_trigger(t)]
        if unknown:
            raise ValueError(f"unknown triggers {sorted(unknown)}: see conformance.expectations.TRIGGERS")
        self._cache: dict[tuple[str, int], st.SearchStrategy] = {}

    def _globs(self, prefix: str) -> list[str]:
        return [t[len(prefix):] for t in self.exclude if t.startswith(prefix)]

    def _floats(self) -> st.SearchStrategy:
        return st.floats(allow_nan="float-nan" not in self.exclude, allow_infinity="float-inf" not in self.exclude)

    def _tensors(self) -> st.SearchStrategy:
        if self.devices is None:
            self.devices = local_devices()
        return tensors(self.devices, _without(tensor_dtypes(), self._globs("tensor-dtype:")),
                       min_dims=int("tensor-0d" in self.exclude))

    def _ndarrays(self) -> st.SearchStrategy:
        return ndarrays(_without(NUMPY_DTYPES, self._globs("ndarray-dtype:")),
                        min_dims=int("ndarray-0d" in self.exclude))

    def for_struct(self, name: str, depth: int = 0) -> st.SearchStrategy:
        key = (name, min(depth, MAX_DEPTH + 1))
        if key not in self._cache:
            self._cache[key] = self._struct(name, depth)
        return self._cache[key]

    def _struct(self, name: str, depth: int) -> st.SearchStrategy:
        if name in self.overrides:
            return self.overrides[name]
        spec = self.manifest.structs[name]
        cls = self.classes[name]
        required, optional = {}, {}
        for field in spec.fields:
            strategy = self.overrides.get(f"{name}.{field.name}") or self.for_type(field.type_expr, depth + 1)
            if field.default.kind == "required" or field.default.factory == "opaque":
                required[field.name] = strategy
            else:
                optional[field.name] = strategy
        # An implementation's own construction checks (__post_init__) may refuse a drawn
        # combination: that is not a wire finding, so such draws are rejected.
        return st.fixed_dictionaries(required, optional=optional).map(lambda kw: _construct(cls, kw)).filter(
            lambda value: value is not _REFUSED)

    def for_type(self, t: T, depth: int) -> st.SearchStrategy:
        from conformance.schema.manifest import render

        override = self.overrides.get(render(t))
        if override is not None:
            return override
        k, deep = t.kind, depth > MAX_DEPTH
        if k == "None":
            return st.none()
        if k == "Union":
            arms = [a for a in t.args if a.kind != "None"]
            if deep and t.is_optional:
                return st.none()
            inner = st.one_of([self.for_type(a, depth) for a in arms])
            return st.none() | inner if t.is_optional else inner
        simple = {
            "bool": st.booleans(), "int": st.integers(-2**63, 2**64 - 1), "float": self._floats(),
            "str": st.text(max_size=12), "bytes": st.binary(max_size=16), "Any": json_like(self._floats()),
        }
        if k in simple:
            return simple[k]
        if k == "Literal":
            return st.sampled_from(t.values)
        if k == "Tensor":
            return self._tensors()
        if k == "NDArray":
            return self._ndarrays()
        if k == "Array":
            return arrays(t.name, nan="float-nan" not in self.exclude, inf="float-inf" not in self.exclude)
        if k == "Ref":
            target: Any = self.classes[t.ref]
            if isinstance(target, type) and issubclass(target, enum.Enum):
                return st.sampled_from(list(target))
            if t.ref == "PickleWrapper":
                return st.binary(max_size=16).map(lambda b: target(data=b))
            return self.for_struct(t.ref, depth)
        size = 0 if deep else MAX_ITEMS
        if k == "List":
            return st.lists(self.for_type(t.args[0], depth + 1), max_size=size)
        if k == "VarTuple":
            return st.lists(self.for_type(t.args[0], depth + 1), max_size=size).map(tuple)
        if k in ("Set", "FrozenSet"):
            make = set if k == "Set" else frozenset
            return st.sets(self.for_type(t.args[0], depth + 1).filter(hashable), max_size=size).map(make)
        if k == "Tuple":
            return st.tuples(*[self.for_type(a, depth + 1) for a in t.args])
        if k == "Dict":
            keys = self.for_type(t.args[0], depth + 1).filter(hashable)
            return st.dictionaries(keys, self.for_type(t.args[1], depth + 1), max_size=size)
        raise ValueError(f"no strategy for type {t!r}")


def _known_trigger(trigger: str) -> bool:
    from conformance.expectations import known_trigger

    return known_trigger(trigger)


_REFUSED = object()


def _construct(cls: type, kwargs: dict[str, Any]) -> Any:
    try:
        return cls(**kwargs)
    except Exception:  # noqa: BLE001 - whatever a constructor raises, it refused these values
        return _REFUSED


__all__ = ["StrategyBuilder", "arrays", "json_like", "ndarrays", "parse", "register_override", "tensors"]
