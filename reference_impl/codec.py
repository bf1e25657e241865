"""The reference codec: one API, two transports (pickle | msgpack).

    encode(obj, transport="msgpack") -> bytes
    decode(data, transport="msgpack", *, allow_pickle=False) -> object

msgpack messages are the tagged array_like structs of reference_impl.io_struct
(a top-level union of every message type) or a top-level primitive. Opaque
fields travel as PickleWrapper; decode unwraps them, refusing untrusted peers.
Everything that fails raises WireError, naming transport, struct and field.
"""

from __future__ import annotations

import array
import copy
import io
import os
import pickle
import re
import threading
import typing
from functools import lru_cache
from operator import attrgetter
from typing import Any, Iterable, List, Optional, Sequence, Union

import msgspec
import msgspec.inspect as mi
import numpy as np
import torch

from . import ext, io_struct, wire_scan
from .errors import WireError
from .io_struct import PickleWrapper
from .pickle_wrapper import nested_opaque_fields, map_wrapped, opaque_fields, unwrap_value, wrap

__all__ = [
    "TRANSPORTS", "WireError", "decode", "decode_frames", "default_transport", "encode",
    "encode_frames", "message_types", "register_custom_types", "resolve_transport", "unwrap", "wrap_fields",
]

TRANSPORTS = ("pickle", "msgpack")
PRIMITIVES = (int, float, bool, bytes, str, type(None))
# Tensors at least this large go in their own frame on the opt-in multipart path.
OOB_THRESHOLD = 1 << 20


def default_transport() -> str:
    """IPC_TRANSPORT=pickle|msgpack; SGLANG_USE_PICKLE_IPC=1 is honoured too. Default msgpack."""
    chosen = os.environ.get("IPC_TRANSPORT")
    if chosen is None:
        chosen = "pickle" if os.environ.get("SGLANG_USE_PICKLE_IPC") == "1" else "msgpack"
    return resolve_transport(chosen)


def resolve_transport(transport: Optional[str]) -> str:
    """The transport to use: `transport` checked, or default_transport() when it is None.
    ValueError names the choices."""
    if transport is None:
        return default_transport()
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}; choose one of {', '.join(TRANSPORTS)}")
    return transport


# -- the catalogue ----------------------------------------------------------------
def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


_frames = threading.local()


def _current_frames() -> Optional[ext.OobFrames]:
    return getattr(_frames, "value", None)


class _Catalogue:
    """Every message type: subclasses of the roots at any depth, PickleWrapper, and
    registered custom types. Rediscovered when a tag is unknown, so subclasses
    defined after start-up still decode."""

    def __init__(self) -> None:
        self.custom: list[type] = list(io_struct.CUSTOM_MESSAGE_TYPES)
        self.refresh()

    def discover(self) -> tuple[type, ...]:
        found = [s for root in io_struct.MESSAGE_ROOTS for s in _subclasses(root)]
        return tuple(dict.fromkeys(found + [PickleWrapper] + self.custom))

    def refresh(self) -> bool:
        found = self.discover()
        if getattr(self, "found", None) == found:
            return False
        # Two classes with one tag (a redefined class): the one already known keeps the tag,
        # the newcomer is refused at encode; nothing can decode as the wrong class.
        known = getattr(self, "types", ())
        by_tag: dict[str, type] = {}
        ambiguous: dict[type, type] = {}
        for t in sorted(found, key=lambda c: c not in known):
            other = by_tag.setdefault(t.__struct_config__.tag, t)
            if other is not t:
                ambiguous[t] = other
        types = tuple(t for t in found if t not in ambiguous)
        union = Union[types + (int, float, bool, bytes, None)]  # type: ignore[valid-type]
        decoder = msgspec.msgpack.Decoder(union, dec_hook=ext.dec_hook, ext_hook=ext.make_ext_hook())
        frames_decoder = msgspec.msgpack.Decoder(
            union, dec_hook=ext.dec_hook, ext_hook=ext.make_ext_hook(_current_frames)
        )
        # Fast decoders for the message types with List[array] fields: a twin struct whose
        # such fields decode as plain Ext values (no Python call per element), chosen by the
        # message's first bytes (array header + tag); see _fast_decode.
        fast = []
        for t in types:
            shadow, names = _shadow_of(t)
            if shadow is not None:
                prefix = ext.array_header(len(t.__struct_fields__) + 1) + msgspec.msgpack.encode(t.__struct_config__.tag)
                twin = msgspec.msgpack.Decoder(shadow, dec_hook=ext.dec_hook, ext_hook=ext.make_ext_hook())
                fast.append((prefix, twin, t, names))
        # Swap everything at once: a failed refresh leaves the previous catalogue intact.
        self.found, self.ambiguous = found, ambiguous
        self.types, self.type_set, self.by_tag = types, frozenset(types), by_tag
        self.decoder, self.frames_decoder = decoder, frames_decoder
        self.fast = tuple(fast)
        self.peek = max((len(f[0]) for f in fast), default=0)
        self.plans: dict[type, Any] = {}  # top-level types that passed _check_top_level -> _encode_plan
        return True


