"""Optional per-process CPU profiles (``serve --profile-dir DIR``): each engine process runs
its loop under cProfile (on its thread's CPU clock) and writes ``DIR/<process>.prof`` when it
stops, with ``DIR/<process>.gc.json`` (its garbage collector's CPU time), for
``python -m reference_tools.bench.profiles DIR`` (top costs per process) and
``python -m reference_tools.bench.profile_accounting`` (pickle beside msgpack, per bucket)."""

from __future__ import annotations

import contextlib
import cProfile
import gc
import json
import os
import time
from typing import Any, Iterator, Optional


@contextlib.contextmanager
def profiled(process: str, profile_dir: Optional[str]) -> Iterator[None]:
    """Profile the block when profile_dir is set; the file is written however the block ends."""
    if not profile_dir:
        yield
        return
    os.makedirs(profile_dir, exist_ok=True)
    # The profiled thread's CPU clock, not the wall clock: the engine's processes share a core, and
    # on a wall clock the time a process spends descheduled lands on whatever function it was in.
    profiler = cProfile.Profile(time.thread_time)
    collector = _CollectorClock()
    gc.callbacks.append(collector)
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        gc.callbacks.remove(collector)
        profiler.dump_stats(os.path.join(profile_dir, f"{process}.prof"))
        with open(os.path.join(profile_dir, f"{process}.gc.json"), "w", encoding="utf-8") as out:
            json.dump({"seconds": collector.seconds, "collections": collector.collections}, out)


class _CollectorClock:
    """CPU seconds in the garbage collector. cProfile charges a collection to whatever function
    allocated when it began, so this says how much of the functions' own time it was."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]  # per generation
        self.collections = [0, 0, 0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.seconds[info["generation"]] += time.thread_time() - self._started
            self.collections[info["generation"]] += 1
