"""Tensors of every dtype and layout (views, non-contiguous, zero-dim, empty, with gradients, on a
GPU) arrive exactly, and the same on both transports; a tensor on a device this machine may not
have (cuda, xpu, npu, mps) keeps its device string or is refused naming it (R-TEN-3)."""

from __future__ import annotations

import copy
import struct
from typing import Any

import msgspec
import pytest

from conformance.compare import differences
from conformance.plugin import check, harness_error
from conformance.suite.failure import (
    DECODE_RUNNER_BYTES,
    Failure,
    error_text,
    fail,
    raise_failure,
    round_trip_step,
)
from conformance.suite.fields import tensor_carrier
from conformance.tensors import torch_or_skip
from conformance.transport import TRANSPORTS

torch = torch_or_skip()  # where torch is not installed, each use skips the check naming the extra


def _tensor_cases():
    def dtype(name, shape=(2, 3)):
        def make():
            if not hasattr(torch, name):  # float8 before torch 2.1, below what the reference extra allows
                pytest.skip(f"this torch has no {name}")
            return torch.arange(6).reshape(shape).to(getattr(torch, name))
        return make

    # Listed without importing torch (collection must not pay for it): the float8 dtypes too.
    names = ("float32", "float16", "bfloat16", "int64", "bool", "float8_e4m3fn", "float8_e5m2")
    cases = {name: dtype(name) for name in names}
    cases |= {
        "zero_dim": lambda: torch.tensor(-0.0, dtype=torch.bfloat16),
        "empty": lambda: torch.zeros((0, 4), dtype=torch.float32),
        "non_contiguous": lambda: torch.arange(12.0).reshape(3, 4).t(),
        # Contiguous by torch's rule (a size-1 dimension's stride does not count), yet the last
        # stride is 2: a byte view of 2-byte elements refuses it.
        "size1_last_dim_strided": lambda: torch.arange(2.0).reshape(1, 2).to(torch.bfloat16).t(),
        "sliced_view": lambda: torch.arange(20.0)[5:11].reshape(2, 3),
        "requires_grad": lambda: torch.ones(3, requires_grad=True) * 2,
        "cuda": lambda: torch.arange(6.0, device="cuda") if torch.cuda.is_available() else pytest.skip("no GPU"),
    }
    return cases


TENSOR_CASES = _tensor_cases()


REQUIREMENT = "R-TEN-1 … R-TEN-5"


def _send_tensor(ipc, case, transport):
    struct, field = tensor_carrier(ipc)
    value = ipc.instance(struct, "typical")
    setattr(value, field, [TENSOR_CASES[case](), None])
    data = ipc.adapter.encode(value, transport)
    return value, ipc.adapter.decode(data, transport), field, data


def _step(ipc, sent, field, data, transport):
    """round_trip_step, with the tensor's gradient flag as the spec carries it (dropped)."""
    expected = copy.copy(sent)
    setattr(expected, field, [t.detach() if isinstance(t, torch.Tensor) else t for t in getattr(sent, field)])
    return round_trip_step(ipc, expected, data, transport)


@check("Tensor", per=("case", "transport"), name="Exact", cases={"case": lambda ipc: list(TENSOR_CASES)})
def test_tensor(ipc, case, transport):
    sent, got, field, data = _send_tensor(ipc, case, transport)
    expected = getattr(sent, field)[0].detach()  # gradients never travel (spec normalization)
    diffs = differences([expected, None], getattr(got, field), f"$.{field}")
    if diffs:
        raise_failure(Failure(f"tensor {case} changed over {transport}", REQUIREMENT,
                              _step(ipc, sent, field, data, transport), diffs, data, sent), ipc)


@check("Tensor", per=("case",), name="SameOnBothTransports", cases={"case": lambda ipc: list(TENSOR_CASES)})
def test_tensor_cross_transport(ipc, case):
    if len(ipc.transports) < 2:
        pytest.skip("needs both transports")
    sent = {t: _send_tensor(ipc, case, t) for t in TRANSPORTS}
    field = sent["pickle"][2]
    diffs = differences(getattr(sent["pickle"][1], field), getattr(sent["msgpack"][1], field), f"$.{field}")
    if diffs:
        value, _, _, data = sent["msgpack"]
        raise_failure(Failure(f"tensor {case} differs between pickle and msgpack", "R-NORM-1, " + REQUIREMENT,
                              "the implementation's encode and decode over each transport, the two results compared "
                              f"(expected: the pickle result; msgpack: {_step(ipc, value, field, data, 'msgpack')})",
                              diffs, value=value), ipc)


# -- device strings without a GPU (R-TEN-3) --------------------------------------------------------
#: check subject -> the device string a tensor's metadata names
DEVICES = {"cuda_0": "cuda:0", "cuda_1": "cuda:1", "cuda_127": "cuda:127", "xpu_1": "xpu:1", "npu_0": "npu:0",
           "mps_0": "mps:0"}
_DATA = struct.pack("<2f", 1.5, -2.0)


