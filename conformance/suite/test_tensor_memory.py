"""R-TEN-5: a received tensor owns its memory. Decoded from a writable buffer (what a socket
hands a receiver), the tensor and the buffer must not share bytes in either direction."""

from __future__ import annotations

import torch

from conformance.plugin import check
from conformance.suite.fields import tensor_carrier


@check("TensorMemory", per=("transport",), name="OwnsMemory")
def test_received_tensor_owns_its_memory(ipc, transport):
    struct, field = tensor_carrier(ipc)
    value = ipc.instance(struct, "typical")
    sent = torch.arange(64, dtype=torch.float32)
    setattr(value, field, [sent.clone()])
    buffer = bytearray(ipc.adapter.encode(value, transport))
    got = getattr(ipc.adapter.decode(buffer, transport), field)[0]
    before = bytes(buffer)
    got.fill_(7.0)  # the receiver changes its tensor ...
    assert bytes(buffer) == before, f"writing the received tensor changed the receive buffer ({transport})"
    buffer[:] = bytes(len(buffer))  # ... and the socket layer reuses its buffer
    assert torch.equal(got, torch.full_like(sent, 7.0)), (
        f"reusing the receive buffer changed the received tensor ({transport}): it does not own its memory")
