"""The data-parallel controller: routes tokenized requests to the scheduler ranks.

    tokenizer manager --TokenizedGenerateReqInput / TokenizedEmbeddingReqInput--> controller
        --> one scheduler (routed_dp_rank if given, else the load-balance method's choice)
    tokenizer manager --BatchTokenizedGenerateReqInput / BatchTokenizedEmbeddingReqInput--> controller
        --> one scheduler, the batch whole (the routed_dp_rank its requests agree on, else the method's)
    tokenizer manager --AbortReq / FlushCacheReqInput / UpdateWeightsFromTensorReqInput / Open- and
                        CloseSessionReqInput / Pause- and ContinueGenerationReqInput--> controller
        --> every scheduler
    controller --AbortReq (routing errors)--> tokenizer manager

The controller reads each request's time stats (it stamps the dispatch and opens
a trace span), so its receive path must unwrap PickleWrapper fields: upstream's
controller first forgot to, and under msgpack it then handled a wrapper instead
of the time stats. ``unwrap_on_receive`` is that step; EngineConfig.debug_skip_unwrap
=("controller",) disables it, to show that the conformance checks catch the bug.

The load-balance methods are SGLang's (``--load-balance-method``): ``round_robin`` takes the
ranks in turn; ``total_requests`` the rank with the fewest requests and ``total_tokens`` the one
with the fewest tokens (prompt plus max_new_tokens; ties: fewer requests), counted from what
this controller has sent to each rank (SGLang's DPBudget between load reports: the reference's
schedulers report none). Each method is its own dispatch function, as upstream's are.

One loop iteration is ``step``: ``receive`` (the receive path: decode, unwrap, tap)
then ``handle`` (dispatch; a failure answers the request's rids with an AbortReq).
The conformance suite drives these same methods over real sockets
(``receive_paths.ReceivePathRig``, checks ``Required.ReceivePath.*``).
"""

from __future__ import annotations

import logging
from multiprocessing.connection import Connection
from typing import Any, Optional, Union

import zmq

from reference_impl import codec
from reference_impl.io_struct import (
    AbortReq,
    BatchTokenizedEmbeddingReqInput,
    BatchTokenizedGenerateReqInput,
    CloseSessionReqInput,
    ContinueGenerationReqInput,
    FlushCacheReqInput,
    OpenSessionReqInput,
    PauseGenerationReqInput,
    TokenizedEmbeddingReqInput,
    TokenizedGenerateReqInput,
    UpdateWeightsFromTensorReqInput,
)

from .config import CONTROLLER, TOKENIZER_MANAGER, EngineConfig, IpcNames, scheduler_name
from .ipc import Receiver, Sender, choose_unwrap
from .runtime import run_child
from .tap import Tap
from .tracing import Tracing

logger = logging.getLogger(__name__)

ROUTED = (TokenizedGenerateReqInput, TokenizedEmbeddingReqInput)
ROUTED_BATCHES = (BatchTokenizedGenerateReqInput, BatchTokenizedEmbeddingReqInput)
BROADCAST = (AbortReq, FlushCacheReqInput, UpdateWeightsFromTensorReqInput, OpenSessionReqInput, CloseSessionReqInput,
             PauseGenerationReqInput, ContinueGenerationReqInput)


def unwrap_on_receive(obj: Any, transport: str) -> Any:
    """The controller's receive-path unwrap: open every PickleWrapper (time_stats) before use."""
    return codec.unwrap(obj, allow_pickle=True, transport=transport)


