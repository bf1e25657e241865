"""A small Llama-style decoder in plain torch, with a slot-based KV cache.

    RMSNorm -> rotary self-attention (grouped-query, KV cache) -> RMSNorm -> SwiGLU MLP

Parameter names follow Hugging Face's LlamaForCausalLM (``model.layers.0.self_attn.q_proj.weight``),
so a Llama checkpoint directory loads as is (the engine ships only a byte-level tokenizer).

The KV cache has one row ("slot") per running request plus one scratch slot. One
forward handles prefill and decode alike: it writes K/V at (slot, position) and
every query attends over its slot's whole cache row, masked to positions <= its
own. Shapes therefore never depend on which other requests are in the batch,
which is what makes batched greedy decoding bit-identical to solo decoding.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Optional, Union, cast

import torch
from torch import nn
from torch.nn import functional


@dataclass(frozen=True)
class ModelConfig:
    """The subset of a Hugging Face Llama config.json the model reads."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False
    torch_dtype: str = "float32"
    bos_token_id: Optional[int] = None
    eos_token_id: Optional[int] = None

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        known = {f.name for f in fields(cls)}
        arch = data.get("architectures") or ["LlamaForCausalLM"]
        if data.get("model_type", "llama") != "llama" or "LlamaForCausalLM" not in arch:
            raise ValueError(f"only Llama-style checkpoints are supported, got model_type={data.get('model_type')!r} "
                             f"architectures={arch!r}")
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("num_key_value_heads", data["num_attention_heads"])
        if isinstance(values.get("eos_token_id"), list):
            values["eos_token_id"] = values["eos_token_id"][0]
        return cls(**values)

    @classmethod
    def load(cls, directory: Union[str, Path]) -> "ModelConfig":
        return cls.from_dict(json.loads((Path(directory) / "config.json").read_text()))

    def to_hf_dict(self) -> dict[str, Any]:
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **asdict(self)}

    @property
    def dtype(self) -> torch.dtype:
        dtype: torch.dtype = getattr(torch, self.torch_dtype)
        return dtype


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class KVCache:
    """K and V for every layer: [layers, slots, kv_heads, max_len, head_dim]; the last slot is scratch."""

    def __init__(self, config: ModelConfig, num_slots: int, max_len: int, device: torch.device, dtype: torch.dtype):
        shape = (config.num_hidden_layers, num_slots + 1, config.num_key_value_heads, max_len, config.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.max_len = max_len
        self.scratch_slot = num_slots

    def clear(self) -> None:
        self.k.zero_()
        self.v.zero_()


class Attention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.n_kv = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.q_proj = nn.Linear(config.hidden_size, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.n_kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.n_kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                slots: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim)
        k = self.k_proj(x).view(b, t, self.n_kv, self.head_dim)
        v = self.v_proj(x).view(b, t, self.n_kv, self.head_dim)
        cos, sin = cos[:, :, None, :], sin[:, :, None, :]  # [b, t, 1, d]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # Write this step's K/V at (slot, position): cache[slot, :, pos] <- k[b, t]
        cache_k[slots[:, None], :, positions] = k.to(cache_k.dtype)
        cache_v[slots[:, None], :, positions] = v.to(cache_v.dtype)
        keys = cache_k[slots].to(q.dtype)  # [b, kv, max_len, d]
        values = cache_v[slots].to(q.dtype)
        if self.n_kv != self.n_heads:
            keys = keys.repeat_interleave(self.n_heads // self.n_kv, dim=1)
            values = values.repeat_interleave(self.n_heads // self.n_kv, dim=1)
        scores = q.transpose(1, 2) @ keys.transpose(-1, -2) / math.sqrt(self.head_dim)  # [b, h, t, max_len]
        key_pos = torch.arange(cache_k.shape[2], device=x.device)
        visible = key_pos[None, None, :] <= positions[:, :, None]  # [b, t, max_len]
        scores = scores.masked_fill(~visible[:, None], float("-inf"))
        out = torch.softmax(scores.float(), dim=-1).to(q.dtype) @ values  # [b, h, t, d]
        projected: torch.Tensor = self.o_proj(out.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim))
        return projected


class MLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.down_proj(functional.silu(self.gate_proj(x)) * self.up_proj(x))
        return out


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config)


class LlamaBody(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    inv_freq: torch.Tensor  # a buffer (register_buffer below)

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = LlamaBody(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        exponents = torch.arange(0, config.head_dim, 2, dtype=torch.float32) / config.head_dim
        inv_freq = 1.0 / (config.rope_theta ** exponents)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def _rope(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.float()[..., None] * self.inv_freq  # [b, t, d/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
                cache: KVCache) -> torch.Tensor:
        """input_ids, positions: [b, t]; slots: [b]. Returns the final-norm hidden states [b, t, hidden]."""
        x = self.model.embed_tokens(input_ids)
        cos, sin = self._rope(positions, x.dtype)
        for i, layer in enumerate(cast("list[DecoderLayer]", self.model.layers)):  # ModuleList yields Module
            x = x + layer.self_attn(layer.input_layernorm(x), cos, sin, positions, slots, cache.k[i], cache.v[i])
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        out: torch.Tensor = self.model.norm(x)
        return out

    @torch.no_grad()
    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.lm_head(hidden).float()
        return logits

    def parameter_shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: tuple(p.shape) for name, p in self.named_parameters()}


def parameter_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every parameter, without allocating weights (used to validate updates)."""
    with torch.device("meta"):
        return LlamaForCausalLM(config).parameter_shapes()
