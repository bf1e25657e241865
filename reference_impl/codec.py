"""The reference codec: one API, two transports (pickle | msgpack).

    encode(obj, transport="msgpack") -> bytes
    decode(data, transport="msgpack", *, allow_pickle=False) -> object
    encode_frames(obj, transport) -> [message, buffer, ...]   (opt-in zero-copy tensors)
    decode_frames(frames, transport, *, allow_pickle=False) -> object

msgpack messages are the tagged array_like structs of reference_impl.io_struct
(a top-level union of every message type) or a top-level primitive. Opaque
fields travel as PickleWrapper; decode unwraps them, refusing untrusted peers.
Everything that fails raises WireError, naming transport, struct and field.

This module is the public face; the catalogue, the encoders and fast paths, the
error location and the thresholds and limits live in the private modules
``_codec_catalogue``, ``_codec_fast``, ``_codec_errors`` and ``_codec_limits``.
"""

from __future__ import annotations

import copy
import os
import pickle
from typing import Any, Iterable, Optional, Sequence, Union

import msgspec

from . import _codec_catalogue as _cat
from . import _codec_errors as _errors
from . import _codec_fast as _fast
from . import _codec_keys as _keys
from . import _codec_limits as _limits
from . import _codec_plan as _plans
from . import ext
from ._codec_catalogue import catalogue as _catalogue
from ._codec_fast import FrameCollector as _FrameCollector
from ._codec_fast import fast_decode as _fast_decode
from ._codec_limits import OOB_THRESHOLD
from .errors import WireError
from .io_struct import PickleWrapper
from .pickle_wrapper import map_wrapped, nested_opaque_fields, unwrap_value, wrap

__all__ = [
    "TRANSPORTS", "WireError", "decode", "decode_frames", "default_transport", "encode",
    "encode_frames", "message_types", "register_custom_types", "resolve_transport", "unwrap", "wrap_fields",
]

TRANSPORTS = ("pickle", "msgpack")
PRIMITIVES = (int, float, bool, bytes, str, type(None))


#: SGLANG_USE_PICKLE_IPC's spellings, as SGLang reads its boolean environment variables.
PICKLE_SWITCH = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False,
                 "off": False, "": False}


def default_transport() -> str:
    """IPC_TRANSPORT=pickle|msgpack; else SGLANG_USE_PICKLE_IPC (1/true/yes/on: pickle, 0/false/no/off:
    msgpack, any case; another value is a ValueError naming it). Default msgpack."""
    chosen = os.environ.get("IPC_TRANSPORT")
    if chosen is None:
        switch = os.environ.get("SGLANG_USE_PICKLE_IPC", "").strip().lower()
        if switch not in PICKLE_SWITCH:
            raise ValueError(f"SGLANG_USE_PICKLE_IPC={os.environ['SGLANG_USE_PICKLE_IPC']!r}: "
                             "use 1/true (pickle) or 0/false (msgpack)")
        chosen = "pickle" if PICKLE_SWITCH[switch] else "msgpack"
    return resolve_transport(chosen)


def resolve_transport(transport: Optional[str]) -> str:
    """The transport to use: `transport` checked, or default_transport() when it is None.
    ValueError names the choices."""
    if transport is None:
        return default_transport()
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}; choose one of {', '.join(TRANSPORTS)}")
    return transport


