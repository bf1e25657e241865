"""The scheduler: one process per data-parallel rank, owning a model replica and its KV cache.

    controller --TokenizedGenerateReqInput / TokenizedEmbeddingReqInput (or their Batch* forms) /
                 AbortReq / FlushCacheReqInput / UpdateWeightsFromTensorReqInput--> scheduler
    scheduler --BatchTokenIDOutput / BatchEmbeddingOutput--> detokenizer
    scheduler --FlushCacheReqOutput / UpdateWeightsFromTensorReqOutput / AbortReq (errors)--> tokenizer manager

Continuous batching: each loop iteration drains the socket, then either prefills
newly admitted requests (one forward each; they join the running batch) or runs
one decode step for the whole running batch. The decode batch always has
``max_running_requests`` rows (idle rows use a scratch KV slot), so a request's
numbers never depend on what else is running. Outputs go out after every step:
streaming requests every ``stream_interval`` tokens, the others when finished.
"""

from __future__ import annotations

import logging
import os
import random
import uuid
from array import array
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Optional, Union

import torch
import zmq

from reference_impl.io_struct import (
    AbortReq,
    BatchEmbeddingOutput,
    BatchTokenIDOutput,
    BatchTokenizedEmbeddingReqInput,
    BatchTokenizedGenerateReqInput,
    CloseSessionReqInput,
    ContinueGenerationReqInput,
    FlushCacheReqInput,
    FlushCacheReqOutput,
    OpenSessionReqInput,
    OpenSessionReqOutput,
    PauseGenerationReqInput,
    SamplingParams,
    TokenizedEmbeddingReqInput,
    TokenizedGenerateReqInput,
    UpdateWeightsFromTensorReqInput,
    UpdateWeightsFromTensorReqOutput,
)

from . import weights
from .checkpoint import load_model
from .config import DETOKENIZER, TOKENIZER_MANAGER, EngineConfig, IpcNames, scheduler_name
from .ipc import Receiver, Sender, choose_unwrap
from .model import KVCache, LlamaForCausalLM, ModelConfig
from .runtime import run_child
from .sampling import Logprobs, LogprobView, make_generator, sample
from .stub_model import StubModel, StubStep, is_stub
from .tap import Tap
from .tokenizer import ByteTokenizer
from .tracing import ReqTimeStats, TimeStatsBatch, Tracing

logger = logging.getLogger(__name__)

IDLE_POLL_MS = 50


@dataclass
class Req:
    """A generation request inside the scheduler."""

    rid: str
    input_ids: list[int]
    params: SamplingParams
    stream: bool
    return_logprob: bool
    logprob_start_len: int
    top_logprobs_num: int
    token_ids_logprob: Optional[list[int]]
    return_hidden_states: Union[bool, str]
    time_stats: Optional[ReqTimeStats]
    span: Any = None
    slot: Optional[int] = None
    output_ids: list[int] = field(default_factory=list)
    finished_reason: Optional[dict[str, Any]] = None
    generator: Optional[torch.Generator] = None
    counts: Optional[torch.Tensor] = None
    # What the next output message carries (cleared when sent).
    sent_len: int = 0
    steps_since_sent: int = 0
    input_logprobs_sent: bool = False
    input_token_logprobs: tuple[list[Any], list[Any]] = field(default_factory=lambda: ([], []))
    input_top_logprobs: tuple[list[Any], list[Any]] = field(default_factory=lambda: ([], []))
    input_ids_logprobs: tuple[list[Any], list[Any]] = field(default_factory=lambda: ([], []))
    output_token_logprobs: tuple[list[Any], list[Any]] = field(default_factory=lambda: ([], []))
    output_top_logprobs: tuple[list[Any], list[Any]] = field(default_factory=lambda: ([], []))
    output_ids_logprobs: tuple[list[Any], list[Any]] = field(default_factory=lambda: ([], []))
    hidden_states: list[Any] = field(default_factory=list)
    customized_info: dict[str, list[Any]] = field(default_factory=dict)  # key -> one value per token

    @property
    def seq_len(self) -> int:
        return len(self.input_ids) + len(self.output_ids)

    @property
    def finished(self) -> bool:
        return self.finished_reason is not None


