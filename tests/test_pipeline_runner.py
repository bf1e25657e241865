"""conformance/pipeline_runner.py: a pipeline process that hangs is killed after its bound and
reported naming the run; one that dies or leaves runs unrecorded is reported the same way; its
checks fail on it, never hang."""

from __future__ import annotations

import time

from conformance.pipeline import TOPOLOGIES, liveness_failures
from conformance.pipeline_runner import run_module

MODULE = "tests.fixtures.pipeline_modules"


def _run(mode, tmp_path, topologies=TOPOLOGIES[:1], timeout_s=3.0):
    return run_module(MODULE, "msgpack", topologies, tmp_path, env={"PIPELINE_FIXTURE_MODE": mode},
                      timeout_s=timeout_s)


def test_a_hung_process_is_killed_after_its_bound_and_named(tmp_path):
    started = time.monotonic()
    (run,) = _run("hang", tmp_path)
    assert time.monotonic() - started < 20
    assert run.errors == [f"the dp1 run over msgpack: the process killed after 3 s (a hop hung; log: "
                          f"{tmp_path / 'log.txt'})"]
    assert liveness_failures(run)[0].startswith("died: the dp1 run over msgpack: the process killed after 3 s")


def test_a_process_that_dies_is_reported_with_its_last_line(tmp_path):
    (run,) = _run("crash", tmp_path)
    (error,) = run.errors
    assert error.startswith("the dp1 run over msgpack: the process ended (exit 1) before this run: "
                            "RuntimeError: the controller could not bind its socket")


def test_runs_recorded_before_a_hang_are_kept(tmp_path):
    first, second = _run("first-only", tmp_path, topologies=TOPOLOGIES[:2], timeout_s=2.0)
    assert first.errors == [] and first.selected == "msgpack" and "plain" in first.responses
    assert second.errors[0].startswith(f"the {TOPOLOGIES[1].name} run over msgpack: the process killed after 4 s")
