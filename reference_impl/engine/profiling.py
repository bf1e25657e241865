"""Optional per-process CPU profiles (``serve --profile-dir DIR``): each engine process runs
its loop under cProfile (on its thread's CPU clock) and writes ``DIR/<process>.prof`` when it stops, for
``python -m reference_tools.bench.profiles DIR`` (top costs per process)."""

from __future__ import annotations

import contextlib
import cProfile
import os
import time
from typing import Iterator, Optional


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
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        profiler.dump_stats(os.path.join(profile_dir, f"{process}.prof"))
