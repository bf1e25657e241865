"""The detokenizer: token ids -> text, between the schedulers and the tokenizer manager.

    schedulers --BatchTokenIDOutput--> detokenizer --BatchStrOutput--> tokenizer manager
    schedulers --BatchEmbeddingOutput--> detokenizer --BatchEmbeddingOutput (as is)--> tokenizer manager

Per request it keeps an incremental UTF-8 decoder: a character whose bytes span
several tokens is emitted once complete, and the rest is flushed when the request
finishes. A matched stop string or stop token is trimmed from the final text
unless no_stop_trim. output_strs are deltas; the tokenizer manager accumulates.
"""

from __future__ import annotations

import codecs
import logging
from array import array
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Optional

import zmq

from reference_impl.io_struct import AbortReq, BatchEmbeddingOutput, BatchStrOutput, BatchTokenIDOutput

from .config import DETOKENIZER, TOKENIZER_MANAGER, EngineConfig, IpcNames
from .ipc import Receiver, Sender, choose_unwrap
from .runtime import run_child
from .tap import Tap
from .tokenizer import ByteTokenizer
from .tracing import ReqTimeStats, Tracing

logger = logging.getLogger(__name__)

MAX_STATES = 65536


@dataclass
class DecodeState:
    decoder: codecs.IncrementalDecoder
    text: str = ""  # everything emitted so far
    ids: list[int] = field(default_factory=list)


def text_delta(state: DecodeState, tokenizer: ByteTokenizer, ids: list[int], finished_reason: Optional[dict[str, Any]],
               skip_special_tokens: bool, no_stop_trim: bool) -> str:
    """The new text for this chunk of ids; on the last chunk, flush and trim the matched stop."""
    finished = finished_reason is not None
    matched = finished_reason.get("matched") if finished_reason is not None else None
    if finished and isinstance(matched, int) and not no_stop_trim and ids and ids[-1] == matched:
        ids = ids[:-1]  # the stop token itself is not text
    state.ids.extend(ids)
    new = state.decoder.decode(tokenizer.decode_bytes(ids, skip_special_tokens), final=finished)
    if finished and isinstance(matched, str) and matched and not no_stop_trim:
        full = state.text + new
        pos = full.find(matched)
        if pos >= 0:  # text already streamed cannot be taken back
            new = full[len(state.text):pos] if pos >= len(state.text) else ""
    state.text += new
    return new


def detokenizer_receiver(ctx: zmq.Context[Any], config: EngineConfig, ipc: IpcNames, tap: Tap) -> Receiver:
    """The detokenizer's receive path (what every scheduler rank's outputs arrive on): decode,
    then this process's unwrap (EngineConfig.debug_skip_unwrap can name the detokenizer)."""
    assert config.transport is not None, "EngineConfig.resolved() sets the transport"
    return Receiver(ctx, ipc.detokenizer, link="detokenizer<-schedulers", transport=config.transport, tap=tap,
                    unwrap=choose_unwrap(DETOKENIZER, config.debug_skip_unwrap))