def _device_present(device: str) -> bool:
    """Whether this machine (the runner's, which is the implementation's) has the device, as torch sees it."""
    kind, _, index = device.partition(":")
    if kind == "mps":
        return bool(torch.backends.mps.is_available()) and index == "0"
    backend: Any = getattr(torch, kind, None)
    try:
        return bool(backend.is_available()) and int(index) < backend.device_count()
    except Exception:  # noqa: BLE001 - no such backend in this torch build, or it cannot be queried: not here
        return False


def _with_device(ipc, device: str) -> tuple[str, str, int, bytes]:
    """(message, field, its array position, bytes): the typical vector of the tensor carrier with
    the field holding one float32 tensor [1.5, -2.0] whose metadata names `device`."""
    from conformance.schema.wire_form import read_value, write_value
    from conformance.suite.vectors import golden_vector

    struct_name, field = tensor_carrier(ipc)
    position = [f.name for f in ipc.manifest.structs[struct_name].fields].index(field) + 1
    tree = read_value(golden_vector(ipc, struct_name, "typical"))
    meta = msgspec.msgpack.encode([[2], "float32", device])
    tree[position] = [msgspec.msgpack.Ext(2, struct.pack(">I", len(meta)) + meta + _DATA)]
    return struct_name, field, position, write_value(tree)


def _carried(payload: bytes, position: int) -> tuple[Any, str]:
    """(metadata, raw) of the first tensor at `position` of a message's untyped msgpack."""
    tree = msgspec.msgpack.decode(payload, ext_hook=lambda code, raw: msgspec.msgpack.Ext(code, bytes(raw)))
    ext = tree[position][0]
    (size,) = struct.unpack_from(">I", ext.data)
    return msgspec.msgpack.decode(ext.data[4:4 + size]), ext.data[4 + size:]


@check("Tensor", per=("device",), name="DeviceKept", cases={"device": lambda ipc: list(DEVICES)})
def test_tensor_device_kept(ipc, device):
    """A tensor on a device the runner may not have: an implementation that holds tensors as values
    MUST accept it and send the same device string on; one with a device runtime restores it there
    or, when this machine has no such device, refuses naming it. Neither may put it on the CPU."""
    from conformance.testee.adapter import SubprocessAdapter, TesteeError

    name = DEVICES[device]
    struct_name, field, position, data = _with_device(ipc, name)
    where = f"{struct_name}.{field}[0] (msgpack)"
    testee = isinstance(ipc.adapter, SubprocessAdapter)
    kind = ipc.adapter.tensor_kind if testee else getattr(ipc.adapter, "tensor_kind", "runtime")
    present = _device_present(name)
    step = ("the testee's decode (and re-encode) of bytes the runner wrote" if testee else DECODE_RUNNER_BYTES)

    def failed(what: str, kind: str = "AssertionError") -> None:
        fail(what, "R-TEN-3", step=step, data=data, ipc=ipc, kind=kind)

    try:
        answer = ipc.adapter.decoded_payload(data, "msgpack") if testee else ipc.adapter.decode(data, "msgpack")
    except Exception as exc:
        if harness_error(exc) or (testee and not isinstance(exc, TesteeError)):
            raise
        if kind == "values":
            failed(f"{where}: a tensor on {name!r} was refused, yet the testee holds tensors as values "
                   f"(handshake 'tensors': 'values'): SPEC R-TEN-3, it MUST accept every <type>:<index> device "
                   f"and carry the string unchanged: {exc}", "Failed")
        if present:
            failed(f"{where}: a tensor on {name!r} was refused, and this machine has that device "
                   f"(SPEC R-TEN-3: restore it there): {exc}", "Failed")
        # naming it: the device, or at least its type (torch's own "Torch not compiled with CUDA enabled")
        if not (name in str(exc) or name.partition(":")[0].lower() in str(exc).lower()):
            failed(f"{where}: a tensor on {name!r}, a device this machine lacks, was refused without naming the "
                   f"device (SPEC R-TEN-3): {error_text(exc)}")
        return
    got_meta: Any = None
    raw: Any = None
    if testee:
        try:
            got_meta, raw = _carried(answer, position)
            got_device = got_meta[2]
        except Exception as exc:  # noqa: BLE001 - whatever is wrong with the answer, the check says what
            failed(f"{where}: the testee's re-encode holds no tensor at {field}[0] the runner can read: "
                   f"{type(exc).__name__}: {exc}", "Failed")
    else:
        got_device = str(getattr(answer, field)[0].device)
    if got_device != name:
        failed(f"{where}: a tensor on {name!r} arrived on {got_device!r} (SPEC R-TEN-3: restore it on that device, "
               f"or refuse it naming the device when it does not exist; never silently move it)")
    if testee:
        if not (got_meta[:2] == [[2], "float32"] and raw == _DATA):
            failed(f"{where}: the tensor on {name!r} came back as {got_meta!r} with data {raw.hex()}, "
                   f"not [[2], 'float32', {name!r}] with {_DATA.hex()}")
    elif kind == "runtime" and not present:
        failed(f"{where}: a tensor on {name!r} decoded, yet this machine has no such device "
               "(SPEC R-TEN-3: a device runtime refuses a device it does not have)", "Failed")
