"""Checkpoint directories (Hugging Face layout) and the built-in tiny model.

    <dir>/config.json            Llama config (model.ModelConfig)
    <dir>/model.safetensors      the weights, Hugging Face parameter names
    <dir>/tokenizer_config.json  declares the byte-level tokenizer

write_tiny_checkpoint() produces the default model from a fixed seed: the same
bytes on every machine, about half a megabyte, no download. Its weights are
random but shaped so greedy output is mostly printable ASCII: residual dimension 0
is a constant that no layer writes to, so the matching lm_head column acts as a
per-token bias favouring letters and spaces.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional, Union

import torch

from .model import LlamaForCausalLM, ModelConfig
from .tokenizer import ByteTokenizer

WEIGHTS_FILE = "model.safetensors"
TINY_MODEL_NAME = "tiny-llama-bytes-v1"
TINY_SEED = 20240611


def tiny_config() -> ModelConfig:
    tok = ByteTokenizer()
    return ModelConfig(
        vocab_size=tok.vocab_size, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False, torch_dtype="float32",
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
    )


def _token_bias(tok: ByteTokenizer) -> torch.Tensor:
    bias = torch.full((tok.vocab_size,), -4.0)
    for b in range(256):
        ch = chr(b)
        if ch.isalpha() and b < 128:
            bias[b] = 2.5
        elif ch == " ":
            bias[b] = 3.0
        elif ch in ".,!?'\n" or ch.isdigit():
            bias[b] = 0.5
    bias[tok.eos_token_id] = -1.0
    return bias


def tiny_state_dict(seed: int = TINY_SEED) -> dict[str, torch.Tensor]:
    """Deterministic weights: torch's CPU generator gives the same numbers everywhere."""
    config = tiny_config()
    gen = torch.Generator().manual_seed(seed)
    h, inter = config.hidden_size, config.intermediate_size

    def normal(*shape: int, std: float) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * std

    state: dict[str, torch.Tensor] = {}
    embed = normal(config.vocab_size, h, std=0.4)
    embed[:, 0] = 3.0  # the constant "bias" dimension
    state["model.embed_tokens.weight"] = embed
    kv = config.num_key_value_heads * config.head_dim
    for i in range(config.num_hidden_layers):
        p = f"model.layers.{i}."
        state[p + "input_layernorm.weight"] = torch.ones(h)
        state[p + "post_attention_layernorm.weight"] = torch.ones(h)
        state[p + "self_attn.q_proj.weight"] = normal(h, h, std=h ** -0.5)
        state[p + "self_attn.k_proj.weight"] = normal(kv, h, std=h ** -0.5)
        state[p + "self_attn.v_proj.weight"] = normal(kv, h, std=h ** -0.5)
        o = normal(h, h, std=h ** -0.5)
        o[0] = 0.0  # no layer writes residual dimension 0
        state[p + "self_attn.o_proj.weight"] = o
        state[p + "mlp.gate_proj.weight"] = normal(inter, h, std=h ** -0.5)
        state[p + "mlp.up_proj.weight"] = normal(inter, h, std=h ** -0.5)
        down = normal(h, inter, std=inter ** -0.5)
        down[0] = 0.0
        state[p + "mlp.down_proj.weight"] = down
    state["model.norm.weight"] = torch.ones(h)
    head = normal(config.vocab_size, h, std=0.3)
    head[:, 0] = _token_bias(ByteTokenizer()) / 5.5  # normalized dim 0 is about 5.5
    state["lm_head.weight"] = head
    return {k: v.contiguous() for k, v in state.items()}


def write_checkpoint(directory: Path, config: ModelConfig, state: dict[str, torch.Tensor]) -> Path:
    import json

    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config.to_hf_dict(), indent=2, sort_keys=True) + "\n")
    save_file(state, str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
    ByteTokenizer().save(directory)
    return directory


def write_tiny_checkpoint(directory: Path, seed: int = TINY_SEED) -> Path:
    return write_checkpoint(directory, tiny_config(), tiny_state_dict(seed))


def cache_root() -> Path:
    explicit = os.environ.get("IPC_ENGINE_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ipc-conformance" / "models"


def ensure_default_checkpoint(root: Optional[Path] = None) -> Path:
    """The tiny checkpoint under the cache directory, written atomically on first use."""
    target = Path(root or cache_root()) / TINY_MODEL_NAME
    if (target / WEIGHTS_FILE).exists() and (target / "config.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        write_tiny_checkpoint(staging)
        try:
            os.replace(staging, target)  # atomic; loses the race harmlessly if another process won
        except OSError:
            if not (target / WEIGHTS_FILE).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def load_state_dict(directory: Union[str, Path], device: str = "cpu") -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    directory = Path(directory)
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{directory}: no *.safetensors weights")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f), device=device))
    return state


def load_model(directory: Union[str, Path], device: str = "cpu") -> LlamaForCausalLM:
    config = ModelConfig.load(directory)
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model = model.to_empty(device=device)
    state = load_state_dict(directory, device=device)
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    missing = set(model.state_dict()) - set(state) - ({"lm_head.weight"} if config.tie_word_embeddings else set())
    unexpected = set(state) - set(model.state_dict())
    if missing or unexpected:
        raise ValueError(f"{directory}: missing weights {sorted(missing)}; unexpected weights {sorted(unexpected)}")
    model.load_state_dict(state, strict=False)
    model = model.to(config.dtype).eval()
    # inv_freq is a non-persistent buffer (meta until now): recompute it, in float32, on the device.
    model.inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, config.head_dim, 2, dtype=torch.float32,
                                                                device=device) / config.head_dim))
    return model


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