# -- fast paths (performance only: every one gives the bytes / values of the plain path) --
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
def _array_list_fields(cls: type) -> tuple[str, ...]:
    """Top-level fields of a message type typed List[array] (token ids of a batch)."""
    try:
        return tuple(f.name for f in mi.type_info(cls).fields if _is_array_list(f.type))
    except Exception:  # a type msgspec.inspect cannot describe: no fast path
        return ()


def _shadow_of(cls: type) -> tuple[Optional[type], tuple[str, ...]]:
    """A decode-only twin of cls (same tag, fields, order, defaults and options) whose
    List[array] fields are List[Ext]; (None, ()) when cls has none or cannot be twinned."""
    names = _array_list_fields(cls)
    if not names:
        return None, ()
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
        fields = []
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
    except Exception:
        return None, ()
    if shadow.__struct_fields__ != cls.__struct_fields__ or not c.array_like:
        return None, ()
    return shadow, names


def _optional(tp: Any) -> bool:
    return typing.get_origin(tp) is Union and type(None) in typing.get_args(tp)


class _LargeBuffer(Exception):
    """Raised by _enc_hook: the message holds a large tensor/ndarray; splice it (_encode_spliced)."""


# A tensor or ndarray at least this large is spliced into the message instead of being
# copied twice (once into its ext payload, once into msgspec's output buffer).
SPLICE_THRESHOLD = 1 << 18


_ARRAY_HEADERS = ext._ARRAY_HEADERS
_Ext = msgspec.msgpack.Ext


def _enc_hook(obj: Any) -> Any:
    if type(obj) is array.array:  # as ext.enc_hook, one call less
        return _Ext(ext.EXT_ARRAY, _ARRAY_HEADERS[obj.typecode] + obj)
    if isinstance(obj, (torch.Tensor, np.ndarray)) and _nbytes(obj) >= SPLICE_THRESHOLD:
        raise _LargeBuffer
    return ext.enc_hook(obj)


def _nbytes(obj: Any) -> int:
    try:
        return int(obj.nbytes)
    except Exception:  # sparse, meta, ...: the plain path deals with it
        return 0


_catalogue = _Catalogue()
_encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
_plain_encoder = msgspec.msgpack.Encoder(enc_hook=ext.enc_hook)
_str_decoder = msgspec.msgpack.Decoder(str)


def message_types() -> tuple[type, ...]:
    _catalogue.refresh()
    return _catalogue.types


def register_custom_types(*types: type) -> None:
    """Add struct types to the top-level union (like upstream's hook_custom_types)."""
    for t in types:
        if not (isinstance(t, type) and issubclass(t, msgspec.Struct) and t.__struct_config__.tag is not None):
            raise TypeError(f"{t!r} is not a tagged msgspec Struct")
        if t not in _catalogue.custom:
            _catalogue.custom.append(t)
    _catalogue.refresh()


# -- PickleWrapper fields ---------------------------------------------------------
def wrap_fields(obj: Any) -> Any:
    """A copy of obj whose PickleWrapper-typed fields hold PickleWrappers (sender side).
    The caller's object is never modified."""
    if not _has_opaque_values(obj):
        return obj
    return map_wrapped(_deep_struct_copy(obj), lambda v, s, p: wrap(v))


_NO_OPAQUE = object()
_opaque_getters: dict[type, Any] = {}


