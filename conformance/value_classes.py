"""Value classes: the edge values real engines put in each kind of field (spec/SPEC.md §3, §3.1).

A value class names a few values of one family (the non-finite floats, the 64-bit int bounds,
the falsy objects a PickleWrapper position may hold, ...) and says which positions of a type
expression take them: a leaf kind (float, int, str, ...), a PickleWrapper position, or a
container (its size: empty, one element). The EveryEdge checks (conformance/every_edge.py) put
each class's values at every position it applies to, at every depth; conformance.coverage
measures which (struct, field, arm, value class) those instances reach.

`identity` is how a value is recognised again: type name and exact content (floats by their
bits), so -0.0 is not 0.0, True is not 1 and np.float32(0.5) is not 0.5.
"""

from __future__ import annotations

import array
import math
import struct
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from conformance.schema.manifest import T
from conformance.tensors import WireTensor, is_tensor, tensor

__all__ = ["CLASSES", "CONTAINER_KINDS", "ValueClass", "by_name", "identity", "on_the_wire"]

#: Type kinds whose values are containers: a value class may give them a size.
CONTAINER_KINDS = {"List": "list", "Set": "set", "FrozenSet": "frozenset", "VarTuple": "tuple", "Dict": "dict"}

_F32 = np.float32


@dataclass(frozen=True)
class ValueClass:
    """One family of edge values. `values(t)` gives the values a leaf or PickleWrapper position
    of type t takes (empty: the class does not apply there); `sizes` the sizes a container takes
    (None: the container is filled as EveryArm fills it, with every arm of its element)."""

    name: str
    doc: str
    requirements: tuple[str, ...]
    leaves: Callable[[T], tuple[Any, ...]] = lambda t: ()
    sizes: tuple[Optional[int], ...] = ()
    #: the values stand for the object a PickleWrapper position holds (wrapped on send)
    opaque: bool = False
    #: numpy scalars: the class tests the Python encoder's input domain (SPEC §3.1), which a
    #: testee's JSON view cannot express
    python_only: bool = False
    #: the class gives tensor positions values (made only when asked for: making a tensor imports
    #: torch, which knowing where the class applies must not)
    tensors: bool = False

    def values(self, t: T) -> tuple[Any, ...]:
        return self.leaves(t)

    def applies(self, t: T) -> bool:
        """Does a position of type t (a leaf, PickleWrapper, or container node) take this class?"""
        if t.kind in CONTAINER_KINDS:
            return bool(self.sizes)
        if t.kind == "Tensor":
            return self.tensors
        return bool(self.values(t))


def _of(table: dict[str, tuple[Any, ...]]) -> Callable[[T], tuple[Any, ...]]:
    return lambda t: table.get(t.kind, ())


def _int_array_bounds(t: T) -> tuple[Any, ...]:
    """An int array at the bounds of its typecode's width (token ids are array('q'))."""
    code = t.name or "q"
    if code not in "bBhHiIlLqQ":
        return ()
    bits = 8 * array.array(code).itemsize
    low, high = (0, 2**bits - 1) if code.isupper() else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return (array.array(code, [low, high, 0, 1 if code.isupper() else -1]),)


def _ints(t: T) -> tuple[Any, ...]:
    if t.kind == "int":
        return (0, -1, 2**53 + 1, -(2**63), 2**63 - 1, 2**64 - 1)
    return _int_array_bounds(t) if t.kind == "Array" else ()


def _empty(t: T) -> tuple[Any, ...]:
    if t.kind == "Array":
        return (array.array(t.name or "q"),)
    if t.kind == "NDArray":
        return (np.zeros((0, 3), dtype=np.float32),)
    if t.kind == "Tensor":
        return (tensor([], "int64", (2, 0)),)
    return ({}, []) if t.kind == "Any" else ()


def _one(t: T) -> tuple[Any, ...]:
    return (array.array(t.name or "q", [7]),) if t.kind == "Array" else ()


def _zero_dim(t: T) -> tuple[Any, ...]:
    # Made when asked, as _empty's: a tensor made at import would import torch for every run.
    if t.kind == "NDArray":
        return (np.array(-1.5), np.array(7, dtype=np.int32))
    return (tensor(2.5), tensor(-3, "int64")) if t.kind == "Tensor" else ()


def _pickle_wrapper(values: tuple[Any, ...]) -> Callable[[T], tuple[Any, ...]]:
    return lambda t: values if t.kind == "Ref" and t.name == "PickleWrapper" else ()


