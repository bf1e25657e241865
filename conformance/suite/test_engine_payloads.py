"""Engine-built payloads (SPEC R-PW-7): the objects an engine really builds and sends inside its
messages (a request's normalized sampling parameters, multimodal items filled through the
processor's setter, a shared-memory pointer), from ``Adapter.engine_payloads()``, arrive with the
state they were sent with, under both transports.

Each object is built by the adapter's builder (the engine's own constructors, setters and
normalization), set at its position of the canonical message, sent with the implementation's own
``send`` over a real ZeroMQ socket pair and received with its own ``recv`` (its decode and
unwrap). Its state on both sides is compared (conformance/suite/payloads.py ``engine_state``):
``__getstate__()`` where the class defines one, else fields, ``__dict__`` and slots, recursively;
tensors by dtype, shape, device and values; dtypes by identity. What neither transport carries
(an attribute the engine's setter put in an instance ``__dict__``) and what a decoder does not
restore (a dtype left as its marker map) shows as a differing path."""

from __future__ import annotations

import contextlib
import tempfile
from typing import Any

import zmq

from conformance.plugin import check
from conformance.suite.capability import require
from conformance.suite.failure import Failure, raise_failure
from conformance.suite.payloads import engine_state_differences


def _names(ipc: Any) -> list[str]:
    """The adapter's engine payloads whose message this catalogue has."""
    messages = set(ipc.message_names)
    return [name for name, payload in ipc.adapter.engine_payloads().items()
            if payload.position.split(".")[0] in messages]


def _over_socket(ipc: Any, message: Any, transport: str) -> Any:
    """message through the implementation's own send and recv over a real ZeroMQ PAIR link (under
    msgpack sent as the sending process puts it on its socket: its wrapped copy)."""
    adapter = ipc.adapter
    sent = adapter.wrap(message) if transport == "msgpack" and adapter.supports("unwrap") else message
    ctx = zmq.Context()
    try:
        with tempfile.TemporaryDirectory() as folder:
            sender, receiver = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
            try:
                for sock in (sender, receiver):
                    for option, value in ((zmq.LINGER, 0), (zmq.RCVTIMEO, 10_000), (zmq.SNDTIMEO, 10_000)):
                        sock.setsockopt(option, value)
                receiver.bind(f"ipc://{folder}/link")
                sender.connect(f"ipc://{folder}/link")
                adapter.send(sender, sent, transport)
                return adapter.recv(receiver, transport)
            finally:
                sender.close()
                receiver.close()
    finally:
        ctx.term()


@check("EnginePayload", per=("payload", "transport"), name="StateKept", cases={"payload": _names})
def test_engine_payload_state_kept(ipc, payload, transport):
    """The engine-built object arrives with the state it was sent with."""
    require(ipc, "socket")
    spec = ipc.adapter.engine_payloads()[payload]
    struct, field = spec.position.split(".", 1)
    built = spec.build()
    received: Any = None
    try:
        message = ipc.instance(struct, "typical")
        setattr(message, field, built)
        got = _over_socket(ipc, message, transport)
        received = getattr(got, field, None) if type(got).__name__ == struct else got
        diffs = [d.replace("$", f"$.{field}", 1) for d in engine_state_differences(built, received)]
        if diffs:
            raise_failure(Failure(
                f"{payload} ({type(built).__qualname__} at {spec.position}) lost state over {transport}", "R-PW-7",
                f"the implementation's send over a ZeroMQ socket, then its recv (decode and unwrap), "
                f"over {transport}; state read with __getstate__ where the class defines it, else fields, "
                f"__dict__ and slots", diffs), ipc)
    finally:
        if spec.release is not None:
            spec.release(built)
            if received is not None:
                with contextlib.suppress(Exception):  # whatever arrived: a cleanup never hides the verdict
                    spec.release(received)