def _opaque_getter(cls: type) -> Any:
    """A function giving the values of cls's PickleWrapper-bearing fields as a tuple, or
    _NO_OPAQUE when cls has none (or is not a struct)."""
    getter = _opaque_getters.get(cls)
    if getter is None:
        names = opaque_fields(cls) if isinstance(cls, type) and issubclass(cls, msgspec.Struct) else ()
        if not names:
            getter = _NO_OPAQUE
        elif len(names) == 1:
            getter = attrgetter(names[0], names[0])  # a tuple, like the many-field case
        else:
            getter = attrgetter(*names)
        _opaque_getters[cls] = getter
    return getter


def _has_opaque_values(obj: Any) -> bool:
    """Whether any PickleWrapper-bearing field of obj is set (the walks only visit those)."""
    getter = _opaque_getter(type(obj))
    if getter is _NO_OPAQUE:
        return False
    values = getter(obj)
    return values.count(None) != len(values)


def _deep_struct_copy(obj: Any) -> Any:
    """Copy the struct skeleton along PickleWrapper-bearing fields only (leaves shared); a
    value at a PickleWrapper-typed position is replaced whole by the wrap, so it is not copied."""
    if isinstance(obj, msgspec.Struct):
        new = copy.copy(obj)
        for name in nested_opaque_fields(type(obj)):
            value = getattr(obj, name)
            if value is not None:
                msgspec.structs.force_setattr(new, name, _deep_struct_copy(value))
        return new
    if isinstance(obj, list):
        return [_deep_struct_copy(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _deep_struct_copy(v) for k, v in obj.items()}
    return obj


def unwrap(
    obj: Any,
    *,
    allow_pickle: bool = False,
    transport: str = "msgpack",
    trusted_globals: Iterable[tuple[str, str]] = (),
) -> Any:
    """Receive side: replace every PickleWrapper (top level or in a typed field) by its
    object. Idempotent. Refuses with WireError unless the peer is trusted."""

    def open_wrapper(value: Any, struct: str, path: str) -> Any:
        if not isinstance(value, PickleWrapper):
            return value  # already unwrapped (pickle transport, or a second call)
        return unwrap_value(value, allow_pickle=allow_pickle, transport=transport,
                            where=(struct or "PickleWrapper", path), trusted_globals=trusted_globals)

    if type(obj) is not PickleWrapper and not _has_opaque_values(obj):
        return obj  # nothing to open: what map_wrapped would return
    return map_wrapped(obj, open_wrapper)


# -- encode -----------------------------------------------------------------------
def _check_top_level(obj: Any, transport: str) -> None:
    if isinstance(obj, msgspec.Struct):
        if type(obj) not in _catalogue.type_set:
            _catalogue.refresh()  # a subclass defined after start-up
        if type(obj) in _catalogue.ambiguous:
            other = _catalogue.ambiguous[type(obj)]
            raise WireError(transport, f"struct {type(obj).__qualname__} shares its tag with "
                            f"{other.__module__}.{other.__qualname__}; a peer could not tell them apart",
                            direction="encode")
        if type(obj) not in _catalogue.type_set:
            raise WireError(transport, f"struct {type(obj).__name__} is not in the message catalogue; "
                            "register it with register_custom_types()", direction="encode")
    elif not isinstance(obj, PRIMITIVES):
        raise WireError(transport, f"a top-level {type(obj).__name__} cannot be a message; "
                        "send a struct of the catalogue or a primitive", direction="encode")


# torch (2.13, 2.14) cannot unpickle float8 tensors ("UntypedStorage has no attribute
# dtype"): the reference pickles them through the same layout as the msgpack ext.
_PICKLE_AS_BUFFER = {getattr(torch, n) for n in dir(torch) if n.startswith("float8_")
                     and isinstance(getattr(torch, n), torch.dtype)}


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if not isinstance(obj, torch.Tensor):
            return NotImplemented
        if obj.dtype in _PICKLE_AS_BUFFER:
            _, raw = ext.tensor_bytes(obj)
            return ext.restore_tensor, (list(ext.tensor_metadata(obj)), raw.tobytes())
        # Gradients never travel (msgpack has no room for them): both transports agree.
        if obj.requires_grad:
            return torch.Tensor.detach, (obj.detach(),)
        return NotImplemented


def _pickle_dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


_TRANSPORT_SET = frozenset(TRANSPORTS)


def _encode_plan(cls: type) -> tuple[Any, tuple[str, ...]]:
    """(getter of the PickleWrapper-bearing fields or None, List[array] field names)."""
    getter = _opaque_getter(cls)
    names = _array_list_fields(cls) if issubclass(cls, msgspec.Struct) else ()
    return (None if getter is _NO_OPAQUE else getter), names


def encode(obj: Any, transport: Optional[str] = None) -> bytes:
    if transport not in _TRANSPORT_SET:
        transport = resolve_transport(transport)
    cls = type(obj)
    plan = _catalogue.plans.get(cls)
    if plan is None:
        _check_top_level(obj, transport)
        # Passed: the verdict only changes on a refresh, which empties the plans.
        plan = _catalogue.plans[cls] = _encode_plan(cls)
    if transport == "pickle":
        try:
            return _pickle_dumps(obj)
        except Exception as exc:
            raise _encode_error(obj, transport, exc) from None
    getter, names = plan
    wrapped = obj
    if getter is not None:
        values = getter(obj)
        if values.count(None) != len(values):
            wrapped = wrap_fields(obj)
    message = _with_array_raw(wrapped, names, copied=wrapped is not obj) if names else wrapped
    try:
        try:
            return _encoder.encode(message)
        except _LargeBuffer:
            return _encode_spliced(message)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as exc:
        raise _encode_error(wrapped, transport, exc) from None


# Below this many elements a List[array] goes through enc_hook one by one (cheaper than
# the copy of the struct the batched path needs).
ARRAY_LIST_MIN = 8


def _with_array_raw(obj: Any, names: tuple[str, ...], copied: bool) -> Any:
    """obj, or a shallow copy whose long List[array] fields hold their msgpack encoding
    (msgspec.Raw), built in one batched pass: the same bytes, no Python call per element."""
    out = obj
    for name in names:
        values = getattr(obj, name)
        if type(values) is list and len(values) >= ARRAY_LIST_MIN:
            raw = ext.array_list_raw(values)
            if raw is not None:
                if out is obj and not copied:
                    out = copy.copy(obj)
                msgspec.structs.force_setattr(out, name, raw)
    return out


# Placeholder payload for a spliced buffer: 12 random bytes + a 4-byte index (fixext 16).
_SPLICE_MARK = os.urandom(12)
_EXT32_MIN = 1 << 16


def _encode_spliced(message: Any) -> bytes:
    """Encode a message holding large tensors/ndarrays with one copy of their bytes: msgspec
    encodes a 16-byte placeholder ext, then the placeholders are replaced by the real ext
    (header + metadata + raw bytes) while joining the output. Same bytes as the plain path."""
    buffers: list[tuple[bytes, int, bytes, memoryview]] = []

    def hook(obj: Any) -> Any:
        if type(obj) is not array.array and isinstance(obj, (torch.Tensor, np.ndarray)) \
                and _nbytes(obj) >= SPLICE_THRESHOLD:
            parts = ext.buffer_parts(obj)
            if parts is not None:
                code, header, raw = parts
                mark = _SPLICE_MARK + len(buffers).to_bytes(4, "big")
                buffers.append((mark, code, header, raw))
                return msgspec.msgpack.Ext(code, mark)
        return ext.enc_hook(obj)

    head = msgspec.msgpack.Encoder(enc_hook=hook).encode(message)
    pieces: list[Any] = []
    pos = 0
    for mark, code, header, raw in buffers:
        token = bytes((0xD8, code)) + mark  # how msgspec writes a 16-byte ext
        at = head.find(token, pos)
        size = len(header) + raw.nbytes
        if at < 0 or head.find(token, at + 1) >= 0 or not _EXT32_MIN <= size < 1 << 32:
            return _plain_encoder.encode(message)  # marker collision or odd size: the plain path
        pieces += (head[pos:at], b"\xc9", size.to_bytes(4, "big"), bytes((code,)), header, raw)
        pos = at + len(token)
    pieces.append(head[pos:])
    return b"".join(pieces)


def _encode_error(obj: Any, transport: str, exc: Exception) -> WireError:
    if isinstance(exc, WireError):
        return WireError(transport, exc.reason, struct=type(obj).__name__, path=_locate_failure(obj, transport) or "",
                         direction="encode")
    path = _locate_failure(obj, transport)
    return WireError(transport, f"{type(exc).__name__}: {exc}", struct=type(obj).__name__ if isinstance(obj, msgspec.Struct) else None,
                     path=path or "", direction="encode")


def _locate_failure(obj: Any, transport: str, path: str = "") -> Optional[str]:
    """Slow path, on errors only: the deepest field path whose value fails to encode."""
    enc = _pickle_dumps if transport == "pickle" else _encoder.encode
    children: Sequence[tuple[str, Any]] = ()
    if isinstance(obj, msgspec.Struct):
        children = [(f".{n}", getattr(obj, n)) for n in obj.__struct_fields__]
    elif isinstance(obj, (list, tuple)):
        children = [(f"[{i}]", v) for i, v in enumerate(obj)]
    elif isinstance(obj, dict):
        children = [(f"[{k!r}]", v) for k, v in obj.items()] + [(f"<key {k!r}>", k) for k in obj]
    for suffix, child in children:
        try:
            enc(child)
        except Exception:
            return _locate_failure(child, transport, path + suffix) or path + suffix
    return None


# -- decode -----------------------------------------------------------------------
_STR_MARKERS = frozenset(range(0xA0, 0xC0)) | {0xD9, 0xDA, 0xDB}
_PATH = re.compile(r" - at `\$(.*)`$")
_STEP = re.compile(r"\[(\d+|\.\.\.)\]|\.([A-Za-z_][A-Za-z_0-9]*)|\[(\"[^\"]*\"|'[^']*'|[^\]]*)\]")


def _limit_from_env(name: str, default: Optional[int]) -> Optional[int]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
    return value if value > 0 else None  # 0 or negative: no limit


#: Largest message decode accepts, in bytes (a multipart message: all frames together); None =
#: no limit. Env IPC_MAX_MESSAGE_BYTES (0: none). Per call: decode(..., max_bytes=N).
MAX_MESSAGE_BYTES: Optional[int] = _limit_from_env("IPC_MAX_MESSAGE_BYTES", 1 << 30)
#: Deepest nesting of arrays/maps decode accepts (msgpack). None (the default) = the bound of
#: msgspec's C decoder, which stops at the interpreter's recursion limit (about 1000 levels) with
#: a WireError; a number makes decode check the nesting first (a Python pre-scan of the bytes:
#: costs time, use it for peers you do not trust). Env IPC_MAX_NESTING. Per call: max_nesting=N.
MAX_NESTING: Optional[int] = _limit_from_env("IPC_MAX_NESTING", None)


def _too_large(transport: str, size: int, limit: int) -> WireError:
    return WireError(transport, f"message of {size} bytes is over the limit of {limit} bytes "
                                "(max_bytes / IPC_MAX_MESSAGE_BYTES)")


def _check_limits(data: Any, transport: str, max_bytes: Optional[int], max_nesting: Optional[int],
                  size: Optional[int] = None) -> None:
    limit = MAX_MESSAGE_BYTES if max_bytes is None else (max_bytes or None)
    size = len(data) if size is None else size
    if limit is not None and size > limit:
        raise _too_large(transport, size, limit)
    depth = MAX_NESTING if max_nesting is None else (max_nesting or None)
    if depth is not None and transport == "msgpack":
        found = wire_scan.scan(data, max_depth=depth, check_utf8=False)
        if found.problem is not None and found.problem.kind == "depth":
            struct, path = _place(found.tag, found.problem.path)
            raise WireError("msgpack", f"nesting deeper than {depth} levels (max_nesting / IPC_MAX_NESTING)",
                            struct=struct, path=path)


def decode(
    data: Union[bytes, bytearray, memoryview],
    transport: Optional[str] = None,
    *,
    allow_pickle: bool = False,
    unwrap_wrappers: bool = True,
    trusted_globals: Iterable[tuple[str, str]] = (),
    max_bytes: Optional[int] = None,
    max_nesting: Optional[int] = None,
) -> Any:
    """Decode one message. With unwrap_wrappers (the default) every PickleWrapper is
    opened, so a receive path never hands a wrapper downstream; for msgpack that
    needs allow_pickle=True (a trusted peer), else the message is refused.
    max_bytes / max_nesting override MAX_MESSAGE_BYTES / MAX_NESTING for this call (0: no limit).
    Whatever the input, the only exception is WireError."""
    if transport not in _TRANSPORT_SET:
        transport = resolve_transport(transport)
    limit = MAX_MESSAGE_BYTES if max_bytes is None else max_bytes
    if limit and len(data) > limit:
        raise _too_large(transport, len(data), limit)
    if max_nesting is not None or MAX_NESTING is not None:
        _check_limits(data, transport, 0, max_nesting)
    if transport == "pickle":
        # The pickle transport is for trusted peers only, by definition (spec: security).
        try:
            obj = pickle.loads(data)
        except Exception as exc:
            raise WireError("pickle", f"{type(exc).__name__}: {exc}") from None
    else:
        catalogue = _catalogue
        obj = _MISS
        if len(data) and data[0] not in _STR_MARKERS:
            if len(data) >= FAST_DECODE_MIN and catalogue.fast:
                head = bytes(data[:catalogue.peek])
                for prefix, twin, real, names in catalogue.fast:
                    if head.startswith(prefix):
                        obj = _fast_decode(data, twin, real, names)
                        break
            if obj is _MISS:
                try:  # straight to msgspec
                    obj = catalogue.decoder.decode(data)
                except Exception:  # noqa: BLE001 - the full path below redoes it and reports properly
                    pass
        if obj is _MISS:
            obj = _decode_msgpack(data, catalogue.decoder)
    if unwrap_wrappers:
        cls = type(obj)
        getter = _opaque_getters.get(cls) or _opaque_getter(cls)
        if getter is _NO_OPAQUE:
            if cls is PickleWrapper:
                obj = unwrap(obj, allow_pickle=allow_pickle, transport=transport, trusted_globals=trusted_globals)
        else:
            values = getter(obj)
            if values.count(None) != len(values):
                obj = unwrap(obj, allow_pickle=allow_pickle, transport=transport, trusted_globals=trusted_globals)
    return obj


# What msgspec says of a string that is not UTF-8; releases up to 0.22 raise UnicodeDecodeError
# instead, which is reported with the same words so errors do not depend on the version.
_INVALID_UTF8 = "Invalid UTF-8 encoded string"


def _decode_msgpack(data: Any, decoder: msgspec.msgpack.Decoder) -> Any:
    if len(data) and data[0] in _STR_MARKERS:
        try:
            return _str_decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise WireError("msgpack", str(exc)) from None
        except UnicodeDecodeError:  # msgspec up to 0.22 lets this escape instead of a DecodeError
            raise WireError("msgpack", _INVALID_UTF8) from None
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        if _unknown_tag(exc):
            plain = decoder is _catalogue.decoder
            if _catalogue.refresh():  # a subclass defined after start-up: retry with it
                return _decode_msgpack(data, _catalogue.decoder if plain else _catalogue.frames_decoder)
        raise _decode_error(data, exc) from None
    except WireError as exc:  # raised by an extension hook: msgspec does not say where
        raise _located(data, exc.reason, hook_error=exc) from None
    except RecursionError:
        raise _located(data, "nesting deeper than the decoder allows (the interpreter's recursion limit)",
                       deepest=True) from None
    except msgspec.DecodeError as exc:  # truncated, invalid UTF-8, trailing bytes, invalid byte
        raise _located(data, str(exc)) from None
    except UnicodeDecodeError:  # msgspec up to 0.22 lets this escape instead of a DecodeError
        raise _located(data, _INVALID_UTF8) from None
    except Exception as exc:  # noqa: BLE001 - whatever a hook or the runtime raised: still one WireError
        raise _located(data, f"{type(exc).__name__}: {exc}", hook_error=exc) from None


def _place(tag: Optional[str], raw: Optional[list]) -> tuple[Optional[str], str]:
    """(struct, field path) for a positional path inside a message whose tag is `tag`."""
    if raw is None:
        return tag, ""
    shown, more = raw[:10], len(raw) - 10
    cls = _catalogue.by_tag.get(tag) if tag else None
    text = wire_scan.render(shown)
    path = _field_path(cls, text) if cls is not None else text
    if more > 0:
        path += f"...({more} levels deeper)"
    return tag, path


def _located(data: Any, reason: str, *, hook_error: Optional[BaseException] = None, deepest: bool = False) -> WireError:
    """The error for a failure msgspec reported without a place: the message's tag and the
    field path, from a walk of the raw bytes (error path only)."""
    try:
        found = wire_scan.scan(data, collect_exts=hook_error is not None,
                               max_depth=500 if deepest else None)
    except Exception:  # noqa: BLE001 - locating is best effort; the reason stands on its own
        return WireError("msgpack", reason, struct=_peek_struct(data)[0])
    raw = None
    if found.problem is not None:
        if found.problem.kind != "trailing":
            raw = found.problem.path
        if found.problem.detail and found.problem.kind not in ("depth", "trailing"):  # msgspec said those
            reason = f"{reason} ({found.problem.detail})"
    elif hook_error is not None:
        raw = _failing_ext(found.exts, hook_error)
    struct, path = _place(found.tag, raw)
    return WireError("msgpack", reason, struct=struct, path=path)


def _failing_ext(exts: list, error: BaseException) -> Optional[list]:
    """The path of the extension value whose hook raises `error` (re-run one by one)."""
    hook = ext.make_ext_hook(_current_frames)
    first = None
    for path, code, payload in exts:
        try:
            hook(code, payload)
        except Exception as exc:  # noqa: BLE001
            if type(exc) is type(error) and str(exc) == str(error):
                return path
            first = first or path
    return first


# Messages of a type with List[array] fields at least this long take the twin decoder (it
# pays off from about ten arrays).
FAST_DECODE_MIN = 1024
_MISS = object()


def _fast_decode(data: Any, twin: msgspec.msgpack.Decoder, real: type, names: tuple[str, ...]) -> Any:
    """Decode a message of type `real` through its twin decoder: the List[array] fields arrive
    as List[Ext] and become arrays in one batched pass. _MISS when anything is unusual (a
    decode error, an ext that is not a plain array): the caller then takes the plain path,
    which gives the same value or the ordinary error."""
    try:
        obj = twin.decode(data)
    except Exception:  # noqa: BLE001 - the plain path redoes it and reports properly
        return _MISS
    values = msgspec.structs.asdict(obj)
    for name in names:
        exts = values[name]
        if exts is not None:
            arrays = ext.arrays_from_exts(exts)
            if arrays is None:
                return _MISS
            values[name] = arrays
    return real(**values)


def _unknown_tag(exc: Exception) -> bool:
    return str(exc).startswith("Invalid value") and str(exc).endswith("at `$[0]`")


def _peek_struct(data: Any) -> tuple[Optional[str], Optional[type]]:
    try:
        head = msgspec.msgpack.decode(data, ext_hook=lambda code, raw: None)
    except Exception:
        return None, None
    if isinstance(head, list) and head and isinstance(head[0], str):
        return head[0], _catalogue.by_tag.get(head[0])
    return None, None


def _decode_error(data: Any, exc: msgspec.ValidationError) -> WireError:
    message = str(exc)
    match = _PATH.search(message)
    reason = _PATH.sub("", message)
    tag, cls = _peek_struct(data)
    if _unknown_tag(exc):
        return WireError("msgpack", f"unknown struct tag {tag!r}: not in the message catalogue", struct=tag)
    path = match.group(1) if match else ""
    if cls is not None and match:
        path = _field_path(cls, path)
    return WireError("msgpack", reason, struct=tag, path=path)


def _field_path(cls: type, raw_path: str) -> str:
    """Translate msgspec's positional path (`$[3][0]`) into field names (`.decode_ids[0]`)."""
    steps = [m.group(1) or m.group(2) or m.group(3) for m in _STEP.finditer(raw_path)]
    out, t = "", mi.type_info(cls)
    for step in steps:
        t = _strip_optional(t)
        if isinstance(t, mi.StructType) and step.isdigit():
            index = int(step) - (1 if t.tag is not None and t.array_like else 0)
            if index < 0:
                out += ".<tag>"
                t = None
            elif index < len(t.fields):
                out += f".{t.fields[index].name}"
                t = t.fields[index].type
            else:
                out += f"[{step}]"
                t = None
        elif isinstance(t, mi.StructType):
            field = next((f for f in t.fields if f.encode_name == step), None)
            out += f".{step}"
            t = field.type if field else None
        else:
            out += f"[{step}]"
            t = _children_of(t)
    return out


def _strip_optional(t: Any) -> Any:
    if isinstance(t, mi.UnionType):
        rest = [a for a in t.types if not isinstance(a, mi.NoneType)]
        if len(rest) == 1:
            return rest[0]
    return t


def _children_of(t: Any) -> Any:
    if isinstance(t, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        return t.item_type
    if isinstance(t, mi.DictType):
        return t.value_type
    return None


# -- multipart (opt-in zero-copy for large tensors) -------------------------------
class _FrameCollector:
    """enc_hook that moves large tensors into side frames instead of copying them inline."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.frames: list[Any] = []

    def __call__(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor) and obj.numel() * obj.element_size() >= self.threshold:
            _, raw = ext.tensor_bytes(obj)  # the view keeps the tensor's storage alive
            self.frames.append(raw)
            meta = [*ext.tensor_metadata(obj), len(self.frames)]
            return ext.pack_buffer(ext.EXT_OOB_TENSOR, meta, memoryview(b""))
        return ext.enc_hook(obj)


def encode_frames(obj: Any, transport: Optional[str] = None, *, threshold: int = OOB_THRESHOLD) -> list[Any]:
    """Encode as [message, buffer, buffer, ...]: tensors of at least `threshold` bytes are
    not copied into the message but referenced as later frames (msgpack only).
    The buffers share memory with contiguous CPU tensors: do not mutate those until the
    frames are sent (zmq_io.send waits for ZeroMQ to release them)."""
    transport = resolve_transport(transport)
    if transport == "pickle":
        return [encode(obj, transport)]
    _check_top_level(obj, transport)
    wrapped = wrap_fields(obj)
    names = _array_list_fields(type(obj)) if isinstance(obj, msgspec.Struct) else ()
    message = _with_array_raw(wrapped, names, copied=wrapped is not obj) if names else wrapped
    try:
        if threshold >= SPLICE_THRESHOLD:
            try:  # no tensor/ndarray of SPLICE_THRESHOLD bytes or more: one frame, as encode()
                return [_encoder.encode(message)]
            except _LargeBuffer:
                pass
        collector = _FrameCollector(threshold)
        head = msgspec.msgpack.Encoder(enc_hook=collector).encode(message)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as exc:
        raise _encode_error(wrapped, transport, exc) from None
    return [head, *collector.frames]


def decode_frames(
    frames: Sequence[Any],
    transport: Optional[str] = None,
    *,
    allow_pickle: bool = False,
    unwrap_wrappers: bool = True,
    trusted_globals: Iterable[tuple[str, str]] = (),
    max_bytes: Optional[int] = None,
    max_nesting: Optional[int] = None,
) -> Any:
    """Decode [message, buffer, ...] from encode_frames (one frame: a plain message).
    Every side frame must be referenced by the message: nothing is silently dropped."""
    transport = resolve_transport(transport)
    if not frames:
        raise WireError(transport, "empty multipart message")
    if len(frames) == 1:
        return decode(frames[0], transport, allow_pickle=allow_pickle, unwrap_wrappers=unwrap_wrappers,
                      trusted_globals=trusted_globals, max_bytes=max_bytes, max_nesting=max_nesting)
    _check_limits(frames[0], transport, max_bytes, max_nesting, size=sum(len(f) for f in frames))
    if transport == "pickle":
        raise WireError("pickle", f"{len(frames)} frames; the pickle transport sends one")
    oob = _frames.value = ext.OobFrames(frames)
    try:
        obj = _decode_msgpack(frames[0], _catalogue.frames_decoder)
        unused = set(range(1, len(frames))) - oob.used
    finally:
        _frames.value = None
    if unused:
        raise WireError("msgpack", f"frames {sorted(unused)} are not referenced by the message")
    if unwrap_wrappers:
        obj = unwrap(obj, allow_pickle=allow_pickle, transport=transport, trusted_globals=trusted_globals)
    return obj
