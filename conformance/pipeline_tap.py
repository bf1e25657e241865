"""What every pipeline driver shares (conformance/pipeline.py says what a run is): the tap on
a process's receiving sockets (frames: size, pickle or msgpack; frames sent towards it), the
plain JSON form of what a hop handed on (``received_form``: a request as a scheduler rank
received it, field by field), and the scenario driven through an HTTP client, each request
bounded in time. Used by the SGLang driver (conformance/adapters/sglang_pipeline.py) and the
reference's (reference_tools/pipeline_driver.py), so both runs are recorded the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import pickle
import sys
import threading
import time
from typing import Any, Awaitable, Callable, Mapping, Sequence


# -- the tap ------------------------------------------------------------------------------
def frame_kind(data: bytes) -> str:
    """pickle (protocol 2 and up open with PROTO) or msgpack (anything else an engine sends)."""
    return "pickle" if bytes(data[:1]) == b"\x80" else "msgpack"


class Tap:
    """What reached each process's receiving socket (frames: size, kind) and how many frames
    were sent towards it, keyed by the receiving process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.frames: dict[str, list[tuple[int, str]]] = {}
        self.sent: dict[str, int] = {}

    def received(self, link: str, data: bytes) -> None:
        with self.lock:
            self.frames.setdefault(link, []).append((len(data), frame_kind(data)))

    def sending(self, link: str) -> None:
        with self.lock:
            self.sent[link] = self.sent.get(link, 0) + 1

    def report(self) -> dict[str, Any]:
        with self.lock:
            return {link: {"frames": len(frames), "kinds": sorted({k for _, k in frames}),
                           "largest": max((n for n, _ in frames), default=0), "sent": self.sent.get(link, 0)}
                    for link, frames in sorted(self.frames.items())}


class TappedSocket:
    """A ZeroMQ socket (sync or asyncio) whose frames the tap sees; every call reaches the socket
    the implementation made (its options, its endpoint). pyzmq's send_pyobj/recv_pyobj are
    pickle.dumps/loads around send/recv: the tap does the same, so it sees those frames too."""

    def __init__(self, sock: Any, link: str, tap: Tap) -> None:
        import zmq.asyncio

        self._sock, self._link, self._tap = sock, link, tap
        self._async = isinstance(sock, zmq.asyncio.Socket)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def send(self, data: Any, flags: int = 0, **kwargs: Any) -> Any:
        self._tap.sending(self._link)
        return self._sock.send(data, flags=flags, **kwargs)

    def send_pyobj(self, obj: Any, flags: int = 0, protocol: int = pickle.DEFAULT_PROTOCOL, **kwargs: Any) -> Any:
        return self.send(pickle.dumps(obj, protocol), flags=flags, **kwargs)

    def recv(self, flags: int = 0, **kwargs: Any) -> Any:
        if self._async:
            return self._recv_async(flags, **kwargs)
        data = self._sock.recv(flags=flags, **kwargs)
        self._tap.received(self._link, data)
        return data

    async def _recv_async(self, flags: int, **kwargs: Any) -> Any:
        data = await self._sock.recv(flags=flags, **kwargs)
        self._tap.received(self._link, data)
        return data

    def recv_pyobj(self, flags: int = 0, **kwargs: Any) -> Any:
        if self._async:
            async def get() -> Any:
                return pickle.loads(await self._recv_async(flags, **kwargs))
            return get()
        return pickle.loads(self.recv(flags, **kwargs))


