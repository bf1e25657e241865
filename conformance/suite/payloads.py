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
from typing import Any

import msgspec
import numpy as np
import torch

#: What the view shows for an attribute the sent object has and the received one lacks.
MISSING = "<attribute missing>"
_LEAVES = (type(None), bool, int, float, complex, str, bytes, bytearray, torch.Tensor, np.ndarray, np.generic,
           array.array, enum.Enum, torch.dtype, torch.device, type)


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
    if _depth > 32 or isinstance(obj, _LEAVES):
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

    plain = isinstance(sent, _LEAVES) or type(sent) in (list, tuple, dict, set, frozenset)
    names = None if plain else attribute_names(sent)
    return differences(state_view(sent), state_view(received, names))
