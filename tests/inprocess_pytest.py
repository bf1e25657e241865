"""pytest runs of the plugin inside this test process (pytester), for the project's own tests of it.

A run in a subprocess pays Python's start and the imports of torch, the reference implementation
and the suite each time; a run here pays only its own collection and checks. pytester forgets,
after each run, the modules the run imported, and some cannot be imported twice in one process
(torch registers its operators, pydantic-core refuses a second initialisation): `warm` imports
first, before pytester's snapshot, what a conformance run of the reference imports, the suite's
modules among them (their module-level caches are keyed by the manifest's bytes, and a run's own
state lives in its pytest config). `run_pytest` fails a run that leaves a process behind.

What stays a subprocess, by design: a run that starts a process (a `cmd:` testee, an E2E server:
it would outlive the run, held by an atexit hook of this process), a run of Generated checks
(Hypothesis imports modules during the run that pytester then forgets, while conformance.profiles
keeps the settings objects built from them: the next run fails with "Expected settings"), one that
reads process-wide state (which modules a fresh process imports: tests/test_plugin_inert.py), and
the console script's own front door (`ipc-conformance run`: its exit status, its last lines).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from pathlib import Path
from typing import Any

import pytest


def import_what_a_run_imports() -> None:
    # imported before the pytester runs, not used here
    import conformance.plugin.junit
    import conformance.plugin.run
    import conformance.plugin.summary
    import conformance.plugin.verdicts
    import conformance.suite
    from conformance.adapters import load_adapter

    load_adapter("reference")
    for module in pkgutil.iter_modules(conformance.suite.__path__):
        importlib.import_module(f"conformance.suite.{module.name}")


def _children() -> set[int]:
    """The ids of this process's child processes (Linux's /proc; empty elsewhere)."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        found.update(int(pid) for pid in task.read_text().split())
    return found


@pytest.fixture(scope="module")
def warm() -> None:
    """Module-scoped, so set up before the test's pytester takes its snapshot of sys.modules."""
    import_what_a_run_imports()


def run_pytest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """`pytest *args` in this process, in pytester's folder, its output captured."""
    before = _children()
    result = pytester.runpytest_inprocess(*args)
    left = _children() - before
    assert not left, f"the run left processes {sorted(left)} behind: such a run belongs in a subprocess"
    return result


def run_suite(pytester: pytest.Pytester, *pytest_args: str, **chosen: Any) -> pytest.RunResult:
    """The conformance suite under pytest in this process: `chosen` are the run's options by dest
    (impl, expectations, report, ...), given as pytest's --ipc-* flags, as `ipc-conformance run`
    gives them."""
    from conformance.plugin.options import pytest_args as ipc_args
    from conformance.runner import SUITE

    return run_pytest(pytester, str(SUITE), "-q", "-p", "no:cacheprovider", *ipc_args(chosen), *pytest_args)
