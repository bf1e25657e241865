"""Where a message fails: WireErrors that name transport, struct and field path. Private to
the reference codec. Everything here runs on the error path only (or is the msgspec decode
that reports one), so it can afford walks of the value or of the raw bytes."""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence

import msgspec
import msgspec.inspect as mi

from . import _codec_limits, ext, wire_scan
from ._codec_catalogue import catalogue, current_frames
from ._codec_fast import encoder, pickle_dumps
from .errors import WireError

STR_MARKERS = frozenset(range(0xA0, 0xC0)) | {0xD9, 0xDA, 0xDB}


_PATH = re.compile(r" - at `\$(.*)`$")


_STEP = re.compile(r"\[(\d+|\.\.\.)\]|\.([A-Za-z_][A-Za-z_0-9]*)|\[(\"[^\"]*\"|'[^']*'|[^\]]*)\]")


def too_large(transport: str, size: int, limit: int) -> WireError:
    return WireError(transport, f"message of {size} bytes is over the limit of {limit} bytes "
                                "(max_bytes / IPC_MAX_MESSAGE_BYTES)")


def check_limits(data: Any, transport: str, max_bytes: Optional[int], max_nesting: Optional[int],
                  size: Optional[int] = None) -> None:
    limits = _codec_limits.current()
    limit = limits.max_message_bytes if max_bytes is None else (max_bytes or None)
    size = len(data) if size is None else size
    if limit is not None and size > limit:
        raise too_large(transport, size, limit)
    depth = limits.max_nesting if max_nesting is None else (max_nesting or None)
    if depth is not None and transport == "msgpack":
        found = wire_scan.scan(data, max_depth=depth, check_utf8=False)
        if found.problem is not None and found.problem.kind == "depth":
            struct, path = place(found.tag, found.problem.path)
            raise WireError("msgpack", f"nesting deeper than {depth} levels (max_nesting / IPC_MAX_NESTING)",
                            struct=struct, path=path)


def encode_error(obj: Any, transport: str, exc: Exception) -> WireError:
    if isinstance(exc, WireError):
        return WireError(transport, exc.reason, struct=type(obj).__name__, path=_locate_failure(obj, transport) or "",
                         direction="encode")
    path = _locate_failure(obj, transport)
    struct = type(obj).__name__ if isinstance(obj, msgspec.Struct) else None
    return WireError(transport, f"{type(exc).__name__}: {exc}", struct=struct, path=path or "", direction="encode")


def _locate_failure(obj: Any, transport: str, path: str = "") -> Optional[str]:
    """Slow path, on errors only: the deepest field path whose value fails to encode."""
    enc = pickle_dumps if transport == "pickle" else encoder.encode
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
        except Exception:  # noqa: BLE001 - any failure of the child's encode: that is the place
            return _locate_failure(child, transport, path + suffix) or path + suffix
    return None


_str_decoder = msgspec.msgpack.Decoder(str)


# What msgspec says of a string that is not UTF-8; releases up to 0.22 raise UnicodeDecodeError
# instead, which is reported with the same words so errors do not depend on the version.
_INVALID_UTF8 = "Invalid UTF-8 encoded string"


def decode_msgpack(data: Any, decoder: msgspec.msgpack.Decoder[Any]) -> Any:
    if len(data) and data[0] in STR_MARKERS:
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
            plain = decoder is catalogue.decoder
            if catalogue.refresh():  # a subclass defined after start-up: retry with it
                return decode_msgpack(data, catalogue.decoder if plain else catalogue.frames_decoder)
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


def place(tag: Optional[str], raw: Optional[list[wire_scan.Step]]) -> tuple[Optional[str], str]:
    """(struct, field path) for a positional path inside a message whose tag is `tag`."""
    if raw is None:
        return tag, ""
    shown, more = raw[:10], len(raw) - 10
    cls = catalogue.by_tag.get(tag) if tag else None
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
    struct, path = place(found.tag, raw)
    return WireError("msgpack", reason, struct=struct, path=path)


def _failing_ext(exts: list[tuple[list[wire_scan.Step], int, memoryview]],
                 error: BaseException) -> Optional[list[wire_scan.Step]]:
    """The path of the extension value whose hook raises `error` (re-run one by one)."""
    hook = ext.make_ext_hook(current_frames)
    first = None
    for path, code, payload in exts:
        try:
            hook(code, payload)
        except Exception as exc:  # noqa: BLE001 - replaying the hook to find the extension that raised
            if type(exc) is type(error) and str(exc) == str(error):
                return path
            first = first or path
    return first


def _unknown_tag(exc: Exception) -> bool:
    return str(exc).startswith("Invalid value") and str(exc).endswith("at `$[0]`")


def _peek_struct(data: Any) -> tuple[Optional[str], Optional[type]]:
    try:
        head = msgspec.msgpack.decode(data, ext_hook=lambda code, raw: None)
    except Exception:  # noqa: BLE001 - no tag to peek at; the caller reports the error it has
        return None, None
    if isinstance(head, list) and head and isinstance(head[0], str):
        return head[0], catalogue.by_tag.get(head[0])
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
    t: Optional[mi.Type]
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
