"""The reference codec's message catalogue: every message type (subclasses of the roots at
any depth, PickleWrapper, registered custom types), the decoders built for it, and the
decode-only twin structs of the fast path for List[array] fields. Private to the codec."""

from __future__ import annotations

import array
import threading
import typing
from functools import lru_cache
from typing import Any, List, Optional, Union, cast

import msgspec
import msgspec.inspect as mi

from . import ext, io_struct
from .io_struct import PickleWrapper


def _subclasses(cls: type[msgspec.Struct]) -> list[type[msgspec.Struct]]:
    out: list[type[msgspec.Struct]] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


frames = threading.local()


def current_frames() -> Optional[ext.OobFrames]:
    return getattr(frames, "value", None)


class Catalogue:
    """Every message type: subclasses of the roots at any depth, PickleWrapper, and
    registered custom types. Rediscovered when a tag is unknown, so subclasses
    defined after start-up still decode."""

    def __init__(self) -> None:
        self.custom: list[type[msgspec.Struct]] = list(io_struct.CUSTOM_MESSAGE_TYPES)
        self.refresh()

    def discover(self) -> tuple[type[msgspec.Struct], ...]:
        found = [s for root in io_struct.MESSAGE_ROOTS for s in _subclasses(root)]
        return tuple(dict.fromkeys(found + [PickleWrapper] + self.custom))

    def refresh(self) -> bool:
        found = self.discover()
        if getattr(self, "found", None) == found:
            return False
        # Two classes with one tag (a redefined class): the one already known keeps the tag,
        # the newcomer is refused at encode; nothing can decode as the wrong class.
        known = getattr(self, "types", ())
        by_tag: dict[Union[str, int, None], type[msgspec.Struct]] = {}  # keyed by StructConfig.tag
        ambiguous: dict[type[msgspec.Struct], type[msgspec.Struct]] = {}
        for t in sorted(found, key=lambda c: c not in known):
            other = by_tag.setdefault(t.__struct_config__.tag, t)
            if other is not t:
                ambiguous[t] = other
        types = tuple(t for t in found if t not in ambiguous)
        union = Union[types + (int, float, bool, bytes, None)]  # type: ignore[valid-type]
        decoder = msgspec.msgpack.Decoder(union, dec_hook=ext.dec_hook, ext_hook=ext.make_ext_hook())
        frames_decoder = msgspec.msgpack.Decoder(
            union, dec_hook=ext.dec_hook, ext_hook=ext.make_ext_hook(current_frames)
        )
        # Fast decoders for the message types with List[array] fields: a twin struct whose
        # such fields decode as plain Ext values (no Python call per element), chosen by the
        # message's first bytes (array header + tag); see _fast_decode.
        fast: list[tuple[bytes, msgspec.msgpack.Decoder[Any], type[msgspec.Struct], tuple[str, ...]]] = []
        for t in types:
            shadow, names = shadow_of(t)
            if shadow is not None:
                tag = msgspec.msgpack.encode(t.__struct_config__.tag)
                prefix = ext.array_header(len(t.__struct_fields__) + 1) + tag
                twin: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(
                    shadow, dec_hook=ext.dec_hook, ext_hook=ext.make_ext_hook())
                fast.append((prefix, twin, t, names))
        # Swap everything at once: a failed refresh leaves the previous catalogue intact.
        self.found, self.ambiguous = found, ambiguous
        self.types, self.type_set, self.by_tag = types, frozenset(types), by_tag
        self.decoder, self.frames_decoder = decoder, frames_decoder
        self.fast = tuple(fast)
        self.peek = max((len(f[0]) for f in fast), default=0)
        self.plans: dict[type, Any] = {}  # top-level types that passed _check_top_level -> _codec_plan.Plan
        return True


def _is_array_list(t: mi.Type) -> bool:
    """List[array] or Optional[List[array]]."""
    if isinstance(t, mi.UnionType):
        rest = [a for a in t.types if not isinstance(a, mi.NoneType)]
        if len(rest) != 1 or len(t.types) != 2:
            return False
        t = rest[0]
    return (isinstance(t, mi.ListType) and isinstance(t.item_type, mi.CustomType)
            and t.item_type.cls is array.array)


@lru_cache(maxsize=None)
def array_list_fields(cls: type) -> tuple[str, ...]:
    """Top-level fields of a message type typed List[array] (token ids of a batch)."""
    try:
        info = cast(mi.StructType, mi.type_info(cls))  # a message type: a struct
        return tuple(f.name for f in info.fields if _is_array_list(f.type))
    except Exception:  # noqa: BLE001 - a type msgspec.inspect cannot describe: no fast path
        return ()


def shadow_of(cls: type[msgspec.Struct]) -> tuple[Optional[type[msgspec.Struct]], tuple[str, ...]]:
    """A decode-only twin of cls (same tag, fields, order, defaults and options) whose
    List[array] fields are List[Ext]; (None, ()) when cls has none or cannot be twinned."""
    names = array_list_fields(cls)
    if not names:
        return None, ()
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
        fields: list[Union[tuple[str, Any], tuple[str, Any, Any]]] = []
        for f in msgspec.structs.fields(cls):
            tp = hints[f.name]
            if f.name in names:
                tp = Optional[List[msgspec.msgpack.Ext]] if _optional(tp) else List[msgspec.msgpack.Ext]
            if f.default is not msgspec.NODEFAULT:
                fields.append((f.name, tp, f.default))
            elif f.default_factory is not msgspec.NODEFAULT:
                fields.append((f.name, tp, msgspec.field(default_factory=f.default_factory)))
            else:
                fields.append((f.name, tp))
        c = cls.__struct_config__
        shadow = msgspec.defstruct(
            cls.__name__, fields, module=__name__, tag=c.tag, tag_field=c.tag_field,
            omit_defaults=c.omit_defaults, forbid_unknown_fields=c.forbid_unknown_fields,
            kw_only=True, array_like=c.array_like, gc=c.gc)
    except Exception:  # noqa: BLE001 - a type that cannot be twinned: no fast path
        return None, ()
    if shadow.__struct_fields__ != cls.__struct_fields__ or not c.array_like:
        return None, ()
    return shadow, names


def _optional(tp: Any) -> bool:
    return typing.get_origin(tp) is Union and type(None) in typing.get_args(tp)


catalogue = Catalogue()
