"""The implementation's own payloads (SPEC R-PW-1; R-PW-1, R-PW-3): the objects it really keeps
at PickleWrapper and Any positions (its time stats with their trace context, customized info, a
handshake sent as a whole wrapped message), from ``Adapter.payload_samples()``, cross the wire
with their state whole. Each sample is set at its position of the canonical message, wrapped by
the sender, encoded, decoded and unwrapped by the trusted receiver; a top-level one is sent
wrapped over a real ZeroMQ socket and read with the implementation's own receive (its top-level
decode must open it). The received object is compared attribute by attribute
(conformance/suite/payloads.py): a field its class's pickling leaves out reads as the default."""

from __future__ import annotations

import pickle
import tempfile
from typing import Any

import pytest
import zmq

from conformance.adapters.base import TOP_LEVEL_WRAPPER
from conformance.plugin import check
from conformance.suite.capability import require
from conformance.suite.failure import fail
from conformance.suite.fields import find_wrappers
from conformance.suite.payloads import state_differences


def _positions(ipc: Any) -> list[str]:
    """The positions the adapter supplies samples for that this catalogue has."""
    names = set(ipc.message_names)
    return [p for p in ipc.adapter.payload_samples() if p == TOP_LEVEL_WRAPPER or p.split(".")[0] in names]


def _in_message(ipc: Any, position: str, sample: Any, transport: str) -> Any:
    """sample at its field of the canonical message, through wrap, encode, decode and unwrap."""
    require(ipc, "unwrap")
    struct, field = position.split(".", 1)
    message = ipc.instance(struct, "typical")
    setattr(message, field, sample)
    adapter = ipc.adapter
    got = adapter.unwrap(adapter.decode(adapter.encode(adapter.wrap(message), transport), transport))
    return getattr(got, field)


def _top_level(ipc: Any, sample: Any, transport: str) -> Any:
    """sample as a whole message, wrapped as SPEC §6 gives it, over a real socket: send, then the
    implementation's own receive (recv), whose top-level decode must open the wrapper."""
    require(ipc, "socket")
    if transport != "msgpack":
        pytest.skip("under pickle nothing is wrapped (SPEC R-PW-1)")
    wrapper = ipc.adapter.classes().get("PickleWrapper")
    if wrapper is None:
        pytest.skip(f"{ipc.adapter.label}'s catalogue has no PickleWrapper")
    ctx = zmq.Context()
    try:
        with tempfile.TemporaryDirectory() as folder:
            sender, receiver = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
            for sock in (sender, receiver):
                for option, value in ((zmq.LINGER, 0), (zmq.RCVTIMEO, 10_000), (zmq.SNDTIMEO, 10_000)):
                    sock.setsockopt(option, value)
            receiver.bind(f"ipc://{folder}/link")
            sender.connect(f"ipc://{folder}/link")
            try:
                ipc.adapter.send(sender, wrapper(pickle.dumps(sample, protocol=pickle.HIGHEST_PROTOCOL)), transport)
                return ipc.adapter.recv(receiver, transport)
            finally:
                sender.close()
                receiver.close()
    finally:
        ctx.term()


@check("Payload", per=("position", "transport"), name="StateKept", cases={"position": _positions})
def test_payload_state_kept(ipc, position, transport):
    """Every sample of the position arrives with every attribute it was sent with."""
    samples = ipc.adapter.payload_samples()[position]
    for index, sample in enumerate(samples):
        what = f"{position} sample {index} ({type(sample).__qualname__})"
        got = (_top_level(ipc, sample, transport) if position == TOP_LEVEL_WRAPPER
               else _in_message(ipc, position, sample, transport))
        step = (f"the implementation's send of a PickleWrapper of the sample, then its receive, over a {transport} "
                "socket" if position == TOP_LEVEL_WRAPPER else
                f"the implementation's wrap of the sample at {position}, its encode, then its receive path "
                f"(unwrap), over {transport}")
        left = find_wrappers(got)
        if left:
            fail(f"{what} arrived still wrapped at {', '.join(left)} ({transport}): the receive path "
                 f"did not open it (SPEC R-PW-3)", "R-PW-3", step=step, value=sample, ipc=ipc)
        diffs = state_differences(ipc.adapter.payload_samples()[position][index], got)
        if diffs:
            fail(f"{what} lost state over {transport} (SPEC R-PW-1)", "R-PW-1", step=step, differences=diffs,
                 value=sample, ipc=ipc)