class Scheduler:
    def __init__(self, config: EngineConfig, ipc: IpcNames, dp_rank: int) -> None:
        self.config, self.dp_rank = config, dp_rank
        self.name = scheduler_name(dp_rank)
        assert config.model_path is not None and config.transport is not None, "EngineConfig.resolved() sets them"
        self.transport = config.transport
        self.device = torch.device(config.scheduler_device(dp_rank))
        self.skip_forward = config.skip_forward
        self.model: Optional[LlamaForCausalLM]
        # --model stub: a deterministic rule instead of the forward pass (stub_model.py)
        self.stub = StubModel.load(config.model_path, config.tap_dir, self.name) if is_stub(config.model_path) \
            else None
        if self.skip_forward or self.stub is not None:  # no weights, no KV cache
            self.model, self.model_config = None, ModelConfig.load(config.model_path)
        else:
            self.model = load_model(config.model_path, device=str(self.device))
            self.model_config = self.model.config
        self.tokenizer = ByteTokenizer.from_pretrained(config.model_path)
        self.context_length = config.context_length or self.model_config.max_position_embeddings
        self.max_running = config.max_running_requests
        self.cache = None if self.model is None else KVCache(
            self.model_config, self.max_running, self.context_length, self.device, self.model_config.dtype)
        self.free_slots = list(range(self.max_running))
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.done: list[Req] = []  # finished outside a step (aborts): emitted with the next outputs
        self.rng = random.Random(os.getpid())
        self.sessions: dict[str, int] = {}  # open session id -> its capacity_of_str_len
        self.paused = False  # PauseGenerationReqInput: no step runs until ContinueGenerationReqInput

        self.ctx = zmq.Context()
        self.tap = Tap(config.tap_dir, self.name)
        self.tracing = Tracing(self.name, config.trace_dir)
        self.receiver = scheduler_receiver(self.ctx, config, ipc, dp_rank, self.tap)
        self.to_detokenizer = Sender(self.ctx, ipc.detokenizer, self.transport, self.tap, DETOKENIZER)
        self.to_tokenizer = Sender(self.ctx, ipc.tokenizer_manager, self.transport, self.tap, TOKENIZER_MANAGER)
        logger.info("%s: model %s on %s, context %d, batch %d", self.name, config.model_path, self.device,
                    self.context_length, self.max_running)

    # -- loop -----------------------------------------------------------------------
    def event_loop(self) -> None:
        while True:
            self.recv_requests()
            if self.paused:  # no step; requests a pause aborted still go out below
                pass
            elif self.waiting and self.free_slots:
                self.run_prefill()
            elif self.running:
                try:
                    self.run_decode()
                except Exception as exc:  # fail the batch, keep serving
                    logger.exception("%s: decode step failed", self.name)
                    for req in list(self.running):
                        self.report_error(req.rid, f"decode failed: {type(exc).__name__}: {exc}")
            self.send_outputs()

    def recv_requests(self) -> None:
        timeout = 0 if (self.waiting or self.running) and not self.paused else IDLE_POLL_MS
        while True:
            try:
                obj = self.receiver.recv(timeout_ms=timeout)
            except Exception:
                logger.exception("%s: undecodable message dropped", self.name)
                continue
            if obj is None:
                return
            timeout = 0
            try:
                self.handle(obj)
            except Exception as exc:
                logger.exception("%s: failed to handle %s", self.name, type(obj).__name__)
                self.report_error(getattr(obj, "rid", None), f"{type(exc).__name__}: {exc}")

    def handle(self, obj: Any) -> None:
        if isinstance(obj, TokenizedGenerateReqInput):
            self.add_request(obj)
        elif isinstance(obj, TokenizedEmbeddingReqInput):
            self.run_embedding(obj)
        elif isinstance(obj, BatchTokenizedGenerateReqInput):
            self._each(obj.batch, self.add_request)
        elif isinstance(obj, BatchTokenizedEmbeddingReqInput):
            self._each(obj.batch, self.run_embedding)
        elif isinstance(obj, AbortReq):
            self.abort(obj)
        elif isinstance(obj, FlushCacheReqInput):
            self.to_tokenizer.send(self.flush_cache(obj))
        elif isinstance(obj, UpdateWeightsFromTensorReqInput):
            self.to_tokenizer.send(self.update_weights(obj))
        elif isinstance(obj, OpenSessionReqInput):
            self.to_tokenizer.send(self.open_session(obj))
        elif isinstance(obj, CloseSessionReqInput):
            self.sessions.pop(obj.session_id, None)
        elif isinstance(obj, PauseGenerationReqInput):
            self.pause(obj)
        elif isinstance(obj, ContinueGenerationReqInput):
            self.paused = False
        else:
            raise TypeError(f"{self.name} does not handle {type(obj).__name__}")

    def _each(self, batch: list[Any], run: Any) -> None:
        """A batch form: each request on its own, so one bad request fails only itself."""
        for req in batch:
            try:
                run(req)
            except Exception as exc:
                logger.exception("%s: failed to handle %s of a batch", self.name, type(req).__name__)
                self.report_error(req.rid, f"{type(exc).__name__}: {exc}")

    def report_error(self, rid: Optional[str], message: str, status_code: int = 500) -> None:
        """An error for one request goes straight to the tokenizer manager (as upstream: an AbortReq)."""
        if rid is None:
            return
        for queue in (self.waiting, self.running):
            for req in [r for r in queue if r.rid == rid]:
                queue.remove(req)
                self._release(req)
        self.to_tokenizer.send(AbortReq(rid=rid, finished_reason={
            "type": "abort", "message": f"{self.name}: {message}", "status_code": status_code}))

    # -- requests -------------------------------------------------------------------
    def add_request(self, obj: TokenizedGenerateReqInput) -> None:
        ids = list(obj.input_ids or [])
        if not ids:
            raise ValueError("empty input_ids")
        if len(ids) >= self.context_length:
            raise ValueError(f"prompt of {len(ids)} tokens does not fit the context of {self.context_length}")
        if self.skip_forward and (obj.return_logprob or obj.return_hidden_states):
            raise ValueError("--skip-forward computes no logits: logprobs and hidden states are not available")
        # time_stats is typed PickleWrapper; the receive path unwrapped it into our ReqTimeStats.
        stats: Optional[ReqTimeStats] = obj.time_stats  # type: ignore[assignment]
        if stats is not None:
            stats.mark("scheduler_recv")
        # rid: None only when a peer left it unset; it then travels on as None, as it always did.
        req = Req(rid=obj.rid, input_ids=ids, params=obj.sampling_params, stream=obj.stream,  # type: ignore[arg-type]
                  return_logprob=obj.return_logprob, logprob_start_len=obj.logprob_start_len,
                  top_logprobs_num=obj.top_logprobs_num, token_ids_logprob=obj.token_ids_logprob,
                  return_hidden_states=obj.return_hidden_states, time_stats=stats)
        req.span = self.tracing.start_span("scheduler.request", stats.trace_carrier if stats else None,
                                           rid=req.rid, dp_rank=self.dp_rank, prompt_tokens=len(ids))
        req.generator = make_generator(req.params, self.rng.getrandbits(63))
        self.waiting.append(req)

    def abort(self, obj: AbortReq) -> None:
        message = obj.abort_message or "aborted by request"
        for queue in (self.waiting, self.running):
            for req in list(queue):
                if obj.abort_all or req.rid == obj.rid:
                    if queue is self.waiting:
                        self.waiting.remove(req)
                        self.done.append(req)
                    req.finished_reason = {"type": "abort", "message": message}

    def _release(self, req: Req) -> None:
        if req.slot is not None:
            self.free_slots.append(req.slot)
            self.free_slots.sort()
            req.slot = None
        if req.span is not None:
            req.span.set_attribute("completion_tokens", len(req.output_ids))
            req.span.set_attribute("finish_reason", str((req.finished_reason or {}).get("type")))
            req.span.end()
            if req.time_stats is not None:
                req.time_stats.trace_carrier = Tracing.carrier(req.span)
            req.span = None

    # -- forward passes -------------------------------------------------------------
    def run_prefill(self) -> None:
        while self.waiting and self.free_slots:
            req = self.waiting.pop(0)
            req.slot = self.free_slots.pop(0)
            try:
                self._prefill(req)
            except Exception as exc:  # fail this request, keep serving
                logger.exception("%s: prefill of %s failed", self.name, req.rid)
                self._release(req)
                self.report_error(req.rid, f"prefill failed: {type(exc).__name__}: {exc}")
                continue
            self.running.append(req)

    def _prefill(self, req: Req) -> None:
        if self.skip_forward:
            if req.time_stats is not None:
                req.time_stats.mark("prefill_done")
            self._take_token(req, skipped_forward_token(req))
            return
        if self.stub is not None:
            inputs, first = self.stub.prefill(req.rid, req.input_ids, req.return_hidden_states)
            if req.return_logprob:
                self._input_logprobs(req, inputs)
            if req.time_stats is not None:
                req.time_stats.mark("prefill_done")
            self._take_stub(req, first)
            return
        assert self.model is not None and self.cache is not None  # set unless skip_forward
        ids = torch.tensor([req.input_ids], device=self.device)
        positions = torch.arange(len(req.input_ids), device=self.device)[None]
        hidden = self.model(ids, positions, torch.tensor([req.slot], device=self.device), self.cache)[0]
        logits = self.model.logits(hidden)  # [prompt, vocab]
        if req.return_logprob:
            self._input_logprobs(req, Logprobs(logits))
        if req.return_hidden_states:
            rows = hidden if req.return_hidden_states is True else hidden[-1:]
            req.hidden_states.extend(rows.float().cpu().tolist())
        if req.time_stats is not None:
            req.time_stats.mark("prefill_done")
        if req.span is not None:
            req.span.add_event("prefill")
        self._append_token(req, logits[-1], Logprobs(logits[-1:]) if req.return_logprob else None)

    def run_decode(self) -> None:
        active = [r for r in self.running if not r.finished]
        if not active:
            return
        if self.skip_forward:
            for req in active:
                self._take_token(req, skipped_forward_token(req))
            return
        if self.stub is not None:
            for req in active:
                self._take_stub(req, self.stub.step(req.rid, req.input_ids, len(req.output_ids),
                                                    bool(req.return_hidden_states)))
            return
        assert self.model is not None and self.cache is not None  # set unless skip_forward
        b = self.max_running
        ids = torch.full((b, 1), self.tokenizer.pad_token_id, dtype=torch.long)
        positions = torch.zeros((b, 1), dtype=torch.long)
        slots = torch.full((b,), self.cache.scratch_slot, dtype=torch.long)
        for row, req in enumerate(active):
            ids[row, 0] = req.output_ids[-1]
            positions[row, 0] = req.seq_len - 1
            assert req.slot is not None  # a running request holds a slot
            slots[row] = req.slot
        hidden = self.model(ids.to(self.device), positions.to(self.device), slots.to(self.device), self.cache)[:, 0]
        logits = self.model.logits(hidden)  # [batch, vocab], fixed shape
        lp = Logprobs(logits) if any(r.return_logprob for r in active) else None
        for row, req in enumerate(active):
            if req.return_hidden_states:
                req.hidden_states.append(hidden[row].float().cpu().tolist())
            self._append_token(req, logits[row], lp, row)

    def _append_token(self, req: Req, logits: torch.Tensor, lp: Optional[Logprobs], row: int = 0) -> None:
        if req.counts is None and (req.params.frequency_penalty or req.params.presence_penalty
                                   or req.params.repetition_penalty != 1.0):
            req.counts = torch.zeros(logits.numel(), device=logits.device)
        token = sample(logits, req.params, req.generator, req.counts)
        if req.counts is not None:
            req.counts[token] += 1
        self._take_token(req, token, lp, row)

    def _take_stub(self, req: Req, made: StubStep) -> None:
        """The stub's token, with the hidden rows and customized info it reported for it."""
        req.hidden_states.extend(made.hidden)
        for key, value in made.customized.items():
            req.customized_info.setdefault(key, []).append(value)
        self._take_token(req, made.token, made.logprobs)

    def _take_token(self, req: Req, token: int, lp: Optional[LogprobView] = None, row: int = 0) -> None:
        """The bookkeeping of one new token (sampled, or the skip-forward rule's)."""
        req.output_ids.append(token)
        req.steps_since_sent += 1
        if lp is not None and req.return_logprob:
            req.output_token_logprobs[0].append(lp.token(row, token))
            req.output_token_logprobs[1].append(token)
            if req.top_logprobs_num > 0:
                vals, idx = lp.top(row, req.top_logprobs_num)
                req.output_top_logprobs[0].append(vals)
                req.output_top_logprobs[1].append(idx)
            if req.token_ids_logprob is not None:
                req.output_ids_logprobs[0].append(lp.of_ids(row, req.token_ids_logprob))
                req.output_ids_logprobs[1].append(list(req.token_ids_logprob))
        if len(req.output_ids) == 1 and req.time_stats is not None:
            req.time_stats.mark("first_token")
        self._check_finished(req)

    def _input_logprobs(self, req: Req, lp: LogprobView) -> None:
        """Prompt positions from logprob_start_len (-1: none). Position 0 has no logprob: None."""
        start = len(req.input_ids) if req.logprob_start_len < 0 else min(req.logprob_start_len, len(req.input_ids))
        for pos in range(start, len(req.input_ids)):
            token = req.input_ids[pos]
            first = pos == 0
            req.input_token_logprobs[0].append(None if first else lp.token(pos - 1, token))
            req.input_token_logprobs[1].append(token)
            if req.top_logprobs_num > 0:
                vals, idx = (None, None) if first else lp.top(pos - 1, req.top_logprobs_num)
                req.input_top_logprobs[0].append(vals)
                req.input_top_logprobs[1].append(idx)
            if req.token_ids_logprob is not None:
                ids = list(req.token_ids_logprob)
                req.input_ids_logprobs[0].append(None if first else lp.of_ids(pos - 1, ids))
                req.input_ids_logprobs[1].append(None if first else ids)

    def _check_finished(self, req: Req) -> None:
        p = req.params
        token = req.output_ids[-1]
        n = len(req.output_ids)
        if n >= p.min_new_tokens:
            if not p.ignore_eos and token == self.tokenizer.eos_token_id:
                req.finished_reason = {"type": "stop", "matched": token}
                return
            if p.stop_token_ids and token in p.stop_token_ids:
                req.finished_reason = {"type": "stop", "matched": token}
                return
            stops = p.stop_strs or p.stop
            if stops:
                stops = [stops] if isinstance(stops, str) else stops
                window = max(len(s.encode()) for s in stops) + 4
                tail = self.tokenizer.decode(req.output_ids[-window:])
                for s in stops:
                    if s and s in tail:
                        req.finished_reason = {"type": "stop", "matched": s}
                        return
        if p.max_new_tokens is not None and n >= p.max_new_tokens:
            req.finished_reason = {"type": "length", "length": n}
        elif len(req.input_ids) + n >= self.context_length:  # seq_len, without the property call per token
            req.finished_reason = {"type": "length", "length": n}

    # -- outputs --------------------------------------------------------------------
    def send_outputs(self) -> None:
        ready = list(self.done)
        self.done.clear()
        for req in self.running:
            new = len(req.output_ids) > req.sent_len
            if req.finished or (req.stream and new and req.steps_since_sent >= self.config.stream_interval):
                ready.append(req)
        if not ready:
            return
        for req in ready:
            if req.finished:
                if req in self.running:
                    self.running.remove(req)
                if req.time_stats is not None:
                    req.time_stats.mark("scheduler_finished")
                self._release(req)
        self.to_detokenizer.send(self._batch_output(ready))

    @staticmethod
    def _take_logprobs(req: Req, fields: dict[str, list[Any]]) -> None:
        """Append req's logprobs since the last output to the batch's fields, and clear them."""
        lp, top, ids = req.return_logprob, req.return_logprob and req.top_logprobs_num > 0, \
            req.return_logprob and req.token_ids_logprob is not None
        for prefix, pairs, wanted in (("input_token_logprobs", req.input_token_logprobs, lp),
                                      ("output_token_logprobs", req.output_token_logprobs, lp),
                                      ("input_top_logprobs", req.input_top_logprobs, top),
                                      ("output_top_logprobs", req.output_top_logprobs, top),
                                      ("input_token_ids_logprobs", req.input_ids_logprobs, ids),
                                      ("output_token_ids_logprobs", req.output_ids_logprobs, ids)):
            fields[prefix + "_val"].append(list(pairs[0]) if wanted else None)
            fields[prefix + "_idx"].append(list(pairs[1]) if wanted else None)
            pairs[0].clear()
            pairs[1].clear()

    def _batch_output(self, reqs: list[Req]) -> BatchTokenIDOutput:
        any_logprob = any(r.return_logprob for r in reqs)
        any_hidden = any(r.return_hidden_states for r in reqs)

        fields: dict[str, list[Any]] = {k: [] for k in (
            "input_token_logprobs_val", "input_token_logprobs_idx", "output_token_logprobs_val",
            "output_token_logprobs_idx", "input_top_logprobs_val", "input_top_logprobs_idx",
            "output_top_logprobs_val", "output_top_logprobs_idx", "input_token_ids_logprobs_val",
            "input_token_ids_logprobs_idx", "output_token_ids_logprobs_val", "output_token_ids_logprobs_idx")}
        hidden: list[Any] = []
        keys = sorted({key for req in reqs for key in req.customized_info})
        customized: dict[str, list[Any]] = {key: [] for key in keys}  # key -> per request, since the last output
        deltas: list[array[int]] = []
        stats: list[Optional[ReqTimeStats]] = []
        for req in reqs:
            delta = array("q", req.output_ids[req.sent_len:])
            deltas.append(delta)
            req.sent_len = len(req.output_ids)
            req.steps_since_sent = 0
            # Per request and step: the logprob fields only when one request of the batch wants
            # them (a request without logprobs never collects any, so it has nothing to clear).
            if any_logprob:
                self._take_logprobs(req, fields)
            if any_hidden:
                hidden.append(list(req.hidden_states) if req.return_hidden_states else None)
                req.hidden_states.clear()
            for key in keys:
                customized[key].append(req.customized_info.pop(key, None))
            if req.time_stats is not None:
                snapshot = req.time_stats.copy()
                if req.span is not None:  # still running: downstream continues from this span
                    snapshot.trace_carrier = Tracing.carrier(req.span)
                stats.append(snapshot)
            else:
                stats.append(None)
        n = len(reqs)
        return BatchTokenIDOutput(
            rids=[r.rid for r in reqs],
            http_worker_ipcs=None,
            finished_reasons=[r.finished_reason for r in reqs],
            decoded_texts=[""] * n,
            decode_ids=deltas,
            read_offsets=[0] * n,
            output_ids=[array("q", d) for d in deltas],
            skip_special_tokens=[r.params.skip_special_tokens for r in reqs],
            spaces_between_special_tokens=[r.params.spaces_between_special_tokens for r in reqs],
            no_stop_trim=[r.params.no_stop_trim for r in reqs],
            prompt_tokens=[len(r.input_ids) for r in reqs],
            reasoning_tokens=[0] * n,
            completion_tokens=[len(r.output_ids) for r in reqs],
            cached_tokens=[0] * n,
            **{k: (v if any_logprob else None) for k, v in fields.items()},  # logprob fields
            output_token_entropy_val=None,
            output_token_sampling_mask=None,
            output_hidden_states=hidden if any_hidden else None,
            routed_experts=None,
            indexer_topk=None,
            placeholder_tokens_idx=None,
            placeholder_tokens_val=None,
            retraction_counts=[0] * n,
            dp_ranks=[self.dp_rank] * n,
            # The codec wraps the batch's stats in the PickleWrapper the field declares.
            time_stats=TimeStatsBatch(stats) if any(s is not None for s in stats) else None,  # type: ignore[arg-type]
            customized_info=customized or None,  # type: ignore[arg-type]  # the codec wraps it too
        )

    # -- embeddings -----------------------------------------------------------------
    def run_embedding(self, obj: TokenizedEmbeddingReqInput) -> None:
        if self.stub is not None:
            self.run_stub_embedding(obj)
            return
        if self.skip_forward:
            raise ValueError("--skip-forward runs no model: embeddings are not available")
        ids = list(obj.input_ids or [])
        if not ids or len(ids) > self.context_length:
            raise ValueError(f"embedding input of {len(ids)} tokens; must be 1..{self.context_length}")
        assert self.model is not None and self.cache is not None  # set unless skip_forward
        stats: Optional[ReqTimeStats] = obj.time_stats  # type: ignore[assignment]  # unwrapped on receive
        with self.tracing.step("scheduler.embed", stats, rid=obj.rid, dp_rank=self.dp_rank):
            slot = torch.tensor([self.cache.scratch_slot], device=self.device)
            positions = torch.arange(len(ids), device=self.device)[None]
            hidden = self.model(torch.tensor([ids], device=self.device), positions, slot, self.cache)[0]
            pooled = hidden[-1].float()
            embedding = torch.nn.functional.normalize(pooled, dim=-1)
            if stats is not None:
                stats.mark("scheduler_finished")
        self.to_detokenizer.send(BatchEmbeddingOutput(
            rids=[obj.rid],  # type: ignore[list-item]  # None only when the peer left it unset
            finished_reasons=[{"type": "length", "length": 0}],
            embeddings=[embedding.cpu().tolist()],
            prompt_tokens=[len(ids)],
            cached_tokens=[0],
            placeholder_tokens_idx=None,
            placeholder_tokens_val=None,
            retraction_counts=[0],
            time_stats=[stats] if stats is not None else None,  # type: ignore[arg-type]  # the codec wraps it
            # A tensor on the IPC path (ext type 2 under msgpack); CPU so no peer needs a GPU.
            pooled_hidden_states=[pooled.cpu()] if obj.return_pooled_hidden_states else None,
        ))

    def run_stub_embedding(self, obj: TokenizedEmbeddingReqInput) -> None:
        """The stub's embedding (stub_model.py), through the same output as the model's."""
        assert self.stub is not None
        ids = list(obj.input_ids or [])
        if not ids:
            raise ValueError("empty input_ids")
        stats: Optional[ReqTimeStats] = obj.time_stats  # type: ignore[assignment]  # unwrapped on receive
        embedding: Any  # a list of floats: one arm of the field's union
        embedding, pooled = self.stub.embed(obj.rid or "", ids, obj.return_pooled_hidden_states)
        if stats is not None:
            stats.mark("scheduler_finished")
        self.to_detokenizer.send(BatchEmbeddingOutput(
            rids=[obj.rid],  # type: ignore[list-item]  # None only when the peer left it unset
            finished_reasons=[{"type": "length", "length": 0}],
            embeddings=[embedding],
            prompt_tokens=[len(ids)],
            cached_tokens=[0],
            placeholder_tokens_idx=None,
            placeholder_tokens_val=None,
            retraction_counts=[0],
            time_stats=[stats] if stats is not None else None,  # type: ignore[arg-type]  # the codec wraps it
            pooled_hidden_states=[torch.tensor(pooled, dtype=torch.float32)] if pooled is not None else None,
        ))

    # -- control --------------------------------------------------------------------
    def flush_cache(self, obj: FlushCacheReqInput) -> FlushCacheReqOutput:
        if self.running or self.waiting:
            in_flight = len(self.running) + len(self.waiting)
            return FlushCacheReqOutput(rid=obj.rid, success=False,
                                       message=f"{self.name}: {in_flight} requests in flight")
        if self.cache is not None:
            self.cache.clear()
        return FlushCacheReqOutput(rid=obj.rid, success=True, message=f"{self.name}: cache flushed")

    def update_weights(self, obj: UpdateWeightsFromTensorReqInput) -> UpdateWeightsFromTensorReqOutput:
        if self.skip_forward:
            return UpdateWeightsFromTensorReqOutput(rid=obj.rid, success=False,
                                                    message=f"{self.name}: --skip-forward holds no weights")
        if self.stub is not None:  # no parameters: the payloads are taken as they came
            sizes = [len(payload) for payload in obj.serialized_named_tensors]
            return UpdateWeightsFromTensorReqOutput(rid=obj.rid, success=True,
                                                    message=f"{self.name}: the stub took {sizes} bytes")
        assert self.model is not None and self.cache is not None  # set unless skip_forward
        try:
            tensors = weights.load_named_tensors(obj.serialized_named_tensors, obj.load_format, tp_rank=0)
            weights.check_named_tensors(tensors, self.model.parameter_shapes())
        except ValueError as exc:
            return UpdateWeightsFromTensorReqOutput(rid=obj.rid, success=False, message=f"{self.name}: {exc}")
        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, tensor in tensors.items():
                params[name].copy_(tensor.to(device=self.device, dtype=params[name].dtype))
        if obj.abort_all_requests:
            self.abort(AbortReq(abort_all=True, abort_message="aborted by a weight update"))
        if obj.flush_cache and not (self.running or self.waiting):
            self.cache.clear()
        logger.info("%s: updated %d tensors (version %s)", self.name, len(tensors), obj.weight_version)
        return UpdateWeightsFromTensorReqOutput(rid=obj.rid, success=True,
                                                message=f"{self.name}: updated {len(tensors)} tensors")

    def open_session(self, obj: OpenSessionReqInput) -> OpenSessionReqOutput:
        """A session id this rank knows from now on (a fresh one when none is given)."""
        session_id = obj.session_id or uuid.uuid4().hex
        if session_id in self.sessions:
            return OpenSessionReqOutput(rid=obj.rid, session_id=session_id, success=False)
        self.sessions[session_id] = obj.capacity_of_str_len
        return OpenSessionReqOutput(rid=obj.rid, session_id=session_id, success=True)

    def pause(self, obj: PauseGenerationReqInput) -> None:
        """in_place and retract keep the requests (this engine holds no KV cache to retract);
        abort ends them all first."""
        if obj.mode == "abort":
            self.abort(AbortReq(abort_all=True, abort_message="aborted by a pause"))
        self.paused = True

    def close(self) -> None:
        if self.stub is not None:
            self.stub.close()
        for sock in (self.receiver, self.to_detokenizer, self.to_tokenizer):
            sock.close()
        self.ctx.term()
        self.tap.close()
        self.tracing.shutdown()


