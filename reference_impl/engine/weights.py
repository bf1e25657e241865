"""The payload of UpdateWeightsFromTensorReqInput.serialized_named_tensors, in this engine.

Upstream puts one MultiprocessingSerializer (pickle) blob per tensor-parallel rank
in the list. Unpickling bytes that arrived over HTTP is a remote-code-execution
sink, so the reference engine takes the safetensors format instead: each entry is
``safetensors.torch.save({name: tensor, ...})`` (``load_format`` None or
"safetensors"); over HTTP JSON it is base64 text (the pydantic bridge decodes it).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import torch

SUPPORTED_LOAD_FORMATS = (None, "safetensors")


def serialize_named_tensors(tensors: Mapping[str, torch.Tensor]) -> bytes:
    from safetensors.torch import save

    return save({name: t.detach().cpu().contiguous() for name, t in tensors.items()})


def load_named_tensors(serialized: Sequence[bytes], load_format: Optional[str], tp_rank: int = 0
                       ) -> dict[str, torch.Tensor]:
    """The tensors for this rank; ValueError naming the problem when the payload is unusable."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    if load_format not in SUPPORTED_LOAD_FORMATS:
        raise ValueError(f"load_format {load_format!r} is not supported; use null or 'safetensors'")
    if not serialized:
        raise ValueError("serialized_named_tensors is empty")
    if tp_rank >= len(serialized):
        raise ValueError(f"serialized_named_tensors has {len(serialized)} entries, none for rank {tp_rank}")
    try:
        tensors = load(bytes(serialized[tp_rank]))
    except (SafetensorError, ValueError, RuntimeError, OSError) as exc:
        raise ValueError(f"serialized_named_tensors[{tp_rank}] is not a safetensors payload: {exc}") from None
    if not tensors:
        raise ValueError(f"serialized_named_tensors[{tp_rank}] holds no tensors")
    return tensors


def check_named_tensors(tensors: Mapping[str, torch.Tensor], shapes: Mapping[str, tuple[int, ...]]) -> None:
    """Every name must be a parameter of the model, with its shape, and a floating dtype."""
    for name, tensor in tensors.items():
        if name not in shapes:
            raise ValueError(f"tensor {name!r} is not a parameter of the model")
        if tuple(tensor.shape) != tuple(shapes[name]):
            raise ValueError(f"tensor {name!r} has shape {list(tensor.shape)}, the parameter has {list(shapes[name])}")
        if not tensor.is_floating_point():
            raise ValueError(f"tensor {name!r} has dtype {tensor.dtype}; weights are floating point")
