"""Over real ZeroMQ sockets: messages arrive whole, and zero-copy sends are safe to reuse."""

from __future__ import annotations

import tempfile
import threading
from typing import Any

import pytest
import zmq

from conformance.compare import differences
from conformance.plugin import check
from conformance.suite.capability import require
from conformance.suite.failure import Failure, fail, raise_failure
from conformance.suite.fields import tensor_carrier
from conformance.tensors import torch_or_skip

torch = torch_or_skip()  # where torch is not installed, each use skips the check naming the extra

BIG = 16 * 1024 * 1024  # bytes: large enough for ZeroMQ to send without copying


def _socket(ctx: zmq.Context[Any]) -> zmq.Socket[bytes]:
    """A PAIR socket that never blocks a check for more than 10 s, nor its teardown at all."""
    sock: zmq.Socket[bytes] = ctx.socket(zmq.PAIR)
    for option, value in ((zmq.LINGER, 0), (zmq.RCVTIMEO, 10_000), (zmq.SNDTIMEO, 10_000)):
        sock.setsockopt(option, value)
    return sock


@pytest.fixture
def pair():
    ctx = zmq.Context()
    with tempfile.TemporaryDirectory() as folder:
        a, b = _socket(ctx), _socket(ctx)
        a.bind(f"ipc://{folder}/link")
        b.connect(f"ipc://{folder}/link")
        yield a, b
        a.close()
        b.close()
    ctx.term()


@check("Socket", per=("struct", "transport"), name="ArrivesWhole")
def test_message_over_socket(ipc, struct, transport, pair):
    require(ipc, "socket", "unwrap")  # recv hands on unwrapped values: compared with unwrap's
    sender, receiver = pair
    ipc.adapter.send(sender, ipc.instance(struct, "typical"), transport, zero_copy=False)
    # A receive path unwraps PickleWrappers: compare with the canonical value, unwrapped.
    expected = ipc.adapter.unwrap(ipc.instance(struct, "typical"))
    diffs = differences(expected, ipc.adapter.recv(receiver, transport))
    if diffs:
        raise_failure(Failure(f"{struct} changed over a {transport} socket", "R-TRN-2",
                              f"the implementation's send over a ZeroMQ PAIR socket, then its receive path "
                              f"(decode and unwrap) over {transport}", diffs, value=ipc.instance(struct, "typical")),
                      ipc)


@pytest.fixture
def late_link():
    """A sender connected to an endpoint nobody has bound yet, and `bind()`, which binds the
    receiver. ZeroMQ queues what the sender sends until then: nothing can reach the peer
    before the test lets it, however the two threads are scheduled."""
    ctx = zmq.Context()
    with tempfile.TemporaryDirectory() as folder:
        endpoint = f"ipc://{folder}/link"
        sockets = []

        def bind():
            receiver = _socket(ctx)
            sockets.append(receiver)
            receiver.bind(endpoint)
            return receiver

        sender = _socket(ctx)
        sockets.append(sender)
        sender.setsockopt(zmq.RECONNECT_IVL, 10)  # ms: reach the receiver soon after it binds
        sender.connect(endpoint)
        yield sender, bind
        for sock in sockets:
            sock.close()
    ctx.term()


# How long a send that waits for the peer (correct: it returns once the bytes are out) is
# given before the receiver binds anyway.
_GRACE_S = 0.5


@check("ZeroCopy", per=("transport",), name="BufferReuseSafe")
def test_buffer_reuse_after_zero_copy_send(ipc, transport, late_link):
    """Defect class: buffer-reuse. Mutating a tensor right after a zero-copy send returns must not
    change what the peer receives ("trailing characters" decode errors in vLLM).

    The receiver binds only once the caller has overwritten its tensor (or, for a send that
    blocks until the peer has the bytes, after a grace period), so a send that returns while
    ZeroMQ still reads the caller's memory is caught every time, not only when the I/O
    threads happen to lose the race."""
    require(ipc, "socket", "zero_copy")
    struct, field = tensor_carrier(ipc)
    sender, bind = late_link
    tensor = torch.arange(BIG // 4, dtype=torch.float32)
    value = ipc.instance(struct, "typical")
    setattr(value, field, [tensor])
    reused = threading.Event()
    receiver: list[Any] = []
    def bind_when_reused() -> None:
        reused.wait(_GRACE_S)
        receiver.append(bind())

    binder = threading.Thread(target=bind_when_reused)
    binder.start()
    try:
        ipc.adapter.send(sender, value, transport, zero_copy=True)
        tensor.fill_(-1.0)  # the caller reuses its buffer as soon as send returns
    finally:
        reused.set()
        binder.join()
    got = getattr(ipc.adapter.recv(receiver[0], transport), field)[0]
    if not torch.equal(got, torch.arange(BIG // 4, dtype=torch.float32)):
        fail("the peer received values written after send returned: the buffer was still in flight", "R-TRN-3",
             step=f"the implementation's zero-copy send of a {BIG}-byte tensor at {struct}.{field}[0] over "
                  f"{transport}, the caller overwriting it with -1.0 once send returned, then its receive",
             differences=differences(torch.arange(BIG // 4, dtype=torch.float32), got, f"$.{field}[0]"), ipc=ipc)
