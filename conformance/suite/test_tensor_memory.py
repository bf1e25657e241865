"""R-TEN-5: a received tensor, ndarray or array owns its memory. Decoded from a writable buffer
(what a socket hands a receiver), the value and the buffer must not share bytes in either
direction; decoded from bytes (read-only), the value must still be writable."""

from __future__ import annotations

import array
from typing import Any, Callable

import numpy as np
import pytest

from conformance.plugin import check
from conformance.suite.failure import Failure, fail, raise_failure
from conformance.suite.fields import tensor_carrier
from conformance.tensors import torch_or_skip

torch = torch_or_skip()  # where torch is not installed, each use skips the check naming the extra


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


#: field type -> (the value sent, how a receiver writes to it, what it reads after writing)
_KINDS: dict[str, tuple[Callable[[], Any], Callable[[Any], None], Callable[[Any], list[Any]]]] = {
    "ndarray": (lambda: np.arange(64, dtype=np.float32), lambda v: v.fill(7.0), lambda v: v.tolist()),
    "array": (lambda: array.array("q", range(64)), lambda v: v.__setitem__(slice(None), array.array("q", [7] * 64)),
              lambda v: list(v)),
}


def _carrier(ipc: Any, kind: str) -> tuple[str, str, bool]:
    """(message, field, whether the field is a list of them) of the first message with such a field."""
    inner = "NDArray" if kind == "ndarray" else "Array["
    for spec in ipc.manifest.messages:
        for f in spec.fields:
            if inner in f.type:
                return spec.name, f.name, f.type.startswith(("List[", "Optional[List["))
    pytest.skip(f"no message of {ipc.manifest.id} has a field of {kind}s")


def _received(ipc: Any, kind: str, transport: str, buffer: Any) -> Any:
    struct, field, listed = _carrier(ipc, kind)
    got = getattr(ipc.adapter.decode(buffer, transport), field)
    return got[0] if listed else got


@check("TensorMemory", per=("kind", "transport"), name="OwnsMemory", cases={"kind": lambda ipc: list(_KINDS)})
def test_received_ndarray_or_array_owns_its_memory(ipc, kind, transport):
    """Required.TensorMemory.<ndarray|array>.OwnsMemory.<transport> (SPEC R-TEN-5)."""
    make, write, read = _KINDS[kind]
    struct, field, listed = _carrier(ipc, kind)
    value = ipc.instance(struct, "typical")
    setattr(value, field, [make()] if listed else make())
    data = ipc.adapter.encode(value, transport)
    where = f"{struct}.{field}{'[0]' if listed else ''} ({transport})"

    got = _received(ipc, kind, transport, bytes(data))  # read-only bytes, as a socket's frame gives them
    step = f"the implementation's decode of its own encode output over {transport}, from a socket's receive buffer"
    try:
        write(got)
    except (ValueError, TypeError, BufferError) as exc:
        fail(f"the {kind} received at {where} is not writable ({exc}): it is a view of "
             f"the receive buffer, not its own memory (SPEC R-TEN-5)", "R-TEN-5", step=step, data=data, value=value,
             ipc=ipc)

    buffer = bytearray(data)
    got = _received(ipc, kind, transport, buffer)
    before = bytes(buffer)
    write(got)  # the receiver changes its value ...
    if bytes(buffer) != before:
        fail(f"writing the {kind} received at {where} changed the receive buffer (SPEC R-TEN-5)", "R-TEN-5",
             step=step, data=before, value=value, ipc=ipc)
    buffer[:] = bytes(len(buffer))  # ... and the socket layer reuses its buffer
    expected = make()
    write(expected)
    if read(got) != read(expected):
        fail(f"reusing the receive buffer changed the {kind} received at {where}: "
             f"it does not own its memory (SPEC R-TEN-5)", "R-TEN-5", step=step, data=before, value=value, ipc=ipc)
