"""PickleWrapper: opaque Python objects inside msgpack messages, and where they unwrap.

Senders wrap the values of PickleWrapper-typed fields; every receive path
unwraps them again. Untrusted peers (the default) never reach pickle: a
PickleWrapper from them is refused. Trusted peers unpickle through an
allow-list, so a wrapper cannot name arbitrary callables.
"""

from __future__ import annotations

import io
import logging
import os
import pickle
from collections import Counter
from functools import lru_cache
from typing import Any, Callable, Iterable, Optional

import msgspec
import msgspec.inspect as mi

from .errors import WireError
from .io_struct import PickleWrapper
from .pickle_scan import check_memo_indices

logger = logging.getLogger(__name__)

# (module, name) pairs a trusted PickleWrapper may name, and modules whose *data
# classes* it may name (never functions: a pickle can call anything it can name).
SAFE_GLOBALS = {
    ("builtins", n) for n in ("set", "frozenset", "list", "dict", "tuple", "bytearray", "complex", "slice", "range")
} | {
    ("collections", n) for n in ("OrderedDict", "defaultdict", "deque", "Counter")
} | {("copyreg", "_reconstructor"), ("array", "_array_reconstructor"), ("array", "array")} | {
    ("datetime", n) for n in ("datetime", "date", "time", "timedelta", "timezone")
} | {("decimal", "Decimal"), ("uuid", "UUID")}
SAFE_CLASS_MODULES = ("reference_impl",)

#: How often each type crossed the wire inside a PickleWrapper, this process (the
#: migration's progress at a glance). Logged per object when IPC_LOG_PICKLE_OBJECTS=1.
pickle_residue: Counter[str] = Counter()


def _read_log_switch() -> bool:
    flag = os.environ.get("IPC_LOG_PICKLE_OBJECTS")
    return (flag if flag is not None else os.environ.get("SGLANG_LOG_PICKLE_IPC_OBJECTS", "0")) == "1"


_log_switch: Optional[bool] = None


def _log_objects() -> bool:
    """IPC_LOG_PICKLE_OBJECTS=1 (else SGLANG_LOG_PICKLE_IPC_OBJECTS=1): read once per process, on
    the first wrap or unwrap (reset_log_switch() reads it again)."""
    global _log_switch
    if _log_switch is None:
        _log_switch = _read_log_switch()
    return _log_switch


def reset_log_switch() -> None:
    """Read the logging switch again on the next wrap or unwrap (tests that change it)."""
    global _log_switch
    _log_switch = None


# type -> "module.qualname", the pickle_residue key of a wrapped value of that type
_type_names: dict[type, str] = {}


def _type_name(cls: type) -> str:
    name = _type_names.get(cls)
    if name is None:
        name = _type_names[cls] = f"{cls.__module__}.{cls.__qualname__}"
    return name


# A pickle can call what it names with arguments of its choosing: a few bytes asking for
# bytearray(2**33) or list(range(2**30)) would allocate gigabytes. The allow-listed callables
# that take a size are replaced by guards that refuse sizes beyond this (a pickled value never
# needs them: a bytearray travels with its content, a range is never materialized by pickle).
MAX_UNPICKLED_SIZE = 1 << 20


def _guarded_bytearray(*args: Any) -> bytearray:
    if args and isinstance(args[0], int) and not 0 <= args[0] <= MAX_UNPICKLED_SIZE:
        raise pickle.UnpicklingError(f"bytearray({args[0]}) is over the unpickling size limit "
                                     f"({MAX_UNPICKLED_SIZE})")
    return bytearray(*args)


def _guarded_range(*args: Any) -> range:
    value = range(*args)
    if len(value) > MAX_UNPICKLED_SIZE:
        raise pickle.UnpicklingError(f"a range of {len(value)} items is over the unpickling size limit "
                                     f"({MAX_UNPICKLED_SIZE})")
    return value


_GUARDED = {("builtins", "bytearray"): _guarded_bytearray, ("builtins", "range"): _guarded_range}


# (module, name) -> a data class of ours already admitted by find_class: the check is the
# same every time, and time stats name one in every message of the engine.
_ADMITTED: dict[tuple[str, str], type] = {}