def skipped_forward_token(req: Req) -> int:
    """The IPC-bound mode's next token: printable ASCII (one byte token, never a special one),
    a function of the previous token and the position, so runs are reproducible."""
    out = req.output_ids
    last = out[-1] if out else req.input_ids[-1]
    return 32 + (last * 7 + len(req.input_ids) + len(out)) % 95


def scheduler_receiver(ctx: zmq.Context[Any], config: EngineConfig, ipc: IpcNames, dp_rank: int, tap: Tap) -> Receiver:
    """A scheduler rank's receive path (what the controller's route and broadcast arrive on):
    decode, then this process's unwrap (EngineConfig.debug_skip_unwrap can name scheduler_<rank>)."""
    name = scheduler_name(dp_rank)
    assert config.transport is not None, "EngineConfig.resolved() sets the transport"
    return Receiver(ctx, ipc.schedulers[dp_rank], link=f"{name}<-controller", transport=config.transport, tap=tap,
                    unwrap=choose_unwrap(name, config.debug_skip_unwrap))


def run_scheduler_process(config: EngineConfig, ipc: IpcNames, dp_rank: int, ready: Connection) -> None:
    run_child(scheduler_name(dp_rank), config, ipc, ready, lambda: Scheduler(config, ipc, dp_rank))
