"""The engine's receive paths, driven in-process over real ZeroMQ sockets (for the conformance suite).

    rig --Sender (as the tokenizer manager)--> controller.receive --> controller.handle
            (decode, unwrap_on_receive)          (dispatch: route one rank / broadcast to all)
                                                        |--> scheduler_receiver(rank)  (decode, unwrap)
                                                        '--> AbortReq errors --> rig (as the tokenizer manager)
    rig --controller.broadcast--> scheduler_receiver(rank), every rank  (decode, unwrap)

    output rig --Sender (as a scheduler)--> detokenizer_receiver  (decode, unwrap)
    output rig --Sender (as the detokenizer)--> tokenizer_manager_receiver  (asyncio; decode, unwrap)

ReceivePathRig builds the real pieces of one engine, without its processes or its model: the
DataParallelController of controller.py (its receiver, unwrap, dispatch, broadcast and senders)
and each rank's scheduler receive path (scheduler.scheduler_receiver), bound in a private IPC
directory, with the same EngineConfig (transport, dp_size, debug_skip_unwrap) the launcher
would hand them. Nothing is simulated: the messages cross real sockets, encoded and decoded
by the engine's own code. OutputPathRig does the same for the way back: the detokenizer's
receive path and the tokenizer manager's (an asyncio socket, driven on the rig's own event
loop). Checks ``Required.ReceivePath.*`` (conformance/suite/test_receive_paths.py).
"""

from __future__ import annotations

import asyncio
import copy
import shutil
import time
from typing import Any, Optional, Sequence, TypeVar

import zmq
import zmq.asyncio

from .config import DETOKENIZER, TOKENIZER_MANAGER, EngineConfig, IpcNames, scheduler_name
from .controller import BROADCAST, DataParallelController
from .detokenizer import detokenizer_receiver
from .ipc import Receiver, Sender
from .scheduler import scheduler_receiver
from .tap import Tap, find_wrappers
from .tokenizer_manager import tokenizer_manager_receiver

DEFAULT_TIMEOUT_S = 10.0


class ReceivePathError(RuntimeError):
    """A message did not get through a receive path (dropped, refused, or answered with an error)."""


_R = TypeVar("_R", bound="_Rig")


class _Rig:
    """A context manager whose close() frees every socket, context and directory it made."""

    def __enter__(self: _R) -> _R:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError


