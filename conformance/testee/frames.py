"""The frames of the testee protocol as msgspec structs (normative text: spec/testee.md).

One struct per frame kind. The runner validates every frame a testee sends through them
(protocol.check_started, protocol.check_result), and the JSON Schema published as
spec/schemas/testee.schema.json is generated from them (`python -m conformance.json_schemas
--write`), so a testee in any language can generate or check its side. A frame is a msgpack
map; the schema describes that map with msgspec's JSON mapping, where a msgpack bin member
(`payload`) reads as a base64 string.

Requests carry `type` (the tag); answers to `start` and `stop` do too; every other answer is
a `Result`, told apart by its `id`. Members a frame does not list MAY be added and are ignored.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

import msgspec

__all__ = ["ANSWERS", "REQUESTS", "Decode", "Define", "Encode", "Http", "Implementation", "Receive", "Request",
           "Result", "Start", "Started", "Stop", "Stopped", "Unwrap"]

def _doc(text: str) -> msgspec.Meta:
    """A member's description in the published JSON Schema."""
    return msgspec.Meta(description=text)


Transport = Literal["msgpack", "pickle"]
ResultKind = Literal["payload", "parse_error", "serialize_error", "runtime_error", "skipped"]
TensorKind = Literal["runtime", "values"]


# -- runner -> testee ------------------------------------------------------------------------
class Start(msgspec.Struct, tag_field="type", tag="start"):
    """The handshake: the newest protocol version the runner speaks."""

    protocol: int


class Decode(msgspec.Struct, tag_field="type", tag="decode"):
    """Decode `payload` as one message with the receive-side decoder, then encode it again."""

    id: int
    transport: Transport
    payload: bytes
    struct: Annotated[Optional[str], _doc("the tag the runner read from the payload: a hint only")] = None


class Encode(msgspec.Struct, tag_field="type", tag="encode"):
    """Build the value a JSON view (SPEC §13.3) describes and encode it with the sender path."""

    id: int
    transport: Transport
    view: str
    struct: Optional[str] = None


class Http(msgspec.Struct, tag_field="type", tag="http"):
    """Validate an HTTP JSON body into `struct` through the HTTP bridge; answer its msgpack encoding."""

    id: int
    struct: str
    json: str


class Receive(msgspec.Struct, tag_field="type", tag="receive"):
    """The receive path for an untrusted peer: answer the message re-encoded, or parse_error."""

    id: int
    transport: Transport
    payload: bytes
    struct: Optional[str] = None


class Unwrap(msgspec.Struct, tag_field="type", tag="unwrap"):
    """The receive path for a trusted peer: answer the unwrapped object, pickled."""

    id: int
    transport: Transport
    payload: bytes


class Define(msgspec.Struct, tag_field="type", tag="define"):
    """Define a late subclass `name` of message `base` (Python testees)."""

    id: int
    name: str
    base: str
    module: str


class Stop(msgspec.Struct, tag_field="type", tag="stop"):
    """Answer `stopped` and exit with status 0."""


Request = Union[Start, Decode, Encode, Http, Receive, Unwrap, Define, Stop]
REQUESTS: tuple[type, ...] = (Start, Decode, Encode, Http, Receive, Unwrap, Define, Stop)


# -- testee -> runner ------------------------------------------------------------------------
class Implementation(msgspec.Struct):
    name: str
    version: str
    language: Optional[str] = None


class Started(msgspec.Struct, tag_field="type", tag="started"):
    """The answer to `start`."""

    protocol: Annotated[int, _doc("the version the testee speaks: 1 or 2")]
    implementation: Implementation
    manifest: Annotated[str, _doc("the id of the bundled manifest the implementation claims")]
    transports: tuple[Transport, ...] = ("msgpack",)
    ops: Annotated[tuple[str, ...], _doc("the ops it offers; decode and encode are required")] = ("decode", "encode")
    tensors: Annotated[Optional[TensorKind], _doc("required from protocol 2: how the testee holds tensors")] = None
    spec: Annotated[Optional[str], _doc("the SPEC.md version the implementation targets (major.minor)")] = None


class Result(msgspec.Struct):
    """The answer to every request that carries an `id`."""

    id: int
    result: ResultKind
    payload: Annotated[Optional[bytes], _doc("with result 'payload': the answer's bytes (msgpack bin)")] = None
    message: Annotated[Optional[str], _doc("with every other result: what went wrong, naming struct and field")] = None
    view: Annotated[Optional[str], _doc("protocol 2, a msgpack decode: the JSON view of the decoded value")] = None


class Stopped(msgspec.Struct, tag_field="type", tag="stopped"):
    """The answer to `stop`."""


ANSWERS: tuple[type, ...] = (Started, Result, Stopped)