CLASSES: tuple[ValueClass, ...] = (
    ValueClass("NonFinite", "+inf, -inf and NaN at every float position (a masked token's logprob is -inf)",
               ("R-VAL-2", "R-NONE-1"), _of({"float": (math.inf, -math.inf, math.nan),
                                             "Any": (math.inf, -math.inf, math.nan)})),
    ValueClass("SignedZero", "0.0 and -0.0 at every float position (-0.0 is not 0.0)", ("R-VAL-2",),
               _of({"float": (0.0, -0.0)})),
    ValueClass("Subnormal", "the smallest and the largest subnormal float64, both signs", ("R-VAL-2",),
               _of({"float": (5e-324, -5e-324, 2.225073858507201e-308)})),
    ValueClass("Float32Origin", "floats computed in float32 (float(np.float32(x))): they stay float 64 on the "
               "wire, their value unchanged", ("R-VAL-2", "R-VAL-5"),
               _of({"float": (float(_F32(0.1)), float(_F32(-1 / 3)), float(np.finfo(_F32).max))})),
    ValueClass("IntEdges", "0, -1, 2**53+1, the signed 64-bit bounds and 2**64-1 at every int position; "
               "array.array items at the bounds of their typecode", ("R-VAL-1",), _ints),
    ValueClass("EmptyText", "\"\" at every str position", ("R-VAL-3",), _of({"str": ("",)})),
    ValueClass("NonAscii", "non-ASCII text: Latin and CJK, an astral emoji, an embedded NUL", ("R-VAL-3",),
               _of({"str": ("ünï 漢字", "🙂𝄞", "a\u0000b")})),
    ValueClass("EmptyBytes", "b\"\" at every bytes position", ("R-MSG-1",), _of({"bytes": (b"",)})),
    ValueClass("EmptyContainer", "every list, tuple, set, dict and array empty (and filled, to reach what it "
               "holds); empty ndarrays and tensors; {} and [] in Any positions", ("R-MSG-1", "R-NONE-1", "R-TEN-2"),
               _empty, sizes=(0, None), tensors=True),
    ValueClass("OneElement", "every list, tuple, set, dict and array with exactly one element", ("R-MSG-1",),
               _one, sizes=(1,)),
    ValueClass("ZeroDim", "0-d ndarrays and tensors (a scalar result of array maths)",
               ("R-TEN-2", "R-VAL-9", "R-NORM-2"),
               _zero_dim, tensors=True),
    ValueClass("PickleWrapperFalsy", "the falsy objects {}, [], 0, \"\", False and 0.0 at PickleWrapper "
               "positions: wrapped on send, they arrive as themselves, never None", ("R-PW-1", "R-PW-3"),
               _pickle_wrapper(({}, [], 0, "", False, 0.0)), opaque=True),
    ValueClass("NumpyScalar", "numpy scalars where engine code holds them: np.bool_ in bool, np.float32 and "
               "np.float64 in float, np.int64 and np.int32 in int positions, numpy scalars in Any (SPEC §3.1)",
               ("R-VAL-7", "R-VAL-8"),
               _of({"bool": (np.bool_(True), np.bool_(False)),
                    "float": (np.float32(0.1), np.float64(-2.5)),
                    "int": (np.int64(-(2**53) - 1), np.int32(-7)),
                    "Any": (np.float32(0.25), np.int64(-3), np.bool_(True))}),
               python_only=True),
)

_BY_NAME = {c.name: c for c in CLASSES}


def by_name(name: str) -> ValueClass:
    return _BY_NAME[name]


def identity(value: Any) -> tuple[Any, ...]:
    """What a value is, exactly enough to tell the values of the classes apart."""
    cls = type(value)
    kind = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    if isinstance(value, (float, np.floating)):
        return kind, struct.pack("<d", float(value)).hex()
    if isinstance(value, np.ndarray):
        return kind, value.dtype.str, value.shape, value.tobytes()
    if isinstance(value, WireTensor):
        return kind, f"torch.{value.dtype}", value.shape, value.data
    if is_tensor(value):
        return kind, str(value.dtype), tuple(value.shape), value.numpy().tobytes() if value.numel() else b""
    if isinstance(value, array.array):
        return kind, value.typecode, tuple(value)
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return kind, len(value)
    return kind, repr(value)


def on_the_wire(value: Any) -> Any:
    """What a value of the encoder input domain arrives as over msgpack (SPEC §3.1): a numpy
    scalar becomes the Python value of its kind; anything else is itself."""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.integer):
        return int(value)
    return value
