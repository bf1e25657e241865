"""Optional per-process CPU profiles (``serve --profile-dir DIR``): each engine process runs
its loop under cProfile and writes ``DIR/<process>.prof`` when it stops, for
``python -m reference_tools.bench.profiles DIR`` (top costs per process)."""

from __future__ import annotations

import contextlib
import cProfile
import os
from typing import Iterator, Optional


@contextlib.contextmanager
def profiled(process: str, profile_dir: Optional[str]) -> Iterator[None]:
    """Profile the block when profile_dir is set; the file is written however the block ends."""
    if not profile_dir:
        yield
        return
    os.makedirs(profile_dir, exist_ok=True)
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        profiler.dump_stats(os.path.join(profile_dir, f"{process}.prof"))
