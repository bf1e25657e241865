"""Tensors of every dtype and layout (views, non-contiguous, zero-dim, empty, with gradients, on a
GPU) arrive exactly, and the same on both transports."""

from __future__ import annotations

import pytest
import torch

from conformance.compare import differences
from conformance.plugin import check
from conformance.suite.fields import tensor_carrier


def _tensor_cases():
    def dtype(name, shape=(2, 3)):
        return lambda: torch.arange(6).reshape(shape).to(getattr(torch, name))

    cases = {name: dtype(name) for name in ("float32", "float16", "bfloat16", "int64", "bool")}
    cases |= {name: dtype(name) for name in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, name)}
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


def _send_tensor(ipc, case, transport):
    struct, field = tensor_carrier(ipc)
    value = ipc.instance(struct, "typical")
    setattr(value, field, [TENSOR_CASES[case](), None])
    return value, ipc.adapter.decode(ipc.adapter.encode(value, transport), transport), field


@check("Tensor", per=("case", "transport"), name="Exact", cases={"case": lambda ipc: list(TENSOR_CASES)})
def test_tensor(ipc, case, transport):
    sent, got, field = _send_tensor(ipc, case, transport)
    expected = getattr(sent, field)[0].detach()  # gradients never travel (spec normalization)
    diffs = differences([expected, None], getattr(got, field))
    assert not diffs, f"tensor {case} changed over {transport}:\n  " + "\n  ".join(diffs)


@check("Tensor", per=("case",), name="SameOnBothTransports", cases={"case": lambda ipc: list(TENSOR_CASES)})
def test_tensor_cross_transport(ipc, case):
    if len(ipc.transports) < 2:
        pytest.skip("needs both transports")
    got = [getattr(*_send_tensor(ipc, case, t)[1:]) for t in ("pickle", "msgpack")]
    diffs = differences(*got)
    assert not diffs, f"tensor {case} differs between pickle and msgpack:\n  " + "\n  ".join(diffs)