# -- plain JSON of what a hop handed on ----------------------------------------------------
def plain(value: Any, depth: int = 0) -> Any:
    """A JSON form that keeps what differs between transports: types of containers and of
    opaque objects, float specials, tensors by dtype/shape/values. (torch and numpy are looked
    up, not imported: a value of theirs exists only where they are imported already.)"""
    import array
    import enum

    import msgspec

    torch, np = sys.modules.get("torch"), sys.modules.get("numpy")
    if depth > 12:
        return "<deep>"
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, bytes):
        return {"$bytes": len(value), "sha256": hashlib.sha256(value).hexdigest()[:16]}
    if isinstance(value, enum.Enum):
        return {"$enum": f"{type(value).__name__}.{value.name}"}
    if torch is not None and isinstance(value, torch.Tensor):
        return {"$tensor": str(value.dtype), "shape": list(value.shape), "device": str(value.device),
                "values": plain(value.detach().cpu().flatten()[:8].tolist(), depth + 1)}
    if np is not None and isinstance(value, np.ndarray):
        return {"$ndarray": value.dtype.str, "shape": list(value.shape),
                "values": plain(value.flatten()[:8].tolist(), depth + 1)}
    if isinstance(value, array.array):
        return {"$array": value.typecode, "values": list(value)}
    if isinstance(value, (list, tuple)):
        items = [plain(v, depth + 1) for v in value]
        return items if isinstance(value, list) else {"$tuple": items}
    if isinstance(value, (set, frozenset)):
        return {"$set": sorted(map(repr, value))}
    if isinstance(value, dict):
        return {str(k) if isinstance(k, str) else repr(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, msgspec.Struct):
        return {"$struct": type(value).__name__,
                **{f: plain(getattr(value, f), depth + 1) for f in value.__struct_fields__}}
    return {"$object": type(value).__name__}


#: Fields whose value is a clock reading, an address of this run or a route of the topology.
VOLATILE_FIELDS = {"time_stats", "http_worker_ipc", "http_worker_ipcs", "routed_dp_rank", "dp_ranks",
                   "created_time", "trace_context"}


def received_form(obj: Any) -> dict[str, Any]:
    """A request as a scheduler rank received it, field by field (clock and route fields by
    type only: they differ between any two runs)."""
    fields = {}
    for name in getattr(obj, "__struct_fields__", ()):
        value = getattr(obj, name)
        fields[name] = {"$type": type(value).__name__} if name in VOLATILE_FIELDS else plain(value)
    return {"$struct": type(obj).__name__, **fields}


# -- the scenario through an HTTP client ---------------------------------------------------
async def drive(client: Any, scenario: Sequence[Mapping[str, Any]], timeout_s: float,
                dead: Callable[[], str]) -> dict[str, Any]:
    """The scenario through an httpx.AsyncClient (an app in process, or a server's URL): each
    request's JSON answer (or its stream's chunks), in order; a request not answered within
    timeout_s, or while a hop is dead, is recorded with why (``$error``)."""
    return {step["name"]: await post_step(client, step, timeout_s, dead) for step in scenario}


async def post_step(client: Any, step: Mapping[str, Any], timeout_s: float, dead: Callable[[], str]) -> dict[str, Any]:
    """One step of the scenario posted: its status and JSON body (or a stream's chunks), or why
    there is none (``$error``: not sent, a hop being dead; no answer within timeout_s)."""
    path, body = step["path"], step["body"]
    if dead():
        return {"$error": f"not sent: {dead()} died"}
    answer = await answer_within(client.post(path, json=body), timeout_s, dead)
    if isinstance(answer, str):
        return {"$error": f"no answer to {path}: {answer}"}
    text = answer.text
    if body.get("stream"):
        chunks = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
        return {"status": answer.status_code, "chunks": [c if c == "[DONE]" else json.loads(c) for c in chunks]}
    with contextlib.suppress(ValueError):
        text = json.loads(text)
    return {"status": answer.status_code, "body": text}


async def answer_within(request: Awaitable[Any], timeout_s: float, dead: Callable[[], str]) -> Any:
    """The response, or why there is none: the bound passed, or a hop died meanwhile."""
    task = asyncio.ensure_future(request)
    deadline = time.monotonic() + timeout_s
    while not task.done():
        if time.monotonic() > deadline or dead():
            task.cancel()
            return f"{dead()} died" if dead() else f"none within {timeout_s} s"
        await asyncio.sleep(0.02)
    return task.result()