def message_types() -> tuple[type, ...]:
    """Every struct type a msgpack message may be (the catalogue, rediscovered first)."""
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
    The caller's object is never modified. The type's plan (_codec_plan) does it with one
    shallow copy unless a nested opaque field is set; then the typed walk (the slow path)."""
    return _wrapped(obj, _plans.plan_of(type(obj)))


def _wrapped(obj: Any, plan: _plans.Plan) -> Any:
    """wrap_fields with the type's plan already at hand (encode's hot path)."""
    if not plan.has_opaque_values(obj):
        return obj
    if plan.simple(obj):
        return _plans.wrap_direct(obj, plan, wrap)
    return _wrap_walk(obj)


def _wrap_walk(obj: Any) -> Any:
    """The slow path of wrap_fields (and the reference its plan is tested against): a copy of the
    struct skeleton along the opaque fields, then the typed walk wrapping every position."""
    return map_wrapped(_deep_struct_copy(obj), lambda v, s, p: wrap(v))


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
    plan = _plans.plan_of(type(obj))
    direct_values = plan.direct_values
    if plan.nested_values is None and direct_values is not None:
        # The engine's step messages: only PickleWrapper-typed fields, opened in place here
        # (what unwrap_direct does below, without its per-call closure and plan checks).
        for name, value in zip(plan.direct, direct_values(obj)):
            if isinstance(value, PickleWrapper):
                msgspec.structs.force_setattr(obj, name, unwrap_value(
                    value, allow_pickle=allow_pickle, transport=transport, where=(type(obj).__name__, "." + name),
                    trusted_globals=trusted_globals))
        return obj

    def open_wrapper(value: Any, struct: str, path: str) -> Any:
        if not isinstance(value, PickleWrapper):
            return value  # already unwrapped (pickle transport, or a second call)
        return unwrap_value(value, allow_pickle=allow_pickle, transport=transport,
                            where=(struct or "PickleWrapper", path), trusted_globals=trusted_globals)

    if type(obj) is PickleWrapper:
        return open_wrapper(obj, "", "")
    if not plan.has_opaque_values(obj):
        return obj  # nothing to open: what map_wrapped would return
    if plan.simple(obj):
        return _plans.unwrap_direct(obj, plan, open_wrapper)
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


_TRANSPORT_SET = frozenset(TRANSPORTS)


def encode(obj: Any, transport: Optional[str] = None) -> bytes:
    """Encode one message: a struct of the catalogue or a primitive. msgpack: the tagged
    array_like form, PickleWrapper-typed fields wrapped (the caller's object is not
    modified), tensors and arrays as extension types, byte-identical to upstream SGLang;
    pickle: ``pickle.dumps`` at the highest protocol (what ``send_pyobj`` sends).
    transport None: default_transport(). Any failure: WireError naming struct and field."""
    if transport not in _TRANSPORT_SET:
        transport = resolve_transport(transport)
    cls = type(obj)
    plan = _catalogue.plans.get(cls)
    if plan is None:
        _check_top_level(obj, transport)
        # Passed: the verdict only changes on a refresh, which empties the catalogue's plans.
        plan = _catalogue.plans[cls] = _plans.plan_of(cls)
    if transport == "pickle":
        try:
            return _fast.pickle_dumps(obj)
        except Exception as exc:  # noqa: BLE001 - whatever pickling raises: one WireError
            raise _errors.encode_error(obj, transport, exc) from None
    wrapped, message = _prepared(obj, plan, transport)
    try:
        try:
            return _fast.encoder.encode(message)
        except _fast.LargeBuffer:
            return _fast.encode_spliced(message)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as exc:
        raise _errors.encode_error(wrapped, transport, exc) from None


def _prepared(obj: Any, plan: _plans.Plan, transport: str) -> tuple[Any, Any]:
    """(obj with its opaque fields wrapped, the message msgspec encodes: the same with long
    List[array] fields pre-encoded), after the R-VAL-6 scan where the plan says it must run.
    Most one-row messages need none of it: (obj, obj)."""
    work = plan.send_work(obj)
    if not work:
        return obj, obj
    if work & _plans.SCAN:
        _refuse_colliding_keys(obj, transport)
    wrapped = _wrapped(obj, plan) if work & _plans.WRAP else obj
    if work & _plans.ARRAYS:
        return wrapped, _fast.with_array_raw(wrapped, plan.arrays, copied=wrapped is not obj)
    return wrapped, wrapped


def _refuse_colliding_keys(obj: Any, transport: str) -> None:
    """R-VAL-6: two keys of one map that a peer reads as one key are refused, never both written."""
    found = _keys.find_collision(obj)
    if found is not None:
        path, first, second = found
        raise WireError(transport, f"map keys {first!r} and {second!r} are one key to a peer (SPEC R-VAL-6)",
                        struct=type(obj).__name__, path=path, direction="encode")


# -- decode -----------------------------------------------------------------------
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
    max_bytes / max_nesting override the process's limits for this call (0: no limit); those
    come from IPC_MAX_MESSAGE_BYTES / IPC_MAX_NESTING, read on first use (a value that is not
    an integer: ValueError naming the variable).
    Whatever the input, the only exception is WireError."""
    if transport not in _TRANSPORT_SET:
        transport = resolve_transport(transport)
    limits = _limits.current()
    limit = limits.max_message_bytes if max_bytes is None else max_bytes
    if limit and len(data) > limit:
        raise _errors.too_large(transport, len(data), limit)
    if max_nesting is not None or limits.max_nesting is not None:
        _errors.check_limits(data, transport, 0, max_nesting)
    if transport == "pickle":
        # The pickle transport is for trusted peers only, by definition (spec: security).
        try:
            obj = pickle.loads(data)
        except Exception as exc:  # noqa: BLE001 - whatever unpickling raises: one WireError
            raise WireError("pickle", f"{type(exc).__name__}: {exc}") from None
    else:
        obj = _MISS
        if data and data[0] not in _STR_MARKERS:
            if len(data) >= _FAST_DECODE_MIN:
                obj = _twin_decoded(data)
            if obj is _MISS:
                try:  # straight to msgspec
                    obj = _catalogue.decoder.decode(data)
                except Exception:  # noqa: BLE001 - the full path below redoes it and reports properly
                    pass
        if obj is _MISS:
            obj = _errors.decode_msgpack(data, _catalogue.decoder)
    if unwrap_wrappers:
        cls = type(obj)
        if cls is PickleWrapper or _plans.plan_of(cls).has_opaque_values(obj):
            obj = unwrap(obj, allow_pickle=allow_pickle, transport=transport, trusted_globals=trusted_globals)
    return obj


