"""The reliability group: hostile bytes, security, load and faults (``pytest -m reliability``).

Every test here has a hard time limit (SIGALRM; TEST_TIMEOUT_S in a module overrides the
default), and every server runs in its own session and is killed with its process group
if it hangs: nothing in this group can hang CI or leave processes behind.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

DEFAULT_TIMEOUT_S = 120


class HardTimeout(Exception):
    pass


@pytest.fixture(autouse=True)
def hard_timeout(request: pytest.FixtureRequest):
    limit = int(getattr(request.module, "TEST_TIMEOUT_S", DEFAULT_TIMEOUT_S))
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: object) -> None:
        raise HardTimeout(f"{request.node.nodeid} ran over its hard limit of {limit} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for every server of the group: the first one writes the tiny checkpoint."""
    return tmp_path_factory.mktemp("reliability-model-cache")
