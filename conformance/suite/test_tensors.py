"""Tensors of every dtype and layout (views, non-contiguous, zero-dim, empty, with gradients, on a
GPU) arrive exactly, and the same on both transports."""

from __future__ import annotations

import copy

import pytest
import torch

from conformance.compare import differences
from conformance.plugin import check
from conformance.suite.failure import Failure, raise_failure, round_trip_step
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
    sent = {t: _send_tensor(ipc, case, t) for t in ("pickle", "msgpack")}
    field = sent["pickle"][2]
    diffs = differences(*(getattr(sent[t][1], field) for t in ("pickle", "msgpack")), f"$.{field}")
    if diffs:
        value, _, _, data = sent["msgpack"]
        raise_failure(Failure(f"tensor {case} differs between pickle and msgpack", "R-NORM-1, " + REQUIREMENT,
                              "the implementation's encode and decode over each transport, the two results compared "
                              f"(expected: the pickle result; msgpack: {_step(ipc, value, field, data, 'msgpack')})",
                              diffs, value=value), ipc)
