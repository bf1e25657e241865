"""SGLang's own receive paths, driven in-process over real ZeroMQ sockets (adapter capabilities
``receive_path.*``; checks ``Required.ReceivePath.*``).

    rig (as the tokenizer manager) --sock_send--> DataParallelController.event_loop (a thread)
        sock_recv (top-level decode) -> its TypeBasedDispatcher -> round robin / routed rank
            --sock_send--> SchedulerRequestReceiver.recv_requests, rank by rank
                           (sock_recv, then its unwrap_pickle_wrapper)
    rig --DataParallelController.send_control_message (the broadcast)--> every rank, as above
    rig (as a scheduler) --sock_send--> DetokenizerManager.event_loop's sock_recv (a thread)

Every step is SGLang's code: its socket functions, its controller's event loop and dispatch,
its scheduler's request receiver. What the rig builds is only what those methods read: the
controller and receiver objects carry the sockets, counters and flags of a two-rank
round-robin deployment (no scheduler processes, no model: a tiny model config is published so
the runtime context answers the receiver's rank questions). The rig records what each piece
handed downstream; it never unwraps or routes anything itself.
"""

from __future__ import annotations

import contextlib
import json
import queue
import shutil
import tempfile
import threading
import time
import types
from typing import Any, Callable, Iterator, Optional

import zmq

TIMEOUT_S = 10.0
DP_SIZE = 2
#: The smallest model config SGLang's ServerArgs accepts (it reads config.json; nothing is loaded).
_TINY_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
                "num_hidden_layers": 1, "vocab_size": 256, "max_position_embeddings": 512,
                "rms_norm_eps": 1e-5, "torch_dtype": "float32"}


class ReceivePathError(RuntimeError):
    """A message did not get through an SGLang receive path (dropped, or a process raised)."""


class StopLoop(BaseException):
    """Ends an SGLang event loop thread (raised from the watchdog it feeds every iteration)."""


class QuietWatchdog:
    """What SGLang's event loops call every iteration (soft_watchdog.feed / disable): here the
    rig's way to end a loop thread, and a short sleep so a non-blocking loop does not spin."""

    def __init__(self) -> None:
        self.stopping = threading.Event()

    def feed(self) -> None:
        if self.stopping.is_set():
            raise StopLoop
        time.sleep(0.0005)

    @contextlib.contextmanager
    def disable(self) -> Iterator[None]:
        yield


_published: Optional[Any] = None


def _server_args() -> Any:
    """Publish SGLang's runtime context once per process (a tiny model config, CPU)."""
    global _published
    if _published is None:
        from sglang.srt import runtime_context
        from sglang.srt.server_args import ServerArgs

        folder = tempfile.mkdtemp(prefix="ipc-conformance-sglang-model-")
        with open(f"{folder}/config.json", "w") as out:
            json.dump(_TINY_CONFIG, out)
        _published = ServerArgs(model_path=folder, skip_tokenizer_init=True, device="cpu")
        runtime_context.publish(_published, role="scheduler")
    return _published


@contextlib.contextmanager
def transport_mode(io: Any, transport: str) -> Iterator[None]:
    """SGLang picks pickle or msgpack IPC once per process (SGLANG_USE_PICKLE_IPC, read into
    io_struct._USE_PICKLE_IPC); sock_send, sock_recv and the wrap helpers read it at each call."""
    saved = io._USE_PICKLE_IPC
    io._USE_PICKLE_IPC = transport == "pickle"
    try:
        yield
    finally:
        io._USE_PICKLE_IPC = saved


def _socket(ctx: zmq.Context[Any], kind: int, endpoint: str, bind: bool) -> zmq.Socket[bytes]:
    sock: zmq.Socket[bytes] = ctx.socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDTIMEO, int(TIMEOUT_S * 1000))
    sock.setsockopt(zmq.RCVTIMEO, int(TIMEOUT_S * 1000))  # a blocking loop never outlives its rig
    (sock.bind if bind else sock.connect)(endpoint)
    return sock