_MISS = _fast.MISS
_STR_MARKERS = _errors.STR_MARKERS  # a top-level str: decode_msgpack's own decoder
_FAST_DECODE_MIN = _limits.FAST_DECODE_MIN


def _twin_decoded(data: Any) -> Any:
    """A message with List[array] fields through its type's twin decoder (_codec_fast), or MISS."""
    catalogue = _catalogue
    if catalogue.fast:
        head = bytes(data[:catalogue.peek])
        for prefix, twin, real, names in catalogue.fast:
            if head.startswith(prefix):
                return _fast_decode(data, twin, real, names)
    return _MISS


# -- multipart (opt-in zero-copy for large tensors) -------------------------------
def encode_frames(obj: Any, transport: Optional[str] = None, *, threshold: int = OOB_THRESHOLD) -> list[Any]:
    """Encode as [message, buffer, buffer, ...]: tensors of at least `threshold` bytes are
    not copied into the message but referenced as later frames (msgpack only).
    The buffers share memory with contiguous CPU tensors: do not mutate those until the
    frames are sent (zmq_io.send waits for ZeroMQ to release them)."""
    transport = resolve_transport(transport)
    if transport == "pickle":
        return [encode(obj, transport)]
    _check_top_level(obj, transport)
    wrapped, message = _prepared(obj, _plans.plan_of(type(obj)), transport)
    try:
        if threshold >= _limits.SPLICE_THRESHOLD:
            try:  # no tensor/ndarray of _limits.SPLICE_THRESHOLD bytes or more: one frame, as encode()
                return [_fast.encoder.encode(message)]
            except _fast.LargeBuffer:
                pass
        collector = _FrameCollector(threshold)
        head = msgspec.msgpack.Encoder(enc_hook=collector).encode(message)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as exc:
        raise _errors.encode_error(wrapped, transport, exc) from None
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
    _errors.check_limits(frames[0], transport, max_bytes, max_nesting, size=sum(len(f) for f in frames))
    if transport == "pickle":
        raise WireError("pickle", f"{len(frames)} frames; the pickle transport sends one")
    oob = _cat.frames.value = ext.OobFrames(frames)
    try:
        obj = _errors.decode_msgpack(frames[0], _catalogue.frames_decoder)
        unused = set(range(1, len(frames))) - oob.used
    finally:
        _cat.frames.value = None
    if unused:
        raise WireError("msgpack", f"frames {sorted(unused)} are not referenced by the message")
    if unwrap_wrappers:
        obj = unwrap(obj, allow_pickle=allow_pickle, transport=transport, trusted_globals=trusted_globals)
    return obj