class ReceivePathRig(_Rig):
    """One controller and dp_size scheduler receive paths; a context manager (close() frees everything)."""

    def __init__(self, transport: str, *, dp_size: int = 2, debug_skip_unwrap: Sequence[str] = (),
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.config = EngineConfig(transport=transport, dp_size=dp_size, debug_skip_unwrap=tuple(debug_skip_unwrap))
        self.timeout_ms = int(timeout_s * 1000)
        self.ipc = IpcNames.create(dp_size)
        self.ctx: Optional[zmq.Context[Any]] = zmq.Context()
        self.controller: Any = None
        self.schedulers: list[Receiver] = []
        self.errors: Any = None
        self.tokenizer: Any = None
        try:
            self.schedulers = [scheduler_receiver(self.ctx, self.config, self.ipc, rank,
                                                  Tap(None, scheduler_name(rank)))
                               for rank in range(dp_size)]
            self.errors = Receiver(self.ctx, self.ipc.tokenizer_manager, link="tokenizer_manager<-engine",
                                   transport=transport, tap=Tap(None, TOKENIZER_MANAGER))
            self.controller = DataParallelController(self.config, self.ipc)
            self.tokenizer = Sender(self.ctx, self.ipc.controller, transport)
        except BaseException:
            self.close()
            raise

    # -- the paths -----------------------------------------------------------------
    def through_controller(self, obj: Any) -> Any:
        """Send obj as the tokenizer manager does; the controller receives it (its receive path) and
        dispatches it. Returns what the receive path handed to dispatch (a snapshot: dispatch then
        stamps the time stats), after checking the dispatch reached the scheduler rank(s)."""
        self.tokenizer.send(obj)
        got = self.controller.receive(self.timeout_ms)
        if got is None:
            raise ReceivePathError(f"the controller received no {type(obj).__name__} within {self.timeout_ms} ms "
                                   "(or dropped it as undecodable: see the log)")
        handed_on = copy.deepcopy(got)
        self.controller.handle(got)
        want = len(self.schedulers) if isinstance(got, BROADCAST) else 1
        forwarded, errors = self._collect(want)
        if errors or len(forwarded) < want:
            what = (f"it answered {', '.join(_abort_message(e) for e in errors)}" if errors
                    else f"{len(forwarded)} of {want} scheduler rank(s) received it")
            left = find_wrappers(handed_on)
            leftover = f"; its receive path handed on PickleWrapper at {', '.join(left)}" if left else ""
            raise ReceivePathError(f"the controller did not dispatch {type(got).__name__}: {what}{leftover}")
        return handed_on

    def unroutable(self, obj: Any) -> Any:
        """Send obj, a request naming a rank this engine does not have, as the tokenizer manager
        does; returns what the controller answered the tokenizer manager (SPEC R-DP-5: an AbortReq
        with a finished_reason). Forwarding it, or answering nothing, is a ReceivePathError."""
        self.tokenizer.send(obj)
        got = self.controller.receive(self.timeout_ms)
        if got is None:
            raise ReceivePathError(f"the controller received no {type(obj).__name__} within {self.timeout_ms} ms "
                                   "(or dropped it as undecodable: see the log)")
        self.controller.handle(got)
        forwarded, errors = self._collect(1)
        if forwarded:
            raise ReceivePathError(f"the controller forwarded {type(got).__name__} naming routed_dp_rank "
                                   f"{got.routed_dp_rank} to a scheduler rank of {len(self.schedulers)}")
        if not errors:
            raise ReceivePathError(f"the controller answered nothing within {self.timeout_ms} ms to "
                                   f"{type(got).__name__} naming routed_dp_rank {got.routed_dp_rank}: dropped silently")
        return errors[0]

    def through_scheduler(self, obj: Any) -> list[Any]:
        """The controller broadcasts obj to every rank; returns what each rank's receive path handed on."""
        self.controller.broadcast(obj)
        got = []
        for rank, receiver in enumerate(self.schedulers):
            value = receiver.recv(timeout_ms=self.timeout_ms)
            if value is None:
                raise ReceivePathError(f"{scheduler_name(rank)} received no {type(obj).__name__} "
                                       f"within {self.timeout_ms} ms")
            got.append(value)
        return got

    def _collect(self, want: int) -> tuple[list[Any], list[Any]]:
        """Messages that reach the scheduler ranks and errors that reach the tokenizer manager, until
        `want` forwards (or an error) arrived or the timeout passed."""
        poller = zmq.Poller()
        sockets = {r.sock: r for r in (*self.schedulers, self.errors)}
        for sock in sockets:
            poller.register(sock, zmq.POLLIN)
        forwarded: list[Any] = []
        errors: list[Any] = []
        deadline = time.monotonic() + self.timeout_ms / 1000
        while len(forwarded) < want and not errors:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                break
            for sock, _ in poller.poll(left_ms):
                receiver = sockets[sock]
                value = receiver.recv(timeout_ms=0)
                if value is not None:
                    (errors if receiver is self.errors else forwarded).append(value)
        return forwarded, errors

    def close(self) -> None:
        if self.controller is not None:
            self.controller.close()  # its sockets, its context, tap, tracing
            self.controller = None
        for sock in (self.tokenizer, self.errors, *self.schedulers):
            if sock is not None:
                sock.close()
        self.tokenizer, self.errors, self.schedulers = None, None, []
        if self.ctx is not None:
            self.ctx.term()
            self.ctx = None
        shutil.rmtree(self.ipc.ipc_dir, ignore_errors=True)


class OutputPathRig(_Rig):
    """The receive paths outputs take back to the client: the detokenizer's and the tokenizer
    manager's; a context manager (close() frees everything)."""

    def __init__(self, transport: str, *, debug_skip_unwrap: Sequence[str] = (),
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.config = EngineConfig(transport=transport, dp_size=1, debug_skip_unwrap=tuple(debug_skip_unwrap))
        self.timeout_s = timeout_s
        self.ipc = IpcNames.create(1)
        self.ctx = zmq.Context()
        self.async_ctx = zmq.asyncio.Context()
        self.loop = asyncio.new_event_loop()
        self.detokenizer: Any = None
        self.tokenizer_manager: Any = None
        self.from_scheduler: Any = None
        self.from_detokenizer: Any = None
        try:
            self.detokenizer = detokenizer_receiver(self.ctx, self.config, self.ipc, Tap(None, DETOKENIZER))
            self.tokenizer_manager = tokenizer_manager_receiver(self.async_ctx, self.config, self.ipc,
                                                                Tap(None, TOKENIZER_MANAGER))
            # What a scheduler and the detokenizer send with (scheduler.py, detokenizer.py).
            self.from_scheduler = Sender(self.ctx, self.ipc.detokenizer, transport)
            self.from_detokenizer = Sender(self.ctx, self.ipc.tokenizer_manager, transport)
        except BaseException:
            self.close()
            raise

    def through_detokenizer(self, obj: Any) -> Any:
        """Send obj as a scheduler rank does; returns what the detokenizer's receive path hands on."""
        self.from_scheduler.send(obj)
        got = self.detokenizer.recv(timeout_ms=int(self.timeout_s * 1000))
        if got is None:
            raise ReceivePathError(f"the detokenizer received no {type(obj).__name__} within {self.timeout_s} s")
        return got

    def through_tokenizer_manager(self, obj: Any) -> Any:
        """Send obj as the detokenizer does; returns what the tokenizer manager's receive path hands on."""
        self.from_detokenizer.send(obj)
        try:
            return self.loop.run_until_complete(asyncio.wait_for(self.tokenizer_manager.recv(), self.timeout_s))
        except asyncio.TimeoutError:
            raise ReceivePathError(f"the tokenizer manager received no {type(obj).__name__} "
                                   f"within {self.timeout_s} s") from None

    def close(self) -> None:
        for sock in (self.detokenizer, self.tokenizer_manager, self.from_scheduler, self.from_detokenizer):
            if sock is not None:
                sock.close()
        self.detokenizer = self.tokenizer_manager = self.from_scheduler = self.from_detokenizer = None
        for ctx in (self.ctx, self.async_ctx):
            ctx.term()
        self.loop.close()
        shutil.rmtree(self.ipc.ipc_dir, ignore_errors=True)


def _abort_message(obj: Any) -> str:
    reason = getattr(obj, "finished_reason", None)
    message = reason.get("message") if isinstance(reason, dict) else None
    return f"{type(obj).__name__}({message or obj!r})"
