"""A pytest plugin that interrupts a run at its third test, as Ctrl-C would (tests/test_bad_input.py)."""

from __future__ import annotations

from typing import Any

_seen = [0]


def pytest_runtest_setup(item: Any) -> None:
    _seen[0] += 1
    if _seen[0] == 3:
        raise KeyboardInterrupt