class Detokenizer:
    def __init__(self, config: EngineConfig, ipc: IpcNames) -> None:
        assert config.transport is not None, "EngineConfig.resolved() sets the transport"
        self.transport = config.transport
        self.tokenizer = ByteTokenizer.from_pretrained(config.model_path)
        self.ctx = zmq.Context()
        self.tap = Tap(config.tap_dir, DETOKENIZER)
        self.tracing = Tracing(DETOKENIZER, config.trace_dir)
        self.receiver = detokenizer_receiver(self.ctx, config, ipc, self.tap)
        self.to_tokenizer = Sender(self.ctx, ipc.tokenizer_manager, self.transport, self.tap, TOKENIZER_MANAGER)
        self.states: dict[str, DecodeState] = {}

    def event_loop(self) -> None:
        while True:
            try:
                obj = self.receiver.recv(timeout_ms=1000)
            except Exception:
                logger.exception("detokenizer: undecodable message dropped")
                continue
            if obj is None:
                continue
            try:
                out = self.handle(obj)
            except Exception as exc:
                logger.exception("detokenizer: failed on %s", type(obj).__name__)
                for rid in getattr(obj, "rids", None) or []:  # fail those requests now, not at their timeout
                    self.to_tokenizer.send(AbortReq(rid=rid, finished_reason={
                        "type": "abort", "message": f"detokenizer: {type(exc).__name__}: {exc}", "status_code": 500}))
                continue
            self.to_tokenizer.send(out)

    def handle(self, obj: Any) -> Any:
        if isinstance(obj, BatchTokenIDOutput):
            return self.detokenize(obj)
        if isinstance(obj, BatchEmbeddingOutput):
            # time_stats is typed PickleWrapper; the receive path unwrapped it into a list of ReqTimeStats.
            stats_list: list[ReqTimeStats] = obj.time_stats or []  # type: ignore[assignment]
            for stats in stats_list:
                with self.tracing.step("detokenizer.pass_embedding", stats, rid=stats.rid):
                    pass
            return obj
        raise TypeError(f"the detokenizer does not handle {type(obj).__name__}")

    def _text_delta(self, i: int, obj: BatchTokenIDOutput) -> str:
        assert obj.rids is not None
        rid = obj.rids[i]
        state = self.states.get(rid)
        if state is None:
            if len(self.states) >= MAX_STATES:
                self.states.pop(next(iter(self.states)))
            state = self.states[rid] = DecodeState(self.tokenizer.incremental_decoder())
        reason = obj.finished_reasons[i]
        if reason is not None:
            del self.states[rid]
        return text_delta(state, self.tokenizer, list(obj.decode_ids[i]), reason, obj.skip_special_tokens[i],
                          obj.no_stop_trim[i])

    def detokenize(self, obj: BatchTokenIDOutput) -> BatchStrOutput:
        assert obj.rids is not None
        output_strs = [self._text_delta(i, obj) for i in range(len(obj.rids))]
        # time_stats is typed PickleWrapper; the receive path unwrapped it into a TimeStatsBatch.
        stats_list: list[Optional[ReqTimeStats]] = obj.time_stats or []  # type: ignore[assignment]
        if self.tracing.enabled:
            for i, stats in enumerate(stats_list):
                if stats is not None:
                    with self.tracing.step("detokenizer.decode", stats, rid=obj.rids[i],
                                           finished=obj.finished_reasons[i] is not None):
                        stats.mark("detokenized")
        else:  # the same stamps without a span's context manager per request and step
            for stats in stats_list:
                if stats is not None:
                    stats.mark("detokenized")
        return BatchStrOutput(
            rids=obj.rids,
            http_worker_ipcs=obj.http_worker_ipcs,
            finished_reasons=obj.finished_reasons,
            output_strs=output_strs,
            # The received arrays themselves where they are array('q') already (nothing modifies
            # them after this point): no copy per request and step.
            output_ids=[ids if type(ids) is array and ids.typecode == "q" else array("q", ids)
                        for ids in (obj.output_ids or obj.decode_ids)],
            prompt_tokens=obj.prompt_tokens,
            completion_tokens=obj.completion_tokens,
            reasoning_tokens=obj.reasoning_tokens,
            cached_tokens=obj.cached_tokens,
            input_token_logprobs_val=obj.input_token_logprobs_val,
            input_token_logprobs_idx=obj.input_token_logprobs_idx,
            output_token_logprobs_val=obj.output_token_logprobs_val,
            output_token_logprobs_idx=obj.output_token_logprobs_idx,
            input_top_logprobs_val=obj.input_top_logprobs_val,
            input_top_logprobs_idx=obj.input_top_logprobs_idx,
            output_top_logprobs_val=obj.output_top_logprobs_val,
            output_top_logprobs_idx=obj.output_top_logprobs_idx,
            input_token_ids_logprobs_val=obj.input_token_ids_logprobs_val,
            input_token_ids_logprobs_idx=obj.input_token_ids_logprobs_idx,
            output_token_ids_logprobs_val=obj.output_token_ids_logprobs_val,
            output_token_ids_logprobs_idx=obj.output_token_ids_logprobs_idx,
            output_token_entropy_val=obj.output_token_entropy_val,
            output_token_sampling_mask=obj.output_token_sampling_mask,
            output_hidden_states=obj.output_hidden_states,
            routed_experts=None,
            indexer_topk=None,
            placeholder_tokens_idx=obj.placeholder_tokens_idx,
            placeholder_tokens_val=obj.placeholder_tokens_val,
            retraction_counts=obj.retraction_counts,
            dp_ranks=obj.dp_ranks,
            time_stats=obj.time_stats,
            customized_info=obj.customized_info,
        )

    def close(self) -> None:
        self.receiver.close()
        self.to_tokenizer.close()
        self.ctx.term()
        self.tap.close()
        self.tracing.shutdown()


def run_detokenizer_process(config: EngineConfig, ipc: IpcNames, ready: Connection) -> None:
    run_child(DETOKENIZER, config, ipc, ready, lambda: Detokenizer(config, ipc))
