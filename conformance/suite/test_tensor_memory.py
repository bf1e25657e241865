"""R-TEN-5: a received tensor owns its memory. Decoded from a writable buffer (what a socket
hands a receiver), the tensor and the buffer must not share bytes in either direction."""

from __future__ import annotations

import torch

from conformance.plugin import check
from conformance.suite.failure import Failure, raise_failure
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
    step = f"the implementation's decode over {transport} of its own encode output, held in a writable buffer"
    if bytes(buffer) != before:
        raise_failure(Failure(f"writing the received tensor changed the receive buffer ({transport})", "R-TEN-5",
                              step, [f"$.{field}[0]: shares its bytes with the receive buffer"], before, value), ipc)
    buffer[:] = bytes(len(buffer))  # ... and the socket layer reuses its buffer
    if not torch.equal(got, torch.full_like(sent, 7.0)):
        raise_failure(Failure(f"reusing the receive buffer changed the received tensor ({transport}): it does not "
                              "own its memory", "R-TEN-5", step,
                              [f"$.{field}[0]: changed when the receive buffer was zeroed"], before, value), ipc)
