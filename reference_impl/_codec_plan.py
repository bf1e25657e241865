"""Per-struct-type plans of the msgpack path, computed once per type. Performance only: a plan
gives the bytes and values of the walks in ``pickle_wrapper`` and ``_codec_keys`` (the slow
path), which stay the reference (tests/test_codec_plan.py checks every catalogue struct).

A message type's plan says, from its declared field types:

- ``direct``: fields typed PickleWrapper (or a union holding it): a value there is replaced
  whole by its wrapper (send) or by the wrapper's object (receive);
- ``nested``: fields holding PickleWrapper positions further down (a struct or container of
  them): when one of these is set, the send and receive take the slow path (a deep skeleton
  copy and the typed walk), which is rare (batched requests);
- ``maps``: fields whose values can hold a map, the only ones the map-key collision scan
  (SPEC R-VAL-6) looks into;
- ``arrays``: top-level ``List[array]`` fields (encoded in one batched pass).

A send then costs one shallow copy (``msgspec.structs.replace``) that sets the wrapped fields,
instead of a deep struct copy and a walk over every field, and the collision scan runs only
when a map-capable field holds something that can be or contain a map (a nested struct, such
as a request's sampling parameters, only when its own map-capable fields do).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Callable, Optional

import msgspec
import msgspec.inspect as mi

from . import _codec_keys
from ._codec_catalogue import array_list_fields
from .io_struct import PickleWrapper
from .pickle_wrapper import _is_wrapper_type, _plan, nested_opaque_fields

#: values that hold no map: a map-capable field holding one (or a list/tuple of them) needs no scan
_NO_MAP = frozenset({str, int, float, bool, bytes, bytearray, type(None)})
#: structs inside structs looked into before the scan is simply run (a deeper one: it runs)
_MAX_STRUCT_DEPTH = 8


def _tuple_getter(names: tuple[str, ...]) -> Optional[Callable[[Any], tuple[Any, ...]]]:
    """A function giving the values of `names` as a tuple (None when there are none)."""
    if not names:
        return None
    if len(names) == 1:
        return attrgetter(names[0], names[0])  # a tuple, like the many-field case
    return attrgetter(*names)


class Plan:
    """What a send or receive of one struct type has to do, from its declared field types."""

    __slots__ = ("cls", "direct", "nested", "opaque", "maps", "arrays", "opaque_values", "direct_values",
                 "nested_values", "map_values")

    def __init__(self, cls: type) -> None:
        self.cls = cls
        is_struct = isinstance(cls, type) and issubclass(cls, msgspec.Struct)
        fields: tuple[tuple[str, mi.Type], ...] = _plan(cls) if is_struct else ()
        self.direct = tuple(name for name, t in fields if _is_wrapper_type(t))
        self.nested = nested_opaque_fields(cls) if is_struct else ()
        self.opaque = self.direct + self.nested
        self.maps = _codec_keys.map_fields(cls) if is_struct else ()
        self.arrays = array_list_fields(cls) if is_struct else ()
        self.opaque_values = _tuple_getter(self.opaque)
        self.direct_values = _tuple_getter(self.direct)
        self.nested_values = _tuple_getter(self.nested)
        self.map_values = _tuple_getter(self.maps)

    def has_opaque_values(self, obj: Any) -> bool:
        """Whether a PickleWrapper-bearing field of obj is set."""
        if self.opaque_values is None:
            return False
        values = self.opaque_values(obj)
        return values.count(None) != len(values)

    def simple(self, obj: Any) -> bool:
        """Whether no nested PickleWrapper-bearing field is set (the direct fields are all)."""
        if self.nested_values is None:
            return True
        values = self.nested_values(obj)
        return values.count(None) == len(values)

    def needs_key_scan(self, obj: Any, depth: int = 0) -> bool:
        """Whether a map-capable field of obj holds something that is or can contain a map (a
        list of scalars, None or a scalar cannot; a struct only through its own map-capable
        fields, asked the same way): only then is the collision scan run."""
        if self.map_values is None:
            return False
        for value in self.map_values(obj):
            t = type(value)
            if t in _NO_MAP:
                continue
            if (t is list or t is tuple) and _NO_MAP.issuperset(map(type, value)):
                continue
            # A request's sampling parameters: a struct whose maps (logit_bias, ...) are unset.
            if isinstance(value, msgspec.Struct) and depth < _MAX_STRUCT_DEPTH \
                    and not plan_of(t).needs_key_scan(value, depth + 1):
                continue
            return True
        return False


_plans: dict[type, Plan] = {}


def plan_of(cls: type) -> Plan:
    """The plan of a type, computed on first use (types never change their fields)."""
    plan = _plans.get(cls)
    if plan is None:
        plan = _plans[cls] = Plan(cls)
    return plan


def wrap_direct(obj: Any, plan: Plan, wrap: Callable[[Any], Any]) -> Any:
    """A shallow copy of obj (a struct none of whose nested opaque fields is set) whose
    PickleWrapper-typed fields hold wrap(value); the caller's object is not modified."""
    assert plan.direct_values is not None
    changes = {name: wrap(value) for name, value in zip(plan.direct, plan.direct_values(obj)) if value is not None}
    return msgspec.structs.replace(obj, **changes)


def unwrap_direct(obj: Any, plan: Plan, open_wrapper: Callable[[Any, str, str], Any]) -> Any:
    """Receive side, in place: each PickleWrapper in a PickleWrapper-typed field of obj (a struct
    none of whose nested opaque fields is set) replaced by open_wrapper(value, struct, path)."""
    assert plan.direct_values is not None
    struct = type(obj).__name__
    for name, value in zip(plan.direct, plan.direct_values(obj)):
        if isinstance(value, PickleWrapper):
            msgspec.structs.force_setattr(obj, name, open_wrapper(value, struct, f".{name}"))
    return obj
