"""What every engine process does first: logging, signals, threads, an orphan guard.

Children ignore SIGINT (the launcher owns shutdown and terminates them) and turn
SIGTERM into SystemExit so their loops unwind and close sockets. A watchdog
thread exits the child, and removes the IPC directory, if the launcher dies
without cleaning up (e.g. SIGKILL): no orphans, no leftover socket files.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable

from .config import EngineConfig, IpcNames
from .profiling import profiled

LOG_FORMAT = "%(asctime)s [%(process_label)s] %(levelname)s %(name)s: %(message)s"


class _LabelFilter(logging.Filter):
    def __init__(self, label: str) -> None:
        super().__init__()
        self.label = label

    def filter(self, record: logging.LogRecord) -> bool:
        record.process_label = self.label
        return True


def setup_logging(process: str, level: str) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_LabelFilter(process))
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)
    root.setLevel(level.upper())


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def _watch_parent(ipc_dir: str) -> None:
    parent = os.getppid()
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:  # reparented: the launcher is gone
            shutil.rmtree(ipc_dir, ignore_errors=True)
            os._exit(1)


def setup_child(process: str, config: EngineConfig, ipc: IpcNames) -> None:
    import torch

    setup_logging(process, config.log_level)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _terminate)
    torch.set_num_threads(config.threads_per_process)
    threading.Thread(target=_watch_parent, args=(ipc.ipc_dir,), name="parent-watch", daemon=True).start()
    logging.getLogger(__name__).info("%s (pid %d) started; IPC transport: %s", process, os.getpid(), config.transport)


def freeze_startup_heap() -> None:
    """Move everything built at start-up (modules, torch, the model, FastAPI's schemas) out of
    the garbage collector's reach: it lives as long as the process, yet every full collection
    walked it again. Measured at the seed's c=1024 streams (2048 requests, profiled): the
    detokenizer's full collections 1.18 -> 0.02 s of CPU, the scheduler's 0.36 -> 0.12 s. What
    requests allocate is still collected."""
    gc.collect()
    gc.freeze()


def run_child(process: str, config: EngineConfig, ipc: IpcNames, ready: Connection,
              build: Callable[[], Any]) -> None:
    """Set up, build the process's object, report ready (or the error), run its loop."""
    setup_child(process, config, ipc)
    try:
        worker = build()
    except BaseException:
        ready.send({"status": "error", "process": process, "error": traceback.format_exc()})
        raise
    freeze_startup_heap()
    ready.send({"status": "ready", "process": process, "pid": os.getpid(), "transport": config.transport})
    ready.close()
    code = 0
    try:
        with profiled(process, config.profile_dir):
            worker.event_loop()
    except SystemExit:
        pass
    except BaseException:
        logging.getLogger(__name__).exception("%s crashed", process)
        code = 1
    finally:
        worker.close()
    fast_exit(code)


def fast_exit(code: int) -> None:
    """Exit without interpreter finalization (about a second with torch loaded): sockets are
    closed and the tap and span files flushed already."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
