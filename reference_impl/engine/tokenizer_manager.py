"""The tokenizer manager: lives in the HTTP server process, talks to the engine over ZeroMQ.

    HTTP handler --GenerateSpec--> TokenizerManager --TokenizedGenerateReqInput--> controller
    TokenizerManager <--BatchStrOutput / BatchEmbeddingOutput-- detokenizer
    TokenizerManager <--FlushCacheReqOutput / UpdateWeightsFromTensorReqOutput / AbortReq-- schedulers, controller

One asyncio task receives everything and routes it by ``rid`` to the waiting
request (an asyncio.Queue per request); replies to control requests are
collected from every data-parallel rank. A second task watches the child
processes: when one dies, every waiting request fails at once with 503 and
/health turns unhealthy (nothing hangs).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from array import array
from dataclasses import asdict, dataclass, field
from typing import Any, AsyncGenerator, Callable, Optional, Sequence, Union, cast

import msgspec
import torch
import zmq.asyncio

from reference_impl import __version__
from reference_impl.errors import WireError
from reference_impl.io_struct import (
    AbortReq,
    BatchEmbeddingOutput,
    BatchStrOutput,
    FlushCacheReqInput,
    FlushCacheReqOutput,
    OpenSessionReqInput,
    OpenSessionReqOutput,
    SamplingParams,
    TokenizedEmbeddingReqInput,
    TokenizedGenerateReqInput,
    UpdateWeightsFromTensorReqInput,
    UpdateWeightsFromTensorReqOutput,
)

from .config import CONTROLLER, TOKENIZER_MANAGER, EngineConfig, IpcNames
from .ipc import AsyncReceiver, AsyncSender, choose_unwrap
from .model import ModelConfig, parameter_shapes
from .protocol import EncodeSpec, GenerateSpec, RequestError
from .stub_model import is_stub
from .tap import Tap
from .tokenizer import ByteTokenizer
from .tracing import ReqTimeStats, Tracing, open_request_trace

logger = logging.getLogger(__name__)

WATCH_INTERVAL_S = 0.2
CONTROL_TIMEOUT_S = 60.0


class EngineError(Exception):
    """The engine could not serve the request (not the client's fault): 5xx."""

    def __init__(self, message: str, status_code: int = 500) -> None:
        super().__init__(message)
        self.message, self.status_code = message, status_code

    def to_json(self) -> dict[str, Any]:
        kind = {503: "ServiceUnavailableError", 504: "TimeoutError"}.get(self.status_code, "InternalServerError")
        return {"object": "error", "message": self.message, "type": kind, "param": None, "code": self.status_code}


LOGPROB_FIELDS = ("input_token_logprobs", "output_token_logprobs", "input_top_logprobs", "output_top_logprobs",
                  "input_token_ids_logprobs", "output_token_ids_logprobs")
ControlReply = Union[FlushCacheReqOutput, UpdateWeightsFromTensorReqOutput, OpenSessionReqOutput]


class _Chunk(msgspec.Struct, gc=False):
    """One output as the tokenizer manager queues it for the request's HTTP handler. The ids are
    a length into the state's append-only output_ids, not a copy: at c=1024 the handlers run
    behind the engine, and queued copies of the ids so far held some 20 million references that
    every full garbage collection walked. Not tracked by the collector (gc=False; it holds no
    reference back to anything that could hold it): a tuple holding a dict stays tracked, and
    some 165,000 outputs wait queued at c=1024."""

    text: str
    output_ids_len: int
    meta_info: dict[str, Any]


@dataclass
class ReqState:
    rid: str
    spec: Any
    stats: ReqTimeStats
    queue: asyncio.Queue[Union[_Chunk, dict[str, Any], Exception]] = field(default_factory=asyncio.Queue)
    finished: bool = False
    created: float = field(default_factory=time.time)
    text: str = ""
    output_ids: list[int] = field(default_factory=list)
    logprobs: dict[str, tuple[list[Any], list[Any]]] = field(
        default_factory=lambda: {k: ([], []) for k in LOGPROB_FIELDS})
    hidden_states: list[Any] = field(default_factory=list)
    customized_info: dict[str, list[Any]] = field(default_factory=dict)  # key -> one value per token so far
    span: Any = None


@dataclass
class _Pending:
    future: asyncio.Future[list[ControlReply]]
    expected: int
    replies: list[ControlReply] = field(default_factory=list)


def tokenizer_manager_receiver(ctx: zmq.asyncio.Context, config: EngineConfig, ipc: IpcNames,
                               tap: Tap) -> AsyncReceiver:
    """The tokenizer manager's receive path (outputs of the detokenizer, errors of the controller
    and the schedulers): decode, then this process's unwrap (EngineConfig.debug_skip_unwrap can
    name the tokenizer manager)."""
    assert config.transport is not None, "EngineConfig.resolved() sets the transport"
    return AsyncReceiver(ctx, ipc.tokenizer_manager, link="tokenizer_manager<-engine", transport=config.transport,
                         tap=tap, unwrap=choose_unwrap(TOKENIZER_MANAGER, config.debug_skip_unwrap))


class TokenizerManager:
    def __init__(self, config: EngineConfig, ipc: IpcNames, children: Sequence[tuple[str, Any]] = (),
                 on_child_death: Optional[Callable[[list[str]], None]] = None) -> None:
        self.config, self.ipc = config, ipc
        self.on_child_death = on_child_death  # called once, after the waiting requests were failed
        self.children = list(children)  # (name, multiprocessing.Process)
        assert config.model_path is not None, "EngineConfig.resolved() sets the model path"
        self.model_config = ModelConfig.load(config.model_path)
        self.tokenizer = ByteTokenizer.from_pretrained(config.model_path)
        self.vocab_size = self.model_config.vocab_size
        self.context_length = config.context_length or self.model_config.max_position_embeddings
        # None: the stub model (no parameters; weight payloads are opaque to it)
        self.parameter_shapes = None if is_stub(config.model_path) else parameter_shapes(self.model_config)
        self.tracing = Tracing(TOKENIZER_MANAGER, config.trace_dir)
        self.tap = Tap(config.tap_dir, TOKENIZER_MANAGER)
        self.states: dict[str, ReqState] = {}
        self.pending: dict[str, _Pending] = {}
        self.weight_version = "default"
        self.dead: list[str] = []
        self.stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._weights_lock: Optional[asyncio.Lock] = None

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        self.ctx = zmq.asyncio.Context()
        self.receiver = tokenizer_manager_receiver(self.ctx, self.config, self.ipc, self.tap)
        assert self.config.transport is not None, "EngineConfig.resolved() sets the transport"
        self.sender = AsyncSender(self.ctx, self.ipc.controller, self.config.transport, self.tap, CONTROLLER)
        self._weights_lock = asyncio.Lock()
        self._tasks = [asyncio.create_task(self._handle_loop(), name="tm-recv"),
                       asyncio.create_task(self._watch_children(), name="tm-watch")]
        logger.info("tokenizer_manager started; IPC transport: %s", self.config.transport)

    def begin_stopping(self) -> None:
        """Shutdown has begun: new requests are refused and every in-flight one ends now with a
        503 (a stream: an error event, then [DONE]), so that its connection closes within the
        HTTP server's grace period instead of being cancelled at its end with a logged traceback."""
        self.stopping = True
        self._fail_all(EngineError("the server is shutting down", 503))

    async def stop(self) -> None:
        self.begin_stopping()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down: its error no longer matters
                pass
        self.receiver.close()
        self.sender.close()
        self.ctx.term()
        self.tap.close()
        self.tracing.shutdown()

    def health(self) -> tuple[bool, dict[str, Any]]:
        alive = {name: proc.is_alive() for name, proc in self.children}
        healthy = not self.dead and not self.stopping and all(alive.values())
        return healthy, {"status": "healthy" if healthy else "unhealthy", "processes": alive, "dead": self.dead}

    def check_healthy(self) -> None:
        if self.stopping:
            raise EngineError("the server is shutting down", 503)
        if self.dead:
            raise EngineError(f"engine unhealthy: {'; '.join(self.dead)} died", 503)

    # -- receiving -------------------------------------------------------------------
    async def _handle_loop(self) -> None:
        while True:
            try:
                obj = await self.receiver.recv()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("tokenizer_manager: undecodable message dropped")
                continue
            try:
                self._dispatch(obj)
            except Exception as exc:
                logger.exception("tokenizer_manager: failed on %s", type(obj).__name__)
                error = EngineError(f"tokenizer_manager: {type(exc).__name__}: {exc}")
                for rid in getattr(obj, "rids", None) or []:  # fail those requests now, not at their timeout
                    state = self.states.get(rid)
                    if state is not None and not state.finished:
                        state.finished = True
                        state.queue.put_nowait(error)

    def _dispatch(self, obj: Any) -> None:
        if isinstance(obj, BatchStrOutput):
            self._handle_str_output(obj)
        elif isinstance(obj, BatchEmbeddingOutput):
            self._handle_embedding_output(obj)
        elif isinstance(obj, (FlushCacheReqOutput, UpdateWeightsFromTensorReqOutput, OpenSessionReqOutput)):
            pending = self.pending.get(obj.rid) if obj.rid is not None else None
            if pending is not None and not pending.future.done():
                pending.replies.append(obj)
                if len(pending.replies) >= pending.expected:
                    pending.future.set_result(pending.replies)
        elif isinstance(obj, AbortReq):
            self._handle_abort(obj)
        else:
            logger.warning("tokenizer_manager: unexpected %s", type(obj).__name__)

    def _handle_abort(self, obj: AbortReq) -> None:
        state = self.states.get(obj.rid) if obj.rid is not None else None
        if state is None or state.finished:
            return
        reason: dict[str, Any] = obj.finished_reason or {}
        state.finished = True
        state.queue.put_nowait(EngineError(str(reason.get("message") or "aborted by the engine"),
                                           int(reason.get("status_code") or 500)))

    def _handle_str_output(self, obj: BatchStrOutput) -> None:
        assert obj.rids is not None
        # time_stats is typed PickleWrapper; the receive path unwrapped it into a TimeStatsBatch.
        stats_list: list[Optional[ReqTimeStats]] = obj.time_stats or [None] * len(obj.rids)  # type: ignore[assignment]
        for i, rid in enumerate(obj.rids):
            state = self.states.get(rid)
            if state is None or state.finished:
                continue
            spec: GenerateSpec = state.spec
            state.text += obj.output_strs[i]
            assert obj.output_ids is not None
            state.output_ids.extend(obj.output_ids[i])
            if spec.return_logprob:
                for name in LOGPROB_FIELDS:
                    vals, idxs = getattr(obj, name + "_val"), getattr(obj, name + "_idx")
                    if vals is not None and vals[i] is not None:
                        state.logprobs[name][0].extend(vals[i])
                        state.logprobs[name][1].extend(idxs[i])
            if obj.output_hidden_states is not None and obj.output_hidden_states[i] is not None:
                state.hidden_states.extend(obj.output_hidden_states[i])  # type: ignore[arg-type]  # [i] checked above
            # customized_info is typed PickleWrapper; the receive path unwrapped it into a dict of
            # key -> per request, the values since the previous output (None: none for that request).
            customized: dict[str, list[Any]] = obj.customized_info or {}  # type: ignore[assignment]
            for key, values in customized.items():
                if values[i] is not None:
                    state.customized_info.setdefault(key, []).extend(values[i])
            reason = obj.finished_reasons[i]
            meta: dict[str, Any] = {
                "id": rid,
                "finish_reason": reason,
                "prompt_tokens": obj.prompt_tokens[i],
                "completion_tokens": obj.completion_tokens[i],
                "cached_tokens": obj.cached_tokens[i],
                "weight_version": self.weight_version,
            }
            if obj.dp_ranks is not None:
                meta["dp_rank"] = obj.dp_ranks[i]
            if spec.return_logprob:
                meta.update(self._logprob_meta(state))
            if spec.return_hidden_states:
                meta["hidden_states"] = list(state.hidden_states)
            for key, values in state.customized_info.items():  # e.g. a MoE model's expert_ids
                meta.setdefault(key, list(values))
            if reason is not None:
                state.finished = True
                stats = stats_list[i]
                with self.tracing.step("tokenizer_manager.response", stats, rid=rid):
                    if stats is not None:
                        stats.mark("response")
                meta["e2e_latency"] = time.time() - state.created
            if spec.stream or reason is not None:
                state.queue.put_nowait(_Chunk(state.text, len(state.output_ids), meta))

    def _logprob_meta(self, state: ReqState) -> dict[str, Any]:
        with_text = state.spec.return_text_in_logprobs

        def triple(val: Optional[float], idx: Optional[int]) -> list[Any]:
            return [val, idx, self.tokenizer.id_to_token(idx) if with_text and idx is not None else None]

        def rows(vals: list[Any], idxs: list[Any]) -> list[Any]:
            return [None if v is None else [triple(a, b) for a, b in zip(v, i)] for v, i in zip(vals, idxs)]

        lp = state.logprobs
        out = {
            "input_token_logprobs": [triple(v, i) for v, i in zip(*lp["input_token_logprobs"])],
            "output_token_logprobs": [triple(v, i) for v, i in zip(*lp["output_token_logprobs"])],
        }
        if state.spec.top_logprobs_num > 0:
            out["input_top_logprobs"] = rows(*lp["input_top_logprobs"])
            out["output_top_logprobs"] = rows(*lp["output_top_logprobs"])
        if state.spec.token_ids_logprob is not None:
            out["input_token_ids_logprobs"] = rows(*lp["input_token_ids_logprobs"])
            out["output_token_ids_logprobs"] = rows(*lp["output_token_ids_logprobs"])
        return out

    def _handle_embedding_output(self, obj: BatchEmbeddingOutput) -> None:
        assert obj.rids is not None
        # time_stats is typed PickleWrapper; the receive path unwrapped it into a list of ReqTimeStats.
        stats_list: list[Optional[ReqTimeStats]] = obj.time_stats or [None] * len(obj.rids)  # type: ignore[assignment]
        for i, rid in enumerate(obj.rids):
            state = self.states.get(rid)
            if state is None or state.finished:
                continue
            state.finished = True
            with self.tracing.step("tokenizer_manager.response", stats_list[i], rid=rid):
                pass
            out: dict[str, Any] = {"embedding": obj.embeddings[i], "meta_info": {
                "id": rid, "finish_reason": obj.finished_reasons[i], "prompt_tokens": obj.prompt_tokens[i],
                "cached_tokens": obj.cached_tokens[i], "weight_version": self.weight_version,
                "e2e_latency": time.time() - state.created}}
            pooled = obj.pooled_hidden_states[i] if obj.pooled_hidden_states is not None else None
            if pooled is not None:
                if not isinstance(pooled, torch.Tensor):
                    raise TypeError(f"pooled_hidden_states[{i}] arrived as {type(pooled).__name__}, not a tensor")
                out["pooled_hidden_state"] = pooled.tolist()
                out["meta_info"]["pooled_hidden_state_dtype"] = str(pooled.dtype).removeprefix("torch.")
            state.queue.put_nowait(out)

    # -- watchdog --------------------------------------------------------------------
    async def _watch_children(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL_S)
            if self.stopping or self.dead:
                continue
            dead = [f"{name} (pid {proc.pid}, exit code {proc.exitcode})"
                    for name, proc in self.children if not proc.is_alive()]
            if dead:
                self.dead = dead
                logger.error("engine process died: %s; failing %d requests", "; ".join(dead), len(self.states))
                self._fail_all(EngineError(f"engine process died: {'; '.join(dead)}", 503))
                if self.on_child_death is not None:
                    self.on_child_death(dead)

    def _fail_all(self, error: EngineError) -> None:
        for state in list(self.states.values()):
            if not state.finished:
                state.finished = True
                state.queue.put_nowait(error)
        for pending in list(self.pending.values()):
            if not pending.future.done():
                pending.future.set_exception(error)

    # -- requests --------------------------------------------------------------------
    def _new_state(self, rid: Optional[str], spec: Any, trace_header: Optional[dict[str, str]], kind: str) -> ReqState:
        self.check_healthy()
        rank = spec.routed_dp_rank
        if rank is not None and not 0 <= rank < self.config.dp_size:
            raise RequestError(f"routed_dp_rank: {rank} is not a data-parallel rank of this server "
                               f"(0..{self.config.dp_size - 1})", param="routed_dp_rank")
        rid = rid or uuid.uuid4().hex
        if rid in self.states:
            raise RequestError(f"rid: a request with rid {rid!r} is already running", param="rid")
        stats, span = open_request_trace(self.tracing, rid, trace_header, kind=kind, transport=self.config.transport,
                                         prompt_tokens=len(spec.input_ids))
        state = ReqState(rid=rid, spec=spec, stats=stats)
        state.span = span
        self.states[rid] = state
        return state

    async def _wait(self, state: ReqState) -> AsyncGenerator[dict[str, Any], None]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.request_timeout_s
        try:
            while True:
                left = deadline - loop.time()
                try:
                    if left <= 0:
                        raise asyncio.TimeoutError
                    # A handler behind the engine finds its next chunk waiting: take it without
                    # wait_for's task and timer, which cost more than the chunk's own handling.
                    item = state.queue.get_nowait() if not state.queue.empty() else \
                        await asyncio.wait_for(state.queue.get(), timeout=left)
                except asyncio.TimeoutError:
                    raise EngineError(f"request {state.rid} timed out after {self.config.request_timeout_s:.0f} s",
                                      504) from None
                if isinstance(item, Exception):
                    raise item
                if isinstance(item, _Chunk):
                    item = {"text": item.text, "output_ids": state.output_ids[:item.output_ids_len],
                            "meta_info": item.meta_info}
                yield item
                if state.finished and state.queue.empty():
                    return
        finally:
            self.states.pop(state.rid, None)
            if not state.finished and not self.stopping and not self.dead:
                # The client went away (or timed out): stop the work in the scheduler.
                asyncio.ensure_future(self._send_quietly(AbortReq(rid=state.rid, abort_message="client gone")))
            if state.span is not None:
                state.span.end()

    async def _send_quietly(self, obj: Any) -> None:
        try:
            await self.sender.send(obj)
        except Exception:
            logger.exception("tokenizer_manager: could not send %s", type(obj).__name__)

    async def generate(self, spec: GenerateSpec,
                       trace_header: Optional[dict[str, str]] = None) -> AsyncGenerator[dict[str, Any], None]:
        """Yields out dicts (cumulative text): every chunk when streaming, else only the final one."""
        state = self._new_state(spec.rid, spec, trace_header, "generate")
        req = TokenizedGenerateReqInput(
            rid=state.rid, input_text=spec.input_text, input_ids=array("q", spec.input_ids), input_embeds=None,
            mm_inputs=None, token_type_ids=None, sampling_params=spec.sampling_params,
            return_logprob=spec.return_logprob, logprob_start_len=spec.logprob_start_len,
            top_logprobs_num=spec.top_logprobs_num, token_ids_logprob=spec.token_ids_logprob, stream=spec.stream,
            return_hidden_states=spec.return_hidden_states, routed_dp_rank=spec.routed_dp_rank,
            time_stats=state.stats)  # type: ignore[arg-type]  # the codec wraps it in the declared PickleWrapper
        await self._send_request(state, req)
        async for out in self._wait(state):
            yield out

    async def _send_request(self, state: ReqState, req: Any) -> None:
        """Send a request; on failure forget it. A value the wire cannot carry (e.g. an int beyond
        64 bits) came from the client: 400 naming the field, not a 500."""
        try:
            await self.sender.send(req)
        except WireError as exc:
            self.states.pop(state.rid, None)
            if state.span is not None:
                state.span.end()
            param = exc.path.lstrip(".") or None
            raise RequestError(f"{param or 'body'}: cannot be sent to the engine: {exc.reason}", param=param) from None
        except BaseException:
            self.states.pop(state.rid, None)
            if state.span is not None:
                state.span.end()
            raise

    async def encode(self, spec: EncodeSpec, trace_header: Optional[dict[str, str]] = None) -> dict[str, Any]:
        state = self._new_state(spec.rid, spec, trace_header, "embed")
        req = TokenizedEmbeddingReqInput(
            rid=state.rid, input_text=spec.input_text, input_ids=array("q", spec.input_ids), mm_inputs=None,
            token_type_ids=None, sampling_params=SamplingParams(max_new_tokens=0),
            return_pooled_hidden_states=spec.return_pooled_hidden_states, routed_dp_rank=spec.routed_dp_rank,
            time_stats=state.stats)  # type: ignore[arg-type]  # the codec wraps it in the declared PickleWrapper
        await self._send_request(state, req)
        waiter = self._wait(state)
        try:
            return await waiter.__anext__()
        except StopAsyncIteration:
            raise EngineError(f"request {state.rid} ended without output") from None
        finally:
            await waiter.aclose()

    async def abort(self, rid: str = "", abort_all: bool = False) -> None:
        self.check_healthy()
        if abort_all or rid in self.states:
            await self.sender.send(AbortReq(rid=rid or None, abort_all=abort_all, abort_message="aborted by request"))

    async def _control(self, req: Any) -> list[ControlReply]:
        self.check_healthy()
        rid = req.rid = uuid.uuid4().hex
        pending = self.pending[rid] = _Pending(asyncio.get_running_loop().create_future(), self.config.dp_size)
        try:
            await self.sender.send(req)
            return await asyncio.wait_for(pending.future, CONTROL_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise EngineError(f"{type(req).__name__}: no reply from every scheduler within {CONTROL_TIMEOUT_S:.0f} s",
                              504) from None
        finally:
            self.pending.pop(rid, None)

    async def flush_cache(self) -> tuple[bool, str]:
        """Success: one message whatever the number of ranks; else what each failing rank said
        (sorted: replies arrive in any order)."""
        replies = cast("list[FlushCacheReqOutput]", await self._control(FlushCacheReqInput()))
        failed = sorted(r.message for r in replies if not r.success)
        return not failed, "; ".join(failed) if failed else "cache flushed"

    async def open_session(self, obj: OpenSessionReqInput) -> tuple[bool, Optional[str]]:
        """Every rank opens it (a request of the session may go to any rank): its id, or failure."""
        obj.session_id = obj.session_id or uuid.uuid4().hex
        replies = await self._control(obj)
        return all(r.success for r in replies), obj.session_id

    async def broadcast(self, obj: Any) -> None:
        """A control message every rank acts on without a reply (close a session, pause and
        continue generation), sent in order behind what was sent before."""
        self.check_healthy()
        await self.sender.send(obj)

    async def update_weights_from_tensor(self, obj: UpdateWeightsFromTensorReqInput) -> tuple[bool, str]:
        assert self._weights_lock is not None, "start() creates the lock"
        async with self._weights_lock:
            replies = cast("list[UpdateWeightsFromTensorReqOutput]", await self._control(obj))
            success = all(r.success for r in replies)
            if success and obj.weight_version is not None:
                self.weight_version = obj.weight_version
            return success, "; ".join(sorted(r.message for r in replies))  # replies arrive in any order

    def server_info(self) -> dict[str, Any]:
        return {
            "version": __version__,
            "model_path": self.config.model_path,
            "served_model_name": self.config.served_model_name,
            "transport": self.config.transport,
            "dp_size": self.config.dp_size,
            "device": self.config.device,
            "scheduler_devices": [self.config.scheduler_device(r) for r in range(self.config.dp_size)],
            "context_length": self.context_length,
            "max_running_requests": self.config.max_running_requests,
            "stream_interval": self.config.stream_interval,
            "skip_forward": self.config.skip_forward,
            "weight_version": self.weight_version,
            "tracing": self.tracing.enabled,
            "ipc_dir": self.ipc.ipc_dir,
            "pids": {name: proc.pid for name, proc in self.children},
            "model_config": asdict(self.model_config),
            "healthy": self.health()[0],
            # Bookkeeping of this process: both return to 0 when nothing is running (leak checks).
            "in_flight": {"requests": len(self.states), "control": len(self.pending)},
        }