class DataParallelController:
    def __init__(self, config: EngineConfig, ipc: IpcNames) -> None:
        self.config = config
        assert config.transport is not None, "EngineConfig.resolved() sets the transport"
        self.transport = config.transport
        self.ctx = zmq.Context()
        self.tap = Tap(config.tap_dir, CONTROLLER)
        self.tracing = Tracing(CONTROLLER, config.trace_dir)
        self.receiver = Receiver(self.ctx, ipc.controller, link="controller<-tokenizer_manager",
                                 transport=self.transport, tap=self.tap,
                                 unwrap=choose_unwrap(CONTROLLER, config.debug_skip_unwrap, unwrap_on_receive))
        self.workers = [Sender(self.ctx, endpoint, self.transport, self.tap, scheduler_name(rank))
                        for rank, endpoint in enumerate(ipc.schedulers)]
        self.to_tokenizer = Sender(self.ctx, ipc.tokenizer_manager, self.transport, self.tap, TOKENIZER_MANAGER)
        self.next_rank = 0
        self.load_balance_method = config.load_balance_method
        self.sent_requests = [0] * len(self.workers)  # per rank: what this controller sent there
        self.sent_tokens = [0] * len(self.workers)
        self.dispatchers = {"round_robin": self.round_robin_scheduler,
                            "total_requests": self.total_requests_scheduler,
                            "total_tokens": self.total_tokens_scheduler}

    def event_loop(self) -> None:
        while True:
            self.step(timeout_ms=1000)

    def step(self, timeout_ms: int) -> Any:
        """One message: receive it, dispatch it. Returns what the receive path handed on (or None)."""
        obj = self.receive(timeout_ms)
        if obj is not None:
            self.handle(obj)
        return obj

    def receive(self, timeout_ms: int) -> Any:
        """The receive path: one message decoded and unwrapped, or None (nothing came, or undecodable)."""
        try:
            return self.receiver.recv(timeout_ms=timeout_ms)
        except Exception:
            logger.exception("controller: undecodable message dropped")
            return None

    def handle(self, obj: Any) -> None:
        """Dispatch one received message; if that fails, every request it carries gets an AbortReq."""
        try:
            self.dispatch(obj)
        except Exception as exc:
            logger.exception("controller: failed to dispatch %s", type(obj).__name__)
            rids = [obj.rid] if getattr(obj, "rid", None) is not None else list(getattr(obj, "rids", None) or [])
            for rid in rids:
                self.to_tokenizer.send(AbortReq(rid=rid, finished_reason={
                    "type": "abort", "message": f"controller: {type(exc).__name__}: {exc}", "status_code": 500}))

    @staticmethod
    def requests_of(obj: Any) -> list[Any]:
        return list(obj.batch) if isinstance(obj, ROUTED_BATCHES) else [obj]

    def routed_rank(self, obj: Any) -> Optional[int]:
        """The routed_dp_rank a request names (a batch: the one its requests agree on), or None."""
        named = {req.routed_dp_rank for req in self.requests_of(obj) if req.routed_dp_rank is not None}
        if len(named) > 1:
            raise ValueError(f"the requests of one batch name different routed_dp_ranks {sorted(named)}")
        if not named:
            return None
        routed = named.pop()
        if not 0 <= routed < len(self.workers):
            raise ValueError(f"routed_dp_rank {routed} is not in [0, {len(self.workers)})")
        return int(routed)

    def route(self, obj: Any) -> None:
        """A request (or a batch, whole) to one rank: the one it names, else the method's."""
        routed = self.routed_rank(obj)
        if routed is not None:
            self.send_to(routed, obj)
        else:
            self.dispatchers[self.load_balance_method](obj)

    def round_robin_scheduler(self, obj: Any) -> None:
        rank = self.next_rank
        self.next_rank = (self.next_rank + 1) % len(self.workers)
        self.send_to(rank, obj)

    def total_requests_scheduler(self, obj: Any) -> None:
        rank = min(range(len(self.workers)), key=lambda r: (self.sent_requests[r], r))
        self.send_to(rank, obj)

    def total_tokens_scheduler(self, obj: Any) -> None:
        rank = min(range(len(self.workers)), key=lambda r: (self.sent_tokens[r], self.sent_requests[r], r))
        self.send_to(rank, obj)

    def send_to(self, rank: int, obj: Any) -> None:
        """Stamp and trace each request, count it in the rank's budget, send."""
        for req in self.requests_of(obj):
            self._stamp(req, rank)
            self.sent_requests[rank] += 1
            self.sent_tokens[rank] += len(req.input_ids or ()) + (req.sampling_params.max_new_tokens or 0)
        self.workers[rank].send(obj)

    def _stamp(self, req: Any, rank: int) -> None:
        stats = req.time_stats
        if stats is not None:
            stats.mark("controller_dispatch")  # a PickleWrapper here means the unwrap was skipped
        with self.tracing.step("controller.dispatch", stats, rid=req.rid, dp_rank=rank):
            pass

    def dispatch(self, obj: Any) -> None:
        if isinstance(obj, ROUTED + ROUTED_BATCHES):
            self.route(obj)
        elif isinstance(obj, BROADCAST):
            self.broadcast(obj)
        else:
            raise TypeError(f"the controller does not route {type(obj).__name__}")

    def broadcast(self, obj: Any) -> None:
        """The same message to every scheduler rank (each re-encodes: wrappers wrapped again)."""
        for worker in self.workers:
            worker.send(obj)

    def close(self) -> None:
        socks: list[Union[Receiver, Sender]] = [self.receiver, self.to_tokenizer, *self.workers]
        for sock in socks:
            sock.close()
        self.ctx.term()
        self.tap.close()
        self.tracing.shutdown()


def run_controller_process(config: EngineConfig, ipc: IpcNames, ready: Connection) -> None:
    run_child(CONTROLLER, config, ipc, ready, lambda: DataParallelController(config, ipc))
