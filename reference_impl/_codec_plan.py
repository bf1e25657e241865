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

Whether a message needs any of this is asked per message by two small functions written for
the type's fields (``has_opaque_values``, ``send_work``; see ``_written_checks``).

A send then costs one shallow copy (``msgspec.structs.replace``) that sets the wrapped fields,
instead of a deep struct copy and a walk over every field, and the collision scan runs only
when a map-capable field holds something that can be or contain a map (a nested struct, such
as a request's sampling parameters, only when its own map-capable fields do).
"""

from __future__ import annotations

import keyword
from operator import attrgetter
from typing import Any, Callable, Optional

import msgspec
import msgspec.inspect as mi

from . import _codec_keys
from ._codec_catalogue import array_list_fields
from ._codec_limits import ARRAY_LIST_MIN
from .io_struct import PickleWrapper
from .pickle_wrapper import _is_wrapper_type, _plan, nested_opaque_fields

#: values that hold no map: a map-capable field holding one (or a list/tuple of them) needs no scan
_NO_MAP = frozenset({str, int, float, bool, bytes, bytearray, type(None)})
#: structs inside structs looked into before the scan is simply run (a deeper one: it runs)
_MAX_STRUCT_DEPTH = 8
#: Plan.send_work's flags: an opaque field is set (wrap), the collision scan must run, a
#: List[array] field is long enough for the batched pass
WRAP, SCAN, ARRAYS = 1, 2, 4


def _tuple_getter(names: tuple[str, ...]) -> Optional[Callable[[Any], tuple[Any, ...]]]:
    """A function giving the values of `names` as a tuple (None when there are none)."""
    if not names:
        return None
    if len(names) == 1:
        return attrgetter(names[0], names[0])  # a tuple, like the many-field case
    return attrgetter(*names)


class Plan:
    """What a send or receive of one struct type has to do, from its declared field types."""

    __slots__ = ("cls", "direct", "nested", "opaque", "maps", "arrays", "direct_values", "nested_values",
                 "map_values", "has_opaque_values", "send_work")

    def __init__(self, cls: type) -> None:
        self.cls = cls
        is_struct = isinstance(cls, type) and issubclass(cls, msgspec.Struct)
        fields: tuple[tuple[str, mi.Type], ...] = _plan(cls) if is_struct else ()
        self.direct = tuple(name for name, t in fields if _is_wrapper_type(t))
        self.nested = nested_opaque_fields(cls) if is_struct else ()
        self.opaque = self.direct + self.nested
        self.maps = _codec_keys.map_fields(cls) if is_struct else ()
        self.arrays = array_list_fields(cls) if is_struct else ()
        self.direct_values = _tuple_getter(self.direct)
        self.nested_values = _tuple_getter(self.nested)
        self.map_values = _tuple_getter(self.maps)
        self.has_opaque_values: Callable[[Any], bool]
        self.send_work: Callable[[Any], int]
        self.has_opaque_values, self.send_work = _written_checks(self)

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


def _field(name: str) -> str:
    """An expression reading field `name` of `obj`."""
    return f"obj.{name}" if name.isidentifier() and not keyword.iskeyword(name) else f"getattr(obj, {name!r})"


def _written_checks(plan: Plan) -> tuple[Callable[[Any], bool], Callable[[Any], int]]:
    """Two functions written for the plan's fields, as dataclasses writes an __init__: an
    attribute test per field costs a third of a loop over a tuple of the values in CPython
    (166 vs 510 ns for a one-row step message), and every message of the type pays it.

    has_opaque_values(obj): whether a PickleWrapper-bearing field of obj is set.
    send_work(obj): what a msgpack send of obj does besides msgspec's encode, as flags:
    WRAP (an opaque field is set), SCAN (a map-capable field holds something other than None
    or a list of None, and needs_key_scan says the collision scan must run), ARRAYS (a
    List[array] field holds at least ARRAY_LIST_MIN arrays)."""
    opaque = " or ".join(f"{_field(n)} is not None" for n in plan.opaque) or "False"
    maps = " or ".join(f"((v := {_field(n)}) is not None and (type(v) is not list or v.count(None) != len(v)))"
                       for n in plan.maps) or "False"
    arrays = " or ".join(f"(type(v := {_field(n)}) is list and len(v) >= ARRAY_LIST_MIN)"
                         for n in plan.arrays) or "False"
    source = (f"def has_opaque_values(obj):\n    return {opaque}\n"
              f"def send_work(obj):\n"
              f"    work = WRAP if {opaque} else 0\n"
              f"    if ({maps}) and needs_key_scan(obj):\n        work |= SCAN\n"
              f"    if {arrays}:\n        work |= ARRAYS\n"
              f"    return work\n")
    names: dict[str, Any] = {"WRAP": WRAP, "SCAN": SCAN, "ARRAYS": ARRAYS, "ARRAY_LIST_MIN": ARRAY_LIST_MIN,
                             "needs_key_scan": plan.needs_key_scan}
    # The source holds attribute names only: identifiers (a struct's slots), a keyword through getattr.
    exec(compile(source, f"<checks of {plan.cls!r}>", "exec"), names)
    return names["has_opaque_values"], names["send_work"]


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