class AllowListUnpickler(pickle.Unpickler):
    #: the (module, name) pairs this unpickler may name: SAFE_GLOBALS, unless the caller adds some
    allowed: set[tuple[str, str]] = SAFE_GLOBALS

    def __init__(self, data: bytes, extra: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(io.BytesIO(data))
        if extra:  # the receive path passes none: no per-message set is built
            extra = set(extra)
            if extra:
                self.allowed = SAFE_GLOBALS | extra

    def find_class(self, module: str, name: str) -> Any:
        key = (module, name)
        # First: a data class of ours admitted before (time stats name one in every message).
        # _ADMITTED only ever holds what the SAFE_CLASS_MODULES branch below admitted, which
        # no allow-list can take away, so looking there first refuses nothing less.
        admitted = _ADMITTED.get(key)
        if admitted is not None:
            return admitted
        if "." not in name:  # dotted names walk attributes: "os.system" under any module
            if key in self.allowed:
                guarded = _GUARDED.get(key)
                return guarded if guarded is not None else super().find_class(module, name)
            if any(module == m or module.startswith(m + ".") for m in SAFE_CLASS_MODULES):
                found = super().find_class(module, name)
                if _is_data_class(found):
                    _ADMITTED[key] = found
                    if vars(found).get("__unpickle_safe__") is True:
                        _admit_calls_of(module, name, found)
                    return found
        raise pickle.UnpicklingError(f"{module}.{name} is not on the unpickling allow-list")


# The pickle of `cls(b"...")` for a class with a one-bytes-argument __reduce__ (TimeStatsBatch:
# a batch's time stats as one msgpack blob), protocol 4 or 5, as pickle.dumps writes it:
#   PROTO FRAME, _call_header(module, name), bytes, [FRAME 6,] _CALL_TAIL
# (a bytes argument larger than a frame is written between the first frame and a second one).
_CALL_STARTS = {b"\x80\x04\x95", b"\x80\x05\x95"}
_CALL_TAIL = b"\x94\x85\x94R\x94."  # MEMOIZE TUPLE1 MEMOIZE REDUCE MEMOIZE STOP
_TAIL_FRAME = b"\x95" + len(_CALL_TAIL).to_bytes(8, "little")
_BYTES_LENGTHS = {0x43: 1, 0x42: 4, 0x8E: 8}  # SHORT_BINBYTES, BINBYTES, BINBYTES8: bytes of the length
#: header -> class, for the admitted classes that say ``__unpickle_safe__`` (filled by find_class)
_CALL_HEADERS: dict[bytes, type] = {}
MISS = object()


def _call_header(module: str, name: str) -> Optional[bytes]:
    """SHORT_BINUNICODE module MEMOIZE SHORT_BINUNICODE name MEMOIZE STACK_GLOBAL MEMOIZE."""
    m, n = module.encode(), name.encode()
    if len(m) > 255 or len(n) > 255:
        return None
    return b"\x8c" + bytes([len(m)]) + m + b"\x94\x8c" + bytes([len(n)]) + n + b"\x94\x93\x94"


def _admit_calls_of(module: str, name: str, cls: type) -> None:
    """Let call_of_admitted open calls of cls. The table is replaced, never changed in place, so
    a receive on another thread iterating over it meanwhile is never disturbed."""
    global _CALL_HEADERS
    header = _call_header(module, name)
    if header is not None and header not in _CALL_HEADERS:
        _CALL_HEADERS = {**_CALL_HEADERS, header: cls}


def call_of_admitted(data: bytes) -> Any:
    """The value of a pickle that is exactly one call of an admitted, unpickle-safe class with
    one bytes argument, made without the unpickler; MISS for any other pickle (the unpickler
    decides). What the unpickler would do with these opcodes is this call and nothing else: the
    pickle reads no memo (no memory bomb to scan for) and nothing follows STOP. An engine
    receives one in every step message (its time stats), so this is kept to a few comparisons."""
    if data[:3] not in _CALL_STARTS or not data.endswith(_CALL_TAIL):
        return MISS
    headers = _CALL_HEADERS  # one class in the engine: TimeStatsBatch
    for header in headers:
        if data.startswith(header, 11):
            break
    else:
        return MISS
    at = 11 + len(header)  # the bytes opcode
    try:
        width = _BYTES_LENGTHS[data[at]]
    except (IndexError, KeyError):
        return MISS
    start = at + 1 + width
    end = start + int.from_bytes(data[at + 1:start], "little")
    frame_end = 11 + int.from_bytes(data[3:11], "little")
    if frame_end == len(data) == end + len(_CALL_TAIL) or (
            frame_end == at and data.startswith(_TAIL_FRAME, end)
            and end + len(_TAIL_FRAME) + len(_CALL_TAIL) == len(data)):
        return headers[header](data[start:end])
    return MISS


def _is_data_class(obj: Any) -> bool:
    """Structs, dataclasses and enums: constructing them runs no code of consequence. A class
    of ours may say the same of itself with ``__unpickle_safe__ = True`` in its own body (a
    container whose constructor only decodes its argument with msgspec)."""
    import dataclasses
    import enum

    return isinstance(obj, type) and (
        issubclass(obj, (msgspec.Struct, enum.Enum)) or dataclasses.is_dataclass(obj)
        or vars(obj).get("__unpickle_safe__") is True
    )


def wrap(value: Any) -> Optional[PickleWrapper]:
    if value is None or isinstance(value, PickleWrapper):
        return value
    name = _type_name(type(value))
    pickle_residue[name] += 1
    if _log_objects():
        logger.info("Object of type %s is wrapped in PickleWrapper", name)
    return PickleWrapper(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def unwrap_value(wrapper: PickleWrapper, *, allow_pickle: bool, transport: str, where: tuple[str, str],
                 trusted_globals: Iterable[tuple[str, str]] = ()) -> Any:
    struct, path = where
    if not allow_pickle:
        raise WireError(
            transport,
            "PickleWrapper refused: the peer is not trusted (allow_pickle=False), "
            "so its bytes never reach pickle",
            struct=struct, path=path,
        )
    try:
        data = wrapper.data
        if type(data) is not bytes:  # a zero-copy decode's memoryview: the scan wants bytes
            data = bytes(data)
        value = call_of_admitted(data)  # the time stats of a step message: no unpickler needed
        if value is MISS:
            check_memo_indices(data)  # memory bombs the C unpickler would fall for
            value = AllowListUnpickler(data, trusted_globals).load()
    except Exception as exc:  # noqa: BLE001 - any refusal or unpickling error: one WireError
        raise WireError(transport, f"PickleWrapper payload refused: {type(exc).__name__}: {exc}", struct=struct,
                        path=path) from None
    if _log_objects():
        logger.info("Object of type %s is unwrapped from PickleWrapper", type(value).__qualname__)
    return value


# -- where PickleWrappers can sit ------------------------------------------------
# The walk follows declared field types, never guesses from values: a field typed
# PickleWrapper holds one opaque value (a list of time stats is wrapped whole).
def _is_wrapper_type(t: mi.Type) -> bool:
    if isinstance(t, mi.StructType):
        return t.cls is PickleWrapper
    return isinstance(t, mi.UnionType) and any(_is_wrapper_type(a) for a in t.types)


def _children(t: mi.Type) -> tuple[Any, ...]:
    if isinstance(t, mi.UnionType):
        return t.types
    if isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        return (t.item_type,)
    if isinstance(t, mi.TupleType):
        return t.item_types
    if isinstance(t, mi.DictType):
        return (t.value_type,)
    return ()


def _mentions_wrapper(t: mi.Type, seen: frozenset[Any]) -> bool:
    if _is_wrapper_type(t):
        return True
    if isinstance(t, mi.StructType):
        return t.cls not in seen and bool(_plan(t.cls, seen))
    return any(_mentions_wrapper(c, seen) for c in _children(t))


@lru_cache(maxsize=None)
def _plan(cls: type, seen: frozenset[Any] = frozenset()) -> tuple[tuple[str, mi.Type], ...]:
    seen = seen | {cls}
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType), cls
    return tuple((f.name, f.type) for f in info.fields if _mentions_wrapper(f.type, seen))


def opaque_fields(cls: type) -> tuple[str, ...]:
    """Fields of a struct whose values may hold a PickleWrapper (directly or nested)."""
    return tuple(name for name, _ in _plan(cls))


@lru_cache(maxsize=None)
def nested_opaque_fields(cls: type) -> tuple[str, ...]:
    """The opaque fields a wrap walks *into* (a struct or container holding wrappers further
    down); a field typed PickleWrapper itself is replaced whole, never modified in place."""
    return tuple(name for name, t in _plan(cls) if not _is_wrapper_type(t))


#: fn(value, struct, path) -> the value to put there: what map_wrapped applies at each wrapper position.
WrapperVisit = Callable[[Any, str, str], Any]


def map_wrapped(obj: Any, fn: WrapperVisit, struct: str = "", path: str = "") -> Any:
    """Apply fn(value, struct, path) at every PickleWrapper-typed position under obj
    (obj itself when it is a PickleWrapper). Structs are updated in place."""
    if isinstance(obj, PickleWrapper):
        return fn(obj, struct, path)
    if isinstance(obj, msgspec.Struct):
        _walk_struct(obj, fn, struct or type(obj).__name__, path)
    return obj


def _walk_struct(obj: msgspec.Struct, fn: WrapperVisit, struct: str, path: str) -> None:
    for name, t in _plan(type(obj)):
        old = getattr(obj, name)
        if old is not None:
            new = _walk(old, t, fn, struct, f"{path}.{name}")
            if new is not old:
                msgspec.structs.force_setattr(obj, name, new)


def _walk(value: Any, t: mi.Type, fn: WrapperVisit, struct: str, path: str) -> Any:
    if value is None:
        return None
    if _is_wrapper_type(t):
        return fn(value, struct, path)
    if isinstance(value, msgspec.Struct):
        _walk_struct(value, fn, struct, path)
        return value
    arms = t.types if isinstance(t, mi.UnionType) else (t,)
    for arm in arms:
        if isinstance(value, list) and isinstance(arm, (mi.ListType, mi.VarTupleType)):
            walked = [_walk(v, arm.item_type, fn, struct, f"{path}[{i}]") for i, v in enumerate(value)]
            return value if all(a is b for a, b in zip(walked, value)) else walked
        if isinstance(value, dict) and isinstance(arm, mi.DictType):
            items = {k: _walk(v, arm.value_type, fn, struct, f"{path}[{k!r}]") for k, v in value.items()}
            return value if all(items[k] is value[k] for k in value) else items
    return value
