"""Representative IPC payloads, built from the same field values for any implementation.

A payload builder takes an implementation's classes (a mapping or module with the
struct classes by name: ``reference_impl.io_struct``, ``sglang.srt.managers.io_struct``)
and returns one message. Values are deterministic (fixed seeds), so the reference
and upstream objects are equal field for field and their msgpack bytes identical.

Shapes follow what a serving engine sends:
  TokenizedGenerateReqInput   tokenizer -> scheduler, one request with its prompt ids
  BatchTokenIDOutput          scheduler -> detokenizer, one decode step of a batch: a few new
                              ids per request (array('q')), finished reasons, counters
  BatchStrOutput              detokenizer -> tokenizer, the same step as text
  BatchEmbeddingOutput        embeddings as lists of floats
  hidden states               BatchEmbeddingOutput.pooled_hidden_states, one tensor per request
  tensor                      one large tensor in a message (weights, hidden states, KV pages)
"""

from __future__ import annotations

import array
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import msgspec
import torch

KiB, MiB = 1 << 10, 1 << 20
ENGINE_PATH = "engine-path"  # the group of the engine-path samples (engine_samples.py)
TOP_K = 5  # top logprobs per token in the "with logprobs" payloads


@dataclass(frozen=True)
class Payload:
    name: str
    group: str  # request | batch | hidden | tensor | engine | engine-path
    build: Callable[[Any], Any] = field(repr=False, compare=False)
    tensor_bytes: int = 0  # raw tensor bytes carried (tensor payloads)
    impls: tuple[str, ...] = ("reference", "sglang")  # whose classes can carry it

    @property
    def has_tensors(self) -> bool:
        return self.group in ("hidden", "tensor")


def _cls(classes: Any, name: str) -> type:
    return classes[name] if isinstance(classes, Mapping) else getattr(classes, name)


def _make(classes: Any, name: str, **values: Any) -> Any:
    """Instantiate a struct; required fields not given are None (all Optional in practice)."""
    cls = _cls(classes, name)
    for f in msgspec.structs.fields(cls):
        if f.required and f.name not in values:
            values[f.name] = None
    return cls(**values)


# -- requests -------------------------------------------------------------------------
def generate_request(n_ids: int) -> Callable[[Any], Any]:
    def build(classes: Any) -> Any:
        rnd = random.Random(n_ids)
        ids = array.array("q", (rnd.randrange(32000) for _ in range(n_ids)))
        text = "".join(rnd.choice("abcdefghij klmnopqrstuvwxyz") for _ in range(4 * n_ids))
        # stop_strs set explicitly: upstream's SamplingParams derives it from stop on construction.
        params = _make(classes, "SamplingParams", max_new_tokens=200, temperature=0.7, top_p=0.9, top_k=50,
                       stop=["</s>"], stop_strs=["</s>"])
        return _make(classes, "TokenizedGenerateReqInput", rid="9f2c4e6a1b3d4f5e8a7c6b5d4e3f2a1b",
                     http_worker_ipc=None, input_text=text, input_ids=ids, sampling_params=params,
                     return_logprob=False, logprob_start_len=-1, top_logprobs_num=0, stream=True)

    return build


# -- batch outputs --------------------------------------------------------------------
def _step(n: int, logprobs: bool, seed: int) -> dict[str, Any]:
    """One decode step of n requests: 1-4 new token ids each, a quarter finishing."""
    rnd = random.Random(seed * 7919 + n)
    new_ids = [[rnd.randrange(32000) for _ in range(rnd.randint(1, 4))] for _ in range(n)]
    values: dict[str, Any] = dict(
        rids=[f"{rnd.getrandbits(128):032x}" for _ in range(n)],
        http_worker_ipcs=None,
        finished_reasons=[{"type": "length", "length": 200} if i % 4 == 3 else None for i in range(n)],
        prompt_tokens=[rnd.randint(16, 2048) for _ in range(n)],
        completion_tokens=[rnd.randint(1, 200) for _ in range(n)],
        reasoning_tokens=[0] * n,
        cached_tokens=[rnd.randint(0, 16) for _ in range(n)],
        retraction_counts=[0] * n,
        dp_ranks=[0] * n,
    )
    if logprobs:
        values.update(
            output_token_logprobs_val=[[-rnd.random() * 4 for _ in ids] for ids in new_ids],
            output_token_logprobs_idx=[list(ids) for ids in new_ids],
            output_top_logprobs_val=[[[-rnd.random() * 8 for _ in range(TOP_K)] for _ in ids] for ids in new_ids],
            output_top_logprobs_idx=[[[rnd.randrange(32000) for _ in range(TOP_K)] for _ in ids] for ids in new_ids],
        )
    values["_new_ids"] = new_ids
    values["_texts"] = ["".join(rnd.choice("abcdefghij klmnopqrstuvwxyz") for _ in range(3 * len(ids)))
                        for ids in new_ids]
    return values