class _Loop:
    """An SGLang event loop on a thread, ended through its watchdog."""

    def __init__(self, run: Callable[[], Any], watchdog: QuietWatchdog) -> None:
        self.watchdog = watchdog
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, args=(run,), daemon=True)
        self.thread.start()

    def _run(self, run: Callable[[], Any]) -> None:
        try:
            run()
        except StopLoop:
            pass
        except BaseException as exc:  # noqa: BLE001 - the loop died: what the check reports
            self.error = exc

    def stop(self) -> None:
        self.watchdog.stopping.set()
        self.thread.join(TIMEOUT_S)


class EngineRig:
    """SGLang's data-parallel controller and DP_SIZE scheduler request receivers, over ipc://
    sockets in a private folder; a context manager (close() frees every socket and thread)."""

    def __init__(self, io: Any, transport: str) -> None:
        self.io, self.transport = io, transport
        self.folder = tempfile.mkdtemp(prefix="ipc-conformance-sglang-")
        self.ctx = zmq.Context()
        self.sockets: list[zmq.Socket[bytes]] = []
        self.loop: Optional[_Loop] = None
        try:
            self._build()
        except BaseException:
            # a release whose pieces take other arguments (0.5.19's SchedulerRequestReceiver takes
            # its process groups) fails here: free the sockets now, or the context's garbage
            # collection blocks the run later in ctx.term()
            self._free()
            raise

    def _build(self) -> None:
        from sglang.srt.managers.data_parallel_controller import DataParallelController, LoadBalanceMethod
        from sglang.srt.managers.scheduler_components.request_receiver import SchedulerRequestReceiver

        server_args = _server_args()

        def sock(kind: int, name: str, bind: bool) -> zmq.Socket[bytes]:
            self.sockets.append(_socket(self.ctx, kind, f"ipc://{self.folder}/{name}", bind))
            return self.sockets[-1]

        # The controller as DataParallelController.__init__ leaves it for a two-rank round-robin
        # deployment on node 0 (launch_dp_schedulers binds the worker sockets).
        controller = object.__new__(DataParallelController)
        controller.context = self.ctx
        controller.recv_from_tokenizer = sock(zmq.PULL, "controller", True)
        controller.workers = [sock(zmq.PUSH, f"scheduler_{rank}", True) for rank in range(DP_SIZE)]
        controller.max_dp_size = controller.launch_dp_size = DP_SIZE
        controller.dp_active = [True] * DP_SIZE
        controller.status = [True] * DP_SIZE
        controller._active_workers = list(range(DP_SIZE))
        controller._active_count_cache = DP_SIZE
        controller.control_message_step = 1
        controller.load_balance_method = LoadBalanceMethod.ROUND_ROBIN
        controller.dispatching = controller.round_robin_scheduler
        controller.refresh_load_budget_on_dispatch = False
        controller.round_robin_counter = controller.health_round_robin_counter = 0
        controller.soft_watchdog = QuietWatchdog()
        controller.init_dispatcher()
        self.controller = controller
        self.dispatched: queue.Queue[Any] = queue.Queue()
        real_dispatch = controller._request_dispatcher

        def dispatch(obj: Any) -> Any:  # records what the controller's own code did with obj
            try:
                answer = real_dispatch(obj)
            except Exception as exc:
                self.dispatched.put((obj, exc))
                raise
            self.dispatched.put((obj, None))
            return answer
        controller._request_dispatcher = dispatch

        # Each rank's request receiver as Scheduler.__init__ builds it (one rank per TP group,
        # no pipeline, no multimodal model, no input blocker).
        self.receivers = [SchedulerRequestReceiver(
            recv_from_tokenizer=sock(zmq.PULL, f"scheduler_{rank}", False),
            recv_from_rpc=sock(zmq.PULL, f"rpc_{rank}", True), recv_skipper=None, input_blocker=None,
            mm_receiver=None, server_args=server_args, model_config=types.SimpleNamespace(is_multimodal=False),
            max_recv_per_poll=-1, stream_output=lambda *args, **kwargs: None, get_last_batch=lambda: None)
            for rank in range(DP_SIZE)]
        self.tokenizer = sock(zmq.PUSH, "controller", False)

    def __enter__(self) -> "EngineRig":
        self._modes = contextlib.ExitStack()
        self._modes.enter_context(transport_mode(self.io, self.transport))
        self.loop = _Loop(self.controller.event_loop, self.controller.soft_watchdog)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.loop is not None:
            self.loop.stop()
        self._modes.close()
        self._free()

    def _free(self) -> None:
        for sock in self.sockets:
            sock.close(linger=0)
        self.ctx.term()
        shutil.rmtree(self.folder, ignore_errors=True)

    # -- the paths -----------------------------------------------------------------
    def send_as_tokenizer_manager(self, obj: Any) -> None:
        self.io.sock_send(self.tokenizer, obj)

    def controller_handled(self) -> Any:
        """What the controller's receive path and dispatch did with the next message: the object
        as its own code left it; an exception its dispatch raised (its event loop then ends)."""
        try:
            obj, error = self.dispatched.get(timeout=TIMEOUT_S)
        except queue.Empty:
            died = f": its event loop ended with {self.loop.error!r}" if self.loop and self.loop.error else ""
            raise ReceivePathError(f"the controller dispatched nothing within {TIMEOUT_S} s{died}") from None
        if error is not None:
            raise ReceivePathError(f"the controller's dispatch of {type(obj).__name__} raised "
                                   f"{type(error).__name__}: {error} (its event loop ends)") from error
        return obj

    def rank_received(self, rank: int, timeout_s: float = TIMEOUT_S) -> list[Any]:
        """What rank's SchedulerRequestReceiver.recv_requests handed the scheduler: the requests
        of its first non-empty poll."""
        from sglang.srt.runtime_context import get_parallel

        deadline = time.monotonic() + timeout_s
        with get_parallel().override(pp_rank=0, attn_tp_rank=0, attn_cp_rank=0):
            while time.monotonic() < deadline:
                got = self.receivers[rank].recv_requests()
                if got:
                    return list(got)
                time.sleep(0.001)
        return []

    def ranks_received(self, want: int) -> list[Any]:
        """Every request the scheduler ranks received, rank by rank, until `want` arrived."""
        got: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < want and time.monotonic() < deadline:
            for rank in range(DP_SIZE):
                got += self.rank_received(rank, timeout_s=0.01)
        return got


