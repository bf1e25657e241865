"""The state of an implementation's own opaque objects (time stats, handshakes, customized info),
as a tree that ``conformance.compare.differences`` compares attribute by attribute.

Such objects travel inside a PickleWrapper, so what arrives is whatever the class's pickling kept:
an attribute its ``__getstate__`` leaves out is read on the receiving side as the class default
(or not at all). Comparing the objects with ``==`` would miss that (a dataclass compares only its
fields, a plain class only identity); comparing their ``__getstate__`` would run the very code
under test on both sides. So the view reads what a receiver reads: every attribute of the
instance (``__dict__``, slots, dataclass and msgspec fields) through ``getattr``.
"""

from __future__ import annotations

import array
import dataclasses
import enum
import sys
from typing import Any

import msgspec
import numpy as np

from conformance.tensors import WireTensor

#: What the view shows for an attribute the sent object has and the received one lacks.
MISSING = "<attribute missing>"
_PLAIN_LEAVES = (type(None), bool, int, float, complex, str, bytes, bytearray, WireTensor, np.ndarray, np.generic,
                 array.array, enum.Enum, type)


def _leaves(*torch_types: str) -> tuple[type, ...]:
    """The leaf types, torch's among them where torch was imported (no torch object exists otherwise)."""
    torch = sys.modules.get("torch")
    return _PLAIN_LEAVES + (tuple(getattr(torch, n) for n in ("Tensor", "dtype", "device", *torch_types))
                            if torch is not None else ())


def attribute_names(obj: Any) -> list[str]:
    """The instance's attributes: dataclass or msgspec fields first, then __dict__, then slots."""
    names: list[str] = []
    if isinstance(obj, msgspec.Struct):
        names += list(obj.__struct_fields__)
    elif dataclasses.is_dataclass(obj):
        names += [f.name for f in dataclasses.fields(obj)]
    names += list(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    return [n for n in dict.fromkeys(names) if n not in ("__dict__", "__weakref__")]


def state_view(obj: Any, names: Any = None, _depth: int = 0) -> Any:
    """obj as plain data: containers item by item, other objects as {"$type": ..., attribute: view}.
    names: the attributes to read (default: the object's own; the received side is read with the
    sent side's names, so a dropped attribute shows as its class default or MISSING)."""
    if _depth > 32 or isinstance(obj, _leaves()):
        return obj
    if type(obj) in (list, tuple):
        return type(obj)(state_view(v, None, _depth + 1) for v in obj)
    if type(obj) is dict:
        return {k: state_view(v, None, _depth + 1) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        return obj
    view: dict[str, Any] = {"$type": f"{type(obj).__module__}.{type(obj).__qualname__}"}
    if isinstance(obj, (list, tuple, dict)):  # a container subclass (a batch of time stats): its items too
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        view["$items"] = {k: state_view(v, None, _depth + 1) for k, v in items}
    for name in (attribute_names(obj) if names is None else names):
        view[name] = state_view(getattr(obj, name, MISSING), None, _depth + 1)
    return view


def state_differences(sent: Any, received: Any) -> list[str]:
    """Where the received object's state differs from the sent one's, attribute path by path."""
    from conformance.compare import differences

    plain = isinstance(sent, _leaves()) or type(sent) in (list, tuple, dict, set, frozenset)
    names = None if plain else attribute_names(sent)
    return differences(state_view(sent), state_view(received, names))


# -- engine-built objects (Adapter.engine_payloads, checks EnginePayload) --------------------


def _own_getstate(obj: Any) -> bool:
    """Whether obj's class defines its own __getstate__ (not object's default, Python 3.11+)."""
    method = getattr(type(obj), "__getstate__", None)
    return method is not None and method is not getattr(object, "__getstate__", None)


def engine_state(obj: Any, _depth: int = 0) -> Any:
    """The state of an engine-built object as plain data, for EnginePayload checks.

    An object whose class defines ``__getstate__`` is what that returns (the state its pickling
    and, for an engine's extension types, its msgpack form carry: a shared-memory pointer's
    name, shape and dtype, not the mapping a receiver opens); any other object is its msgspec or
    dataclass fields, then every ``__dict__`` entry (``$dict``: a struct declared with a dict
    keeps there what no transport carries), then its slots. Containers item by item; tensors,
    arrays, dtypes, devices and sizes are leaves that ``conformance.compare.differences`` compares
    by dtype, shape, device and values, dtypes and devices by identity."""
    if _depth > 32 or isinstance(obj, _leaves("Size")):
        return obj
    deeper = _depth + 1
    if type(obj) in (list, tuple):
        return type(obj)(engine_state(v, deeper) for v in obj)
    if type(obj) is dict:
        return {k: engine_state(v, deeper) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset, msgspec.msgpack.Ext)):
        return obj
    view: dict[str, Any] = {"$type": f"{type(obj).__module__}.{type(obj).__qualname__}"}
    if isinstance(obj, (list, tuple, dict)):
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        view["$items"] = {k: engine_state(v, deeper) for k, v in items}
    if _own_getstate(obj):
        view["$state"] = engine_state(obj.__getstate__(), deeper)
        return view
    fields: list[str] = []
    if isinstance(obj, msgspec.Struct):
        fields = list(obj.__struct_fields__)
    elif dataclasses.is_dataclass(obj):
        fields = [f.name for f in dataclasses.fields(obj)]
    for name in fields:
        view[name] = engine_state(getattr(obj, name, MISSING), deeper)
    extra = {k: v for k, v in (getattr(obj, "__dict__", None) or {}).items() if k not in fields}
    if extra or hasattr(obj, "__dict__"):
        view["$dict"] = {k: engine_state(v, deeper) for k, v in extra.items()}
    for cls in type(obj).__mro__:
        if isinstance(obj, msgspec.Struct):
            break  # a struct's fields are its slots
        slots = cls.__dict__.get("__slots__", ())
        for name in [slots] if isinstance(slots, str) else list(slots):
            if name not in ("__dict__", "__weakref__") and name not in view:
                view[name] = engine_state(getattr(obj, name, MISSING), deeper)
    return view


def engine_state_differences(sent: Any, received: Any) -> list[str]:
    """Where the received object's state (engine_state) differs from the sent one's, path by path."""
    from conformance.compare import differences

    return differences(engine_state(sent), engine_state(received))