def batch_token_id_output(n: int, logprobs: bool) -> Callable[[Any], Any]:
    def build(classes: Any) -> Any:
        v = _step(n, logprobs, seed=1)
        new_ids, texts = v.pop("_new_ids"), v.pop("_texts")
        return _make(classes, "BatchTokenIDOutput", decoded_texts=texts,
                     decode_ids=[array.array("q", ids) for ids in new_ids], read_offsets=[len(t) for t in texts],
                     output_ids=None, skip_special_tokens=[True] * n, spaces_between_special_tokens=[True] * n,
                     no_stop_trim=[False] * n, **v)

    return build


def batch_str_output(n: int, logprobs: bool) -> Callable[[Any], Any]:
    def build(classes: Any) -> Any:
        v = _step(n, logprobs, seed=2)
        new_ids, texts = v.pop("_new_ids"), v.pop("_texts")
        return _make(classes, "BatchStrOutput", output_strs=texts,
                     output_ids=[array.array("q", ids) for ids in new_ids], **v)

    return build


def batch_embedding_output(n: int, dim: int) -> Callable[[Any], Any]:
    def build(classes: Any) -> Any:
        rnd = random.Random(n * 31 + dim)
        return _make(classes, "BatchEmbeddingOutput", rids=[f"{rnd.getrandbits(128):032x}" for _ in range(n)],
                     finished_reasons=[{"type": "stop", "matched": None}] * n,
                     embeddings=[[rnd.uniform(-1, 1) for _ in range(dim)] for _ in range(n)],
                     prompt_tokens=[rnd.randint(8, 512) for _ in range(n)], cached_tokens=[0] * n)

    return build


