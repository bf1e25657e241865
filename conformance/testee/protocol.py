"""The testee protocol, runner side (normative text: spec/testee.md).

Both directions carry frames: a 4-byte little-endian unsigned length N, then N bytes of
one msgpack map with string keys. The runner writes requests to the testee's stdin and
reads one response per request from its stdout (stderr is the testee's log).

    start    -> started   {protocol, implementation{name, version, language}, manifest,
                           transports, ops, tensors (protocol 2), spec}
    decode   -> result    decode `payload` as one message and re-encode it; protocol 2 adds
                          `view`, the JSON view of the decoded value itself
    encode   -> result    build the message a JSON view describes and encode it
    http     -> result    validate HTTP JSON into `struct`, answer its msgpack encoding
    receive  -> result    the receive path for an UNTRUSTED peer, answer the message re-encoded
    unwrap   -> result    the receive path for a trusted peer, answer the unwrapped object pickled
    define   -> result    define a late subclass `name` of message `base` (Python only)
    stop     -> stopped

A result is {"id", "result": payload | parse_error | serialize_error | runtime_error |
skipped, "payload" (bytes, for payload), "message" (text, for the others)}.
"""

from __future__ import annotations

import struct
from typing import IO, Any, Iterable, Optional, get_args

import msgspec

from conformance import spec_versions
from conformance.errors import invalid_member
from conformance.testee import frames

#: the version this runner asks for; it also speaks every earlier one (spec/testee.md 2.1)
PROTOCOL = 2
PROTOCOLS = (1, 2)
#: how a testee holds tensors (handshake member `tensors`, protocol 2): in a device runtime
#: such as torch, or as values (shape, dtype, device string, bytes), as every non-Python one does
TENSOR_KINDS: tuple[str, ...] = get_args(frames.TensorKind)
RESULTS: tuple[str, ...] = get_args(frames.ResultKind)
REQUIRED_OPS = ("decode", "encode")
OPTIONAL_OPS = ("http", "receive", "unwrap", "define")


def capabilities(ops: "Iterable[str]") -> frozenset[str]:
    """The adapter capabilities (conformance/adapters/base.py CAPABILITIES) a testee offers, from
    the ops of its handshake: each optional op is the capability of the same name, and a ZeroMQ
    receive goes through the trusted receive path ('unwrap'). Zero-copy sends share the caller's
    memory, which a separate process cannot: never offered."""
    ops = set(ops)
    return frozenset(ops & set(OPTIONAL_OPS)) | (frozenset({"socket"}) if "unwrap" in ops else frozenset())
MAX_FRAME = 1 << 30

_LEN = struct.Struct("<I")
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


class ProtocolError(RuntimeError):
    """The testee broke the protocol: bad framing, an unexpected or malformed answer, EOF."""


def pack(message: dict[str, Any]) -> bytes:
    body = _encoder.encode(message)
    return _LEN.pack(len(body)) + body


def unpack(body: bytes) -> dict[str, Any]:
    # msgspec <= 0.22 raises UnicodeDecodeError for bad UTF-8 and TypeError for unhashable map keys
    try:
        message = _decoder.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, TypeError) as exc:
        raise ProtocolError(f"frame is not msgpack: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"frame holds a {type(message).__name__}, not a map")
    return message


def write_frame(stream: IO[bytes], message: dict[str, Any]) -> None:
    stream.write(pack(message))
    stream.flush()


def read_frame(stream: IO[bytes], frames_before: Optional[int] = None) -> Optional[dict[str, Any]]:
    """One message, or None at a clean end of stream (before a length prefix).
    `frames_before` (frames already read) only makes error messages say where it went wrong."""
    head = stream.read(4)
    if not head:
        return None
    where = _where(frames_before)
    if len(head) < 4:
        if _is_text(head):
            raise ProtocolError(f"the testee wrote {head.decode('ascii')!r} on stdout {where}: {_STDOUT_RULE}")
        raise ProtocolError(f"stream ended inside a length prefix ({head.hex()}) {where}")
    if _is_text(head):
        # A 4-byte prefix of printable text is a frame of at least 538 MB: far likelier a print.
        text = _text_prefix(head + _available(stream)).decode("ascii")
        raise ProtocolError(f"the testee wrote {_clip(text)!r} on stdout {where}: {_STDOUT_RULE}")
    (size,) = _LEN.unpack(head)
    if size > MAX_FRAME:
        raise ProtocolError(f"frame of {size} bytes (length prefix {head.hex()}) {where} is over the "
                            f"{MAX_FRAME}-byte limit: stray bytes on stdout?")
    body = stream.read(size)
    if len(body) < size:
        raise ProtocolError(f"stream ended after {len(body)} of {size} frame bytes")
    return unpack(body)


_STDOUT_RULE = "stdout carries only protocol frames; write logs to stderr"
_TEXT = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}


