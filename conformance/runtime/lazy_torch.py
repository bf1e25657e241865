"""`torch.Tensor` for a generated catalogue's annotations, without importing torch.

Importing torch costs about a second of CPU. A catalogue module needs only the class its
tensor fields name: msgspec resolves the annotations when a decoder is built, and then checks
each decoded tensor with isinstance. `torch.Tensor` here is a stand-in class whose isinstance
check is torch's own, asked only when a value is checked: a real tensor exists only where torch
was imported (by the ext hook that made it), so nothing here ever imports torch. Type checkers
see the real torch module.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

__all__ = ["torch"]


class _TensorMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(obj, torch.Tensor)

    def __subclasscheck__(cls, sub: Any) -> bool:
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(sub, type) and issubclass(sub, torch.Tensor)


class Tensor(metaclass=_TensorMeta):
    """Stands for torch.Tensor: `isinstance(x, Tensor)` is `isinstance(x, torch.Tensor)`."""

    __slots__ = ()


if TYPE_CHECKING:
    import torch as torch
else:
    torch = types.SimpleNamespace(Tensor=Tensor)
