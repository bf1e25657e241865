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
from typing import Any, Optional

import msgspec
import msgspec.inspect as mi

from . import ext

_PLAIN_KEYS = frozenset({str, int, float, bool, bytes, type(None)})
_encode = msgspec.msgpack.Encoder(enc_hook=ext.enc_hook).encode
_decode = msgspec.msgpack.decode


def _holds_maps(t: mi.Type, seen: frozenset) -> bool:
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


def _map_fields(cls: type, seen: frozenset) -> tuple[str, ...]:
    try:
        fields = mi.type_info(cls).fields
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
    t = type(value)
    if t is dict:
        if any(type(k) not in _PLAIN_KEYS for k in value):
            seen: dict[Any, Any] = {}
            for k in value:
                peer = _peer_key(k)
                if peer in seen:
                    return path, seen[peer], k
                seen[peer] = k
        for k, v in value.items():
            found = find_collision(v, f"{path}[{k!r}]") if type(v) in _CONTAINERS or isinstance(
                v, msgspec.Struct) else None
            if found:
                return found
    elif t in (list, tuple):
        for i, v in enumerate(value):
            found = find_collision(v, f"{path}[{i}]") if type(v) in _CONTAINERS or isinstance(
                v, msgspec.Struct) else None
            if found:
                return found
    elif isinstance(value, msgspec.Struct):
        for name in map_fields(type(value)):
            found = find_collision(getattr(value, name), f"{path}.{name}")
            if found:
                return found
    return None


_CONTAINERS = frozenset({dict, list, tuple})
