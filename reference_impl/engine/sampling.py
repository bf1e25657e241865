"""Choosing the next token, and the logprobs reported for it.

Greedy (temperature 0 or top_k 1) is an argmax: deterministic. Otherwise
penalties and logit_bias, temperature, top_k, top_p and min_p shape the
distribution and a per-request torch.Generator draws from it; with
``sampling_seed`` the draw is reproducible. Reported logprobs are the model's own
distribution (log_softmax of the raw logits), before any sampling transform.
"""

from __future__ import annotations

from typing import Optional, Protocol

import torch

from reference_impl.io_struct import SamplingParams

TOP_K_ALL = 1 << 30  # upstream's "no top-k" value


def is_greedy(params: SamplingParams) -> bool:
    return params.temperature < 1e-6 or params.top_k == 1


def apply_penalties(logits: torch.Tensor, params: SamplingParams, counts: Optional[torch.Tensor]) -> torch.Tensor:
    """Frequency / presence / repetition penalties over the tokens generated so far, and logit_bias."""
    if counts is not None and counts.any():
        if params.frequency_penalty:
            logits = logits - params.frequency_penalty * counts
        if params.presence_penalty:
            logits = logits - params.presence_penalty * (counts > 0)
        if params.repetition_penalty != 1.0:
            seen = counts > 0
            penalized = torch.where(logits > 0, logits / params.repetition_penalty, logits * params.repetition_penalty)
            logits = torch.where(seen, penalized, logits)
    if params.logit_bias:
        logits = logits.clone()
        for token, bias in params.logit_bias.items():
            logits[int(token)] += bias
    return logits


def sample(logits: torch.Tensor, params: SamplingParams, generator: Optional[torch.Generator],
           counts: Optional[torch.Tensor] = None) -> int:
    """One token id from a [vocab] float32 logits row."""
    logits = apply_penalties(logits, params, counts)
    if is_greedy(params):
        return int(torch.argmax(logits))
    logits = logits / params.temperature
    if 0 < params.top_k < logits.numel():
        kth = torch.topk(logits, params.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if params.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        cumulative = torch.cumsum(sorted_probs, dim=-1)
        drop = cumulative - sorted_probs > params.top_p  # keep the smallest prefix reaching top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    if params.min_p > 0.0:
        probs = probs.masked_fill(probs < params.min_p * probs.max(), 0.0)
    probs = probs / probs.sum()
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))


def make_generator(params: SamplingParams, fallback_seed: int) -> torch.Generator:
    seed = params.sampling_seed if params.sampling_seed is not None else fallback_seed
    return torch.Generator().manual_seed(seed & 0xFFFF_FFFF_FFFF_FFFF)


class LogprobView(Protocol):
    """What the scheduler reads of a step's logprobs (Logprobs, or the stub model's rule)."""

    def token(self, row: int, token_id: int) -> float: ...

    def top(self, row: int, k: int) -> tuple[list[float], list[int]]: ...

    def of_ids(self, row: int, ids: list[int]) -> list[float]: ...


class Logprobs:
    """log_softmax of logits rows, with the lookups the logprob fields need (python lists)."""

    def __init__(self, logits: torch.Tensor) -> None:
        self.values = torch.log_softmax(logits.float(), dim=-1).cpu()

    def token(self, row: int, token_id: int) -> float:
        return float(self.values[row, token_id])

    def top(self, row: int, k: int) -> tuple[list[float], list[int]]:
        vals, idx = torch.topk(self.values[row], k)
        return vals.tolist(), idx.tolist()

    def of_ids(self, row: int, ids: list[int]) -> list[float]:
        return self.values[row, ids].tolist()
