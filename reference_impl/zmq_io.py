"""ZeroMQ send/recv helpers for both transports, sync and asyncio.

    send(sock, obj, transport=None, *, zero_copy=False)   /  await asend(...)
    recv(sock, transport=None, *, allow_pickle=False)     /  await arecv(...)

The plain path sends ONE frame, ``codec.encode(obj)``: byte-identical to upstream
SGLang's ``socket.send(msgpack_encode(obj))`` / ``send_pyobj``. ``zero_copy=True``
(opt-in) sends ``codec.encode_frames(obj)`` as a multipart message whose large
tensor frames share memory with the caller's tensors; send returns only once
ZeroMQ has released every frame, so the caller may reuse or mutate its tensors
as soon as it returns. recv takes either form, so a receiver needs no flag.
Decoding failures propagate as ``codec.WireError``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable, Optional

import zmq
import zmq.asyncio

from . import codec

__all__ = ["arecv", "asend", "recv", "send"]

# The asyncio wait for ZeroMQ to release zero-copy frames polls with a backoff
# from an immediate yield up to this many seconds between checks.
_MAX_POLL_INTERVAL = 1e-3


def _send_timeout(sock: zmq.Socket[Any]) -> Optional[float]:
    """The socket's SNDTIMEO in seconds, or None when it is infinite (-1)."""
    ms = int(sock.getsockopt(zmq.SNDTIMEO))
    return None if ms < 0 else ms / 1000


def _tracked_frames(obj: Any, transport: str) -> tuple[list[zmq.Frame], zmq.MessageTracker]:
    """encode_frames as tracked zmq Frames, and one tracker over all of them (send_multipart
    returns only the LAST frame's tracker). Frames under zmq.COPY_THRESHOLD are copied by
    pyzmq (their trackers start done); larger ones share the caller's memory."""
    frames = [zmq.Frame(part, track=True) for part in codec.encode_frames(obj, transport)]
    return frames, zmq.MessageTracker(*frames)


def _decode(frames: list[zmq.Frame], transport: str, allow_pickle: bool,
            trusted_globals: Iterable[tuple[str, str]]) -> Any:
    return codec.decode_frames([f.buffer for f in frames], transport,
                               allow_pickle=allow_pickle, trusted_globals=tuple(trusted_globals))


def send(sock: zmq.Socket[Any], obj: Any, transport: Optional[str] = None, *,
         zero_copy: bool = False, flags: int = 0) -> None:
    """Encode obj and send it. zero_copy: multipart, large tensors not copied; blocks
    until ZeroMQ has released them (bounded by SNDTIMEO: zmq.NotDone if exceeded,
    and then the buffers may still be in use)."""
    transport = codec.resolve_transport(transport)
    if not zero_copy:
        sock.send(codec.encode(obj, transport), flags)
        return
    frames, tracker = _tracked_frames(obj, transport)
    sock.send_multipart(frames, flags, copy=False)
    del frames  # a Frame pins its buffer too: drop ours so only ZeroMQ's references remain
    timeout = _send_timeout(sock)
    tracker.wait(-1 if timeout is None else timeout)


def recv(sock: zmq.Socket[Any], transport: Optional[str] = None, *, allow_pickle: bool = False,
         flags: int = 0, trusted_globals: Iterable[tuple[str, str]] = ()) -> Any:
    """Receive one message (single frame or zero-copy multipart) and decode it."""
    transport = codec.resolve_transport(transport)
    frames = sock.recv_multipart(flags, copy=False)
    return _decode(frames, transport, allow_pickle, trusted_globals)


async def asend(sock: zmq.asyncio.Socket, obj: Any, transport: Optional[str] = None, *,
                zero_copy: bool = False, flags: int = 0) -> None:
    """asyncio send; like send, but waits for the zero-copy release without blocking the loop."""
    transport = codec.resolve_transport(transport)
    if not zero_copy:
        await sock.send(codec.encode(obj, transport), flags)
        return
    frames, tracker = _tracked_frames(obj, transport)
    await sock.send_multipart(frames, flags, copy=False)
    del frames  # as in send: only ZeroMQ's references may remain
    timeout = _send_timeout(sock)
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    interval = 0.0
    while not tracker.done:
        if deadline is not None and loop.time() >= deadline:
            raise zmq.NotDone()
        await asyncio.sleep(interval)
        interval = min(max(interval * 2, 1e-5), _MAX_POLL_INTERVAL)


async def arecv(sock: zmq.asyncio.Socket, transport: Optional[str] = None, *, allow_pickle: bool = False,
                flags: int = 0, trusted_globals: Iterable[tuple[str, str]] = ()) -> Any:
    """asyncio recv: one message (single frame or zero-copy multipart), decoded."""
    transport = codec.resolve_transport(transport)
    frames = await sock.recv_multipart(flags, copy=False)
    return _decode(frames, transport, allow_pickle, trusted_globals)