# -- tensors --------------------------------------------------------------------------
def _tensor(nbytes: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    numel = max(1, nbytes // dtype.itemsize)
    gen = torch.Generator().manual_seed(seed)
    cols = 1024 if numel % 1024 == 0 else 1
    return torch.randn(numel // cols, cols, generator=gen, dtype=torch.float32).to(dtype)


def hidden_states(n: int, hidden: int, dtype: torch.dtype) -> Callable[[Any], Any]:
    def build(classes: Any) -> Any:
        gen = torch.Generator().manual_seed(n)
        states = [torch.randn(hidden, generator=gen).to(dtype) for _ in range(n)]
        return _make(classes, "BatchEmbeddingOutput", rids=[f"req-{i:06d}" for i in range(n)],
                     finished_reasons=[None] * n, embeddings=[0.0] * n, prompt_tokens=[64] * n,
                     cached_tokens=[0] * n, pooled_hidden_states=states)

    return build


def tensor_message(nbytes: int, dtype: torch.dtype) -> Callable[[Any], Any]:
    # One tensor per process, shared by every implementation's message (the bytes are the same).
    cache: dict[str, torch.Tensor] = {}

    def build(classes: Any) -> Any:
        if "t" not in cache:
            cache["t"] = _tensor(nbytes, dtype, seed=nbytes)
        return _make(classes, "BatchEmbeddingOutput", rids=["tensor"], finished_reasons=[None], embeddings=[0.0],
                     prompt_tokens=[1], cached_tokens=[0], pooled_hidden_states=[cache["t"]])

    return build


# -- the reference engine's own messages ----------------------------------------------------
def engine_step(struct: str, n: int) -> Callable[[Any], Any]:
    """A message as the reference engine sends it: with the per-request time stats (trace
    context included) that ride in the PickleWrapper field `time_stats`, as in SGLang 0.5.23.
    Reference only: what is inside a PickleWrapper is implementation-private."""

    def build(classes: Any) -> Any:
        from reference_impl.engine.tracing import ReqTimeStats, TimeStatsBatch  # needs the serve extra (OpenTelemetry)

        def stats(rid: str, i: int) -> Any:
            s = ReqTimeStats(rid=rid, trace_carrier={"traceparent": f"00-{i:032x}-{i:016x}-01"})
            s.stamps.update(created=1.7e9 + i, scheduled=1.7e9 + i + 0.001, prefill_done=1.7e9 + i + 0.002)
            return s

        if struct == "TokenizedGenerateReqInput":
            msg = generate_request(n)(classes)
            return msgspec.structs.replace(msg, time_stats=stats(msg.rid, 0))
        msg = (batch_token_id_output if struct == "BatchTokenIDOutput" else batch_str_output)(n, False)(classes)
        return msgspec.structs.replace(msg, time_stats=TimeStatsBatch(stats(rid, i) for i, rid in enumerate(msg.rids)))

    return build


def _size(nbytes: int) -> str:
    return f"{nbytes // MiB} MiB" if nbytes >= MiB else f"{nbytes // KiB} KiB"


_DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}
TENSOR_SIZES = (KiB, MiB, 64 * MiB, 256 * MiB)


def default_payloads(max_tensor_bytes: Optional[int] = None, tiny: bool = False) -> list[Payload]:
    """The payloads of the issue. tiny: a few small ones (smoke tests)."""
    if tiny:
        return [
            Payload("TokenizedGenerateReqInput 128 ids", "request", generate_request(128)),
            Payload("BatchTokenIDOutput x4", "batch", batch_token_id_output(4, False)),
            Payload("BatchStrOutput x4 +logprobs", "batch", batch_str_output(4, True)),
            Payload("tensor float32 1 KiB", "tensor", tensor_message(KiB, torch.float32), KiB),
            Payload("engine BatchTokenIDOutput x4 +time stats", "engine", engine_step("BatchTokenIDOutput", 4),
                    impls=("reference",)),
            *engine_path_payloads(sizes=(1,)),
        ]
    out = [Payload(f"TokenizedGenerateReqInput {n} ids", "request", generate_request(n)) for n in (128, 8192)]
    for struct, builder in (("BatchTokenIDOutput", batch_token_id_output), ("BatchStrOutput", batch_str_output)):
        for n in (1, 64, 1024):
            for logprobs in (False, True):
                out.append(Payload(f"{struct} x{n}{' +logprobs' if logprobs else ''}", "batch", builder(n, logprobs)))
    out.append(Payload("BatchEmbeddingOutput x64 dim 1024", "batch", batch_embedding_output(64, 1024)))
    out.append(Payload("hidden states x64 bfloat16[4096]", "hidden", hidden_states(64, 4096, torch.bfloat16),
                       64 * 4096 * 2))
    out += [Payload("engine TokenizedGenerateReqInput 128 ids +time stats", "engine",
                    engine_step("TokenizedGenerateReqInput", 128), impls=("reference",)),
            Payload("engine BatchTokenIDOutput x256 +time stats", "engine", engine_step("BatchTokenIDOutput", 256),
                    impls=("reference",)),
            Payload("engine BatchStrOutput x256 +time stats", "engine", engine_step("BatchStrOutput", 256),
                    impls=("reference",))]
    out += engine_path_payloads()
    for dtype in (torch.float32, torch.bfloat16):
        for nbytes in TENSOR_SIZES:
            if max_tensor_bytes is None or nbytes <= max_tensor_bytes:
                out.append(Payload(f"tensor {_DTYPE_NAMES[dtype]} {_size(nbytes)}", "tensor",
                                   tensor_message(nbytes, dtype), nbytes))
    return out


def engine_path_payloads(sizes: Optional[tuple[int, ...]] = None) -> list[Payload]:
    """The engine's step messages, timed through its send and receive functions
    (reference_tools/bench/engine_samples.py; BatchTokenIDOutput for SGLang too)."""
    from reference_tools.bench import engine_samples

    return [Payload(name, ENGINE_PATH, build, impls=impls)
            for name, build, impls in engine_samples.samples(sizes or engine_samples.SIZES)]
