"""Tensors where torch may not be installed. The suite, the testee runner and the spec tooling run
without torch (a tensor is then a `WireTensor`: shape, dtype name, device and the bytes the wire
carries, conformance.schema.wire_ext); torch comes with the `reference` extra. A real tensor exists
only where torch was imported, so asking `sys.modules` never imports it. A check that needs torch
objects calls `require_torch()` and is skipped, naming the extra, where torch is missing."""

from __future__ import annotations

import math
import sys
from typing import Any

from conformance.schema.wire_ext import WireTensor, torch_available

__all__ = ["EXTRA_HINT", "WireTensor", "is_tensor", "numel", "require_torch", "tensor", "torch_available",
           "torch_or_skip"]

#: What installs torch with this package.
EXTRA_HINT = "needs torch, which is not installed: pip install 'ipc-conformance[reference]'"


def is_tensor(value: Any) -> bool:
    """A torch tensor (where torch was imported) or a WireTensor."""
    if isinstance(value, WireTensor):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def numel(value: Any) -> int:
    return math.prod(value.shape) if isinstance(value, WireTensor) else int(value.numel())


def require_torch() -> Any:
    """The torch module; where it is not installed the running check is skipped, naming the extra."""
    try:
        import torch
    except ImportError:
        import pytest

        pytest.skip(EXTRA_HINT)
    return torch


def tensor(values: list[float] | float, dtype: str = "float32", shape: tuple[int, ...] | None = None) -> Any:
    """A small tensor of `dtype` (float32, float64, int64, bfloat16 ...): a torch tensor where torch
    is installed, else the WireTensor with the same wire bytes. `values` a list (reshaped to
    `shape`) or one number (0-d)."""
    import numpy as np

    flat = values if isinstance(values, list) else [values]
    dims = shape if shape is not None else ((len(flat),) if isinstance(values, list) else ())
    if torch_available():
        import torch

        return torch.tensor(flat, dtype=getattr(torch, dtype)).reshape(dims)
    if dtype == "bfloat16":  # the top half of each float32
        raw = np.array(flat, dtype="<f4").view("<u4").__rshift__(16).astype("<u2").tobytes()
    else:
        raw = np.array(flat, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
    return WireTensor(dims, dtype, "cpu", raw)


class _TorchOnUse:
    """What a check module names `torch`: the module, imported at its first use inside a check (not
    at collection: importing torch costs about a second). Where torch is not installed, any use
    skips the running check, naming the extra (the module itself imports, and its checks keep their ids)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # introspection (pytest's collection, mock, copy, pickle); checks use public names
            raise AttributeError(name)
        return getattr(require_torch(), name)

    def __repr__(self) -> str:
        return "<torch, imported at first use>"


def torch_or_skip() -> Any:
    """torch, imported at its first use; where it is not installed, any use skips the running check."""
    return _TorchOnUse()
