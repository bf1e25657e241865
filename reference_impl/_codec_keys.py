"""Map keys that collide for a peer (SPEC R-VAL-6): two keys that are distinct Python objects
but one key once written (an Enum member and its value, a frozenset and a tuple of the same
items, a Decimal and its text) or equal under ``==`` as a Python peer reads them. The encoder
refuses such a map instead of writing both keys.

Only fields whose declared type can hold a map are walked (`map_fields`), and a map is looked
at closely only when one of its keys is not a plain str, int, float, bool, bytes or None: plain
keys that are distinct in a Python dict are distinct for every Python peer too.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import chain
from typing import Any, Optional, cast

import msgspec
import msgspec.inspect as mi

from . import ext

_PLAIN_KEYS = frozenset({str, int, float, bool, bytes, type(None)})
_encode = msgspec.msgpack.Encoder(enc_hook=ext.enc_hook).encode
_decode = msgspec.msgpack.decode


def _holds_maps(t: mi.Type, seen: frozenset[type]) -> bool:
    if isinstance(t, (mi.AnyType, mi.DictType)):
        return True
    if isinstance(t, mi.StructType):
        return t.cls not in seen and bool(_map_fields(t.cls, seen | {t.cls}))
    if isinstance(t, mi.UnionType):
        return any(_holds_maps(a, seen) for a in t.types)
    if isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        return _holds_maps(t.item_type, seen)
    if isinstance(t, mi.TupleType):
        return any(_holds_maps(a, seen) for a in t.item_types)
    return False


def _map_fields(cls: type, seen: frozenset[type]) -> tuple[str, ...]:
    try:
        fields = cast(mi.StructType, mi.type_info(cls)).fields  # a struct (a StructType's cls)
    except Exception:  # noqa: BLE001 - a type msgspec cannot describe holds no map we could check
        return ()
    return tuple(f.name for f in fields if _holds_maps(f.type, seen))


@lru_cache(maxsize=None)
def map_fields(cls: type) -> tuple[str, ...]:
    """The fields of a struct whose values may hold a map (directly or nested)."""
    return _map_fields(cls, frozenset({cls}))


def _peer_key(key: Any) -> Any:
    """The key as a Python peer reads it back (a unique marker when it cannot be a key there)."""
    try:
        (back,) = _decode(_encode({key: None}))
        hash(back)
    except Exception:  # noqa: BLE001 - not writable or not hashable: the encoder reports it, not this
        return object()
    return back


def find_collision(value: Any, path: str = "") -> Optional[tuple[str, Any, Any]]:
    """(path of the map, first key, the key colliding with it) for the first map under value
    with two keys that are one key to a peer; None when there is none."""
    return _locate(value, path) if _odd_keys(value) else None


def _odd_keys(value: Any) -> bool:
    """Whether a map under value has a key that is not a plain scalar: one level at a time,
    the iteration in C, so that the usual message (str keys only) costs little."""
    level = [value]
    while level:
        dicts = [v for v in level if type(v) is dict]
        if dicts and not _PLAIN_KEYS.issuperset(map(type, chain.from_iterable(dicts))):
            return True
        below = chain.from_iterable(map(dict.values, dicts))
        if len(dicts) < len(level):  # lists, tuples, structs: rarer than maps below a map
            rest = [v for v in level if type(v) is not dict]
            deeper = [v for v in rest if type(v) is list or type(v) is tuple]
            structs = [v for v in rest if isinstance(v, msgspec.Struct)]
            below = chain(below, chain.from_iterable(deeper),
                          (getattr(s, n) for s in structs for n in map_fields(type(s))))
        level = [v for v in below if type(v) not in _SCALARS]
    return False


def _locate(value: Any, path: str) -> Optional[tuple[str, Any, Any]]:
    t: type = type(value)
    if t is dict:
        if not _PLAIN_KEYS.issuperset(map(type, value)):
            seen: dict[Any, Any] = {}
            for k in value:
                peer = _peer_key(k)
                if peer in seen:
                    return path, seen[peer], k
                seen[peer] = k
        if _SCALARS.issuperset(map(type, value.values())):
            return None  # the common case, decided in C: nothing below holds a map
        for k, v in value.items():
            if type(v) not in _SCALARS:
                found = _locate(v, f"{path}[{k!r}]")
                if found:
                    return found
    elif t is list or t is tuple:
        if _SCALARS.issuperset(map(type, value)):
            return None
        for i, v in enumerate(value):
            if type(v) not in _SCALARS:
                found = _locate(v, f"{path}[{i}]")
                if found:
                    return found
    elif isinstance(value, msgspec.Struct):
        for name in map_fields(t):
            found = _locate(getattr(value, name), f"{path}.{name}")
            if found:
                return found
    return None


#: values that hold no map: the walk does not look inside them
_SCALARS = frozenset({str, int, float, bool, bytes, bytearray, type(None)})