class OutputRig:
    """The detokenizer's receive socket with SGLang's own event loop on a thread (what its
    dispatcher is handed is recorded). The tokenizer manager's path is not driven: its batch-output
    handler opens customized info into a local it hands only to waiting request states."""

    def __init__(self, io: Any, transport: str) -> None:
        self.io, self.transport = io, transport
        self.folder = tempfile.mkdtemp(prefix="ipc-conformance-sglang-out-")
        self.ctx = zmq.Context()
        self.sockets: list[Any] = []

    def _pair(self, name: str) -> tuple[Any, Any]:
        endpoint = f"ipc://{self.folder}/{name}"
        receiver = _socket(self.ctx, zmq.PULL, endpoint, True)
        sender = _socket(self.ctx, zmq.PUSH, endpoint, False)
        self.sockets += [receiver, sender]
        return sender, receiver

    def __enter__(self) -> "OutputRig":
        self._modes = contextlib.ExitStack()
        self._modes.enter_context(transport_mode(self.io, self.transport))
        return self

    def __exit__(self, *exc: Any) -> None:
        self._modes.close()
        for sock in self.sockets:
            sock.close(linger=0)
        self.ctx.term()
        shutil.rmtree(self.folder, ignore_errors=True)

    def through_detokenizer(self, obj: Any) -> Any:
        """DetokenizerManager.event_loop: its sock_recv, then what its dispatcher was handed."""
        from sglang.srt.managers.detokenizer_manager import DetokenizerManager

        sender, receiver = self._pair("detokenizer")
        detokenizer = object.__new__(DetokenizerManager)
        detokenizer.recv_from_scheduler = receiver
        detokenizer.soft_watchdog = QuietWatchdog()
        handed: queue.Queue[Any] = queue.Queue()

        def dispatch(recv_obj: Any) -> None:  # the handlers' input; then the loop ends (its sock_recv blocks)
            handed.put(recv_obj)
            detokenizer.soft_watchdog.stopping.set()
        detokenizer._request_dispatcher = dispatch
        self.io.sock_send(sender, obj)
        loop = _Loop(detokenizer.event_loop, detokenizer.soft_watchdog)
        try:
            return handed.get(timeout=TIMEOUT_S)
        except queue.Empty:
            raise ReceivePathError(f"the detokenizer received nothing within {TIMEOUT_S} s "
                                   f"({loop.error!r})") from None
        finally:
            loop.stop()
