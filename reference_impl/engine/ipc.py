"""The engine's ZeroMQ links: one receive path for every process, and senders.

Every message is a struct of reference_impl.io_struct, encoded by the reference
codec under the transport chosen at launch (one frame, byte-identical to
upstream's ``socket.send(msgpack_encode(obj))`` / ``send_pyobj``).

The receive path is the same everywhere and has three explicit steps:

    frames --decode (wrappers kept)--> struct --unwrap--> struct handed downstream
                                          \\--tap: raw frames + leftovers (tests)

Inside the engine every peer is trusted, so unwrap opens PickleWrappers (time
stats, customized info) with the allow-listed unpickler. Each process passes its
own unwrap function (the data-parallel controller's is controller.unwrap_on_receive).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional

import zmq
import zmq.asyncio

from reference_impl import codec, zmq_io

from .tap import Tap

logger = logging.getLogger(__name__)

SEND_TIMEOUT_MS = 10_000  # a peer that stops reading for this long is treated as dead


def unwrap_received(obj: Any, transport: str) -> Any:
    """The standard receive-path unwrap: every PickleWrapper opened (trusted peers)."""
    return codec.unwrap(obj, allow_pickle=True, transport=transport)


def skip_unwrap(obj: Any, transport: str) -> Any:
    """Test hook only (EngineConfig.debug_skip_unwrap): the receive path forgets to unwrap."""
    return obj


Unwrap = Callable[[Any, str], Any]


def choose_unwrap(process: str, debug_skip: tuple[str, ...], default: Unwrap = unwrap_received) -> Unwrap:
    if process in debug_skip:
        logger.warning("%s: DEBUG HOOK ACTIVE - the receive path does NOT unwrap PickleWrapper", process)
        return skip_unwrap
    return default


def _decode(frames: list[zmq.Frame], link: str, transport: str, unwrap: Unwrap, tap: Tap) -> Any:
    buffers = [f.buffer for f in frames]
    try:
        obj = codec.decode_frames(buffers, transport, allow_pickle=True, unwrap_wrappers=False)
    except Exception:
        tap.undecodable(link, transport, buffers)
        raise
    delivered = unwrap(obj, transport)
    tap.record(link, transport, buffers, delivered)
    return delivered


class Receiver:
    """A bound PULL socket and this process's receive path."""

    def __init__(self, ctx: zmq.Context[Any], endpoint: str, *, link: str, transport: str, tap: Tap,
                 unwrap: Unwrap = unwrap_received) -> None:
        self.sock = ctx.socket(zmq.PULL)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(endpoint)
        self.link, self.transport, self.tap, self.unwrap = link, transport, tap, unwrap

    def recv(self, timeout_ms: Optional[int] = None) -> Any:
        """One message, or None when nothing arrived within timeout_ms (0: do not wait)."""
        if timeout_ms is not None and not self.sock.poll(timeout_ms, zmq.POLLIN):
            return None
        frames = self.sock.recv_multipart(copy=False)
        return _decode(frames, self.link, self.transport, self.unwrap, self.tap)

    def close(self) -> None:
        self.sock.close(linger=0)


class AsyncReceiver:
    """The same receive path on an asyncio socket (the tokenizer manager)."""

    def __init__(self, ctx: zmq.asyncio.Context, endpoint: str, *, link: str, transport: str, tap: Tap,
                 unwrap: Unwrap = unwrap_received) -> None:
        self.sock = ctx.socket(zmq.PULL)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(endpoint)
        self.link, self.transport, self.tap, self.unwrap = link, transport, tap, unwrap

    async def recv(self) -> Any:
        frames = await self.sock.recv_multipart(copy=False)
        return _decode(frames, self.link, self.transport, self.unwrap, self.tap)

    def close(self) -> None:
        self.sock.close(linger=0)


class Sender:
    """A connected PUSH socket (with a tap: each message counted towards the process peer)."""

    def __init__(self, ctx: zmq.Context[Any], endpoint: str, transport: str, tap: Optional[Tap] = None,
                 peer: str = "") -> None:
        self.sock = ctx.socket(zmq.PUSH)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
        self.sock.connect(endpoint)
        self.transport, self.tap, self.peer = transport, tap, peer

    def send(self, obj: Any) -> None:
        if self.tap is not None:
            self.tap.sent(self.peer)
        zmq_io.send(self.sock, obj, self.transport)

    def close(self) -> None:
        self.sock.close(linger=0)


class AsyncSender:
    def __init__(self, ctx: zmq.asyncio.Context, endpoint: str, transport: str, tap: Optional[Tap] = None,
                 peer: str = "") -> None:
        self.sock = ctx.socket(zmq.PUSH)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
        self.sock.connect(endpoint)
        self.transport, self.tap, self.peer = transport, tap, peer

    async def send(self, obj: Any) -> None:
        if self.tap is not None:
            self.tap.sent(self.peer)
        await zmq_io.asend(self.sock, obj, self.transport)

    def close(self) -> None:
        self.sock.close(linger=0)
