"""Start and stop the whole server: child processes, then the HTTP server with the tokenizer manager.

    launch_server(config)
      1. resolve the config (transport, device, default tiny checkpoint)
      2. make the private IPC directory (0700) and start (multiprocessing "spawn", or "forkserver"):
         controller, scheduler_0..N-1, detokenizer; wait until each reports ready
      3. run uvicorn with the FastAPI app; the tokenizer manager starts in its lifespan
      4. on SIGINT / SIGTERM (or any exit): stop the tokenizer manager, terminate and
         join every child (kill after a grace period), remove the IPC directory
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import shutil
import signal
import time
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Optional, cast

from .config import CONTROLLER, DETOKENIZER, TOKENIZER_MANAGER, EngineConfig, IpcNames, scheduler_name
from .profiling import profiled
from .runtime import freeze_startup_heap, setup_logging

logger = logging.getLogger(__name__)

TERMINATE_GRACE_S = 5.0


class EngineStartupError(RuntimeError):
    pass


class EngineFailure(RuntimeError):
    """The server shut itself down because an engine process died (exit_on_child_death)."""


# exit_on_child_death: after the waiting requests got their 503, the server keeps answering
# (/health 503) this long before it shuts down, so clients and probes see why.
EXIT_LINGER_S = 1.0


class EngineProcesses:
    """The child processes of one server and their IPC directory. shutdown() is idempotent."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.ipc: Optional[IpcNames] = None
        self.children: list[tuple[str, Any]] = []  # (name, multiprocessing.Process)
        self._down = False

    def start(self) -> "EngineProcesses":
        """Spawn every child; they load in parallel (call wait_ready() next)."""
        from .controller import run_controller_process
        from .detokenizer import run_detokenizer_process
        from .scheduler import run_scheduler_process

        cfg = self.config
        self.ipc = IpcNames.create(cfg.dp_size)
        ctx: Any = multiprocessing.get_context(cfg.start_method)  # spawn or forkserver: both make Processes
        if cfg.start_method == "forkserver":  # one interpreter imports the engine (and torch); children fork from it
            ctx.set_forkserver_preload([f"reference_impl.engine.{m}"
                                        for m in ("controller", "scheduler", "detokenizer")])
        plan: list[tuple[str, Callable[..., None], tuple[int, ...]]] = [(CONTROLLER, run_controller_process, ())]
        plan += [(scheduler_name(r), run_scheduler_process, (r,)) for r in range(cfg.dp_size)]
        plan += [(DETOKENIZER, run_detokenizer_process, ())]
        readers: dict[Connection, tuple[str, Any]] = {}
        for name, target, extra in plan:
            reader, writer = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=target, args=(cfg, self.ipc, *extra, writer), name=name, daemon=True)
            proc.start()
            writer.close()
            self.children.append((name, proc))
            readers[reader] = (name, proc)
        self._readers = readers
        return self

    def wait_ready(self) -> "EngineProcesses":
        """Block until every child reported ready (or raise EngineStartupError naming the one that did not)."""
        self._wait_ready(self._readers)
        logger.info("engine processes ready: %s", ", ".join(f"{n} (pid {p.pid})" for n, p in self.children))
        return self

    def _wait_ready(self, readers: dict[Connection, tuple[str, Any]]) -> None:
        deadline = time.monotonic() + self.config.startup_timeout_s
        pending = dict(readers)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise EngineStartupError(f"not ready within {self.config.startup_timeout_s:.0f} s: "
                                         f"{', '.join(n for n, _ in pending.values())}")
            # wait() hands back the very Connections it was given (typed as any waitable).
            for reader in cast("list[Connection]", wait(list(pending), timeout=min(left, 1.0))):
                name, proc = pending.pop(reader)
                try:
                    msg = reader.recv()
                except EOFError:
                    raise EngineStartupError(f"{name} exited during startup (exit code {proc.exitcode})") from None
                if msg.get("status") != "ready":
                    raise EngineStartupError(f"{name} failed to start:\n{msg.get('error')}")
            for reader, (name, proc) in list(pending.items()):
                if not proc.is_alive() and not reader.poll():
                    raise EngineStartupError(f"{name} exited during startup (exit code {proc.exitcode})")

    def shutdown(self) -> None:
        if self._down:
            return
        self._down = True
        for _, proc in self.children:
            if proc.is_alive():
                proc.terminate()
        deadline = time.monotonic() + TERMINATE_GRACE_S
        for name, proc in self.children:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                logger.warning("%s (pid %d) ignored SIGTERM; killing it", name, proc.pid)
                proc.kill()
                proc.join(5)
        if self.ipc is not None:
            shutil.rmtree(self.ipc.ipc_dir, ignore_errors=True)
        logger.info("engine processes stopped; IPC directory removed")


class _Terminated(SystemExit):
    pass


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated(0)


def launch_server(config: EngineConfig) -> None:
    """Run the server in this process until SIGINT / SIGTERM; always leaves no child and no socket file."""
    import torch
    import uvicorn

    setup_logging(TOKENIZER_MANAGER, config.log_level)
    config = config.resolved()
    torch.set_num_threads(config.threads_per_process)
    logger.info("starting: model=%s dp_size=%d device=%s; IPC transport: %s (pid %d)", config.model_path,
                config.dp_size, config.device, config.transport, os.getpid())
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    engine = EngineProcesses(config)
    try:
        engine.start()
        from .http_api import HTTPServer, build_app  # imported while the children load
        from .tokenizer_manager import TokenizerManager

        engine.wait_ready()
        died: list[str] = []
        server: Any = None

        def on_child_death(dead: list[str]) -> None:
            died.extend(dead)
            if config.exit_on_child_death and server is not None:
                logger.error("exit_on_child_death: shutting down in %.1f s", EXIT_LINGER_S)
                asyncio.get_running_loop().call_later(EXIT_LINGER_S, setattr, server, "should_exit", True)

        assert engine.ipc is not None  # start() made it
        tm = TokenizerManager(config, engine.ipc, engine.children, on_child_death=on_child_death)
        app = build_app(tm, on_shutdown=engine.shutdown, max_body_bytes=config.max_request_bytes)
        server = HTTPServer(uvicorn.Config(app, host=config.host, port=config.port, log_config=None,
                                           log_level=config.log_level, access_log=config.log_level == "debug",
                                           timeout_graceful_shutdown=3, lifespan="on"),
                            on_shutdown_start=tm.begin_stopping)
        freeze_startup_heap()
        with profiled(TOKENIZER_MANAGER, config.profile_dir):
            server.run()  # handles SIGINT/SIGTERM itself, then re-raises the signal (caught here)
        if died and config.exit_on_child_death:
            raise EngineFailure(f"engine process died: {'; '.join(died)}; server shut down")
    except (KeyboardInterrupt, _Terminated):
        logger.info("signal received; stopped")
    finally:
        engine.shutdown()
        signal.signal(signal.SIGTERM, previous)