def _is_text(data: bytes) -> bool:
    return bool(data) and all(byte in _TEXT for byte in data)


def _text_prefix(data: bytes) -> bytes:
    end = next((i for i, byte in enumerate(data) if byte not in _TEXT), len(data))
    return data[:end]


def _available(stream: IO[bytes], limit: int = 200) -> bytes:
    """What the stream holds right now, without waiting for more (for an error message)."""
    read1 = getattr(stream, "read1", None)
    try:
        return read1(limit) if read1 is not None else b""
    except (OSError, ValueError):
        return b""


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _where(frames_before: Optional[int]) -> str:
    if frames_before is None:
        return "between frames"
    return "before its first frame" if frames_before == 0 else f"after frame {frames_before}"


def _frame(message: dict[str, Any], kind: type, name: str) -> None:
    """Validate a frame through its struct (conformance/testee/frames.py): a malformed one is
    one line naming the frame and the member, e.g. 'implementation.version'."""
    try:
        msgspec.convert(message, kind)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"malformed '{name}' frame from the testee: {invalid_member(exc)}") from None


def check_started(message: Any) -> dict[str, Any]:
    """Validate the answer to `start` (frames.Started); returns it."""
    if not isinstance(message, dict) or message.get("type") != "started":
        raise ProtocolError(f"expected a 'started' answer to 'start', got {message!r:.200}")
    if message.get("protocol") not in PROTOCOLS:
        raise ProtocolError(f"testee speaks protocol {message.get('protocol')!r}; this runner speaks "
                            f"{', '.join(map(str, PROTOCOLS))}")
    tensors = message.get("tensors")
    if message["protocol"] >= 2 and tensors not in TENSOR_KINDS:
        raise ProtocolError(f"protocol 2 needs 'tensors', one of {', '.join(TENSOR_KINDS)} "
                            f"(how the testee holds tensors), got {tensors!r:.100}")
    _frame(message, frames.Started, "started")
    if not message.get("transports", ["msgpack"]):
        raise ProtocolError("'transports' must be a non-empty subset of [msgpack, pickle], got []")
    ops = message.get("ops", list(REQUIRED_OPS))
    if not set(REQUIRED_OPS) <= set(ops):
        raise ProtocolError(f"'ops' must be a list of strings including {list(REQUIRED_OPS)}, got {ops!r:.200}")
    spec_version(message)
    return message


def spec_version(started: dict[str, Any]) -> str:
    """The spec version a testee targets ('spec' in its handshake, SPEC §14), in the table's
    spelling; the current one when it declares none."""
    declared = started.get("spec", spec_versions.CURRENT)
    if not isinstance(declared, str):
        raise ProtocolError(f"'spec' must be a version string such as {spec_versions.CURRENT!r}, got {declared!r:.200}")
    try:
        return spec_versions.normalize(declared)
    except ValueError as exc:
        raise ProtocolError(f"'spec': {exc}") from None


def check_stopped(message: Any) -> dict[str, Any]:
    """Validate the answer to `stop` (frames.Stopped); returns it."""
    if not isinstance(message, dict) or message.get("type") != "stopped":
        raise ProtocolError(f"expected a 'stopped' answer to 'stop', got {message!r:.100}")
    _frame(message, frames.Stopped, "stopped")
    return message


def check_request(message: dict[str, Any], saved: bool = False) -> dict[str, Any]:
    """Validate a request frame through its struct (frames.Request): a saved one (`testee replay`;
    saved without its id) before it is sent again. The runner's own requests are checked against
    the schema by tests, not on every send: some checks send a testee a request it must refuse."""
    try:
        msgspec.convert({**message, "id": 0} if saved else message, frames.Request)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"malformed '{message.get('type')}' request frame: {invalid_member(exc)}") from None
    return message


def check_result(message: Any, request_id: int) -> dict[str, Any]:
    """Validate an answer to request `request_id` (frames.Result); returns it."""
    if not isinstance(message, dict):
        raise ProtocolError(f"expected a result map, got {message!r:.200}")
    if message.get("id") != request_id:
        raise ProtocolError(f"answer carries id {message.get('id')!r}, the request had {request_id}")
    _frame(message, frames.Result, "result")
    if message["result"] == "payload" and message.get("payload") is None:
        raise ProtocolError("a payload result needs 'payload' as msgpack bin")
    return message
