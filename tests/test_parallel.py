"""ipc-conformance run -n 2 (pytest-xdist workers) gives what a serial run gives: the same
records, report files and summary lines; expected-failure bookkeeping holds across workers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

SLICE = "AbortReq and (Catalogue or Golden)"
# A real testee whose msgpack and pickle encoders drop a field: the typical AbortReq fails to
# round-trip under both transports, the minimal and edge variants still pass.
BROKEN = "cmd:python -m reference_impl.testee --break drop-field"
BROKEN_SLICE = "AbortReq and Identical"
LISTED_FAILING = "Required.RoundTrip.AbortReq.Identical.msgpack.typical"
UNLISTED_FAILING = "Required.RoundTrip.AbortReq.Identical.pickle.typical"
LISTED_PASSING = "Required.RoundTrip.AbortReq.Identical.msgpack.edge"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance.cli", "run", *args], capture_output=True,
                          text=True, timeout=600)


def _outcomes(folder: Path) -> dict[str, str]:
    return {r["id"]: r["outcome"] for r in json.loads((folder / "results.json").read_text())["results"]}


def _both(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    serial = run("--report-dir", str(tmp_path / "serial"), *args)
    parallel = run("-n", "2", "--report-dir", str(tmp_path / "parallel"), *args)
    return serial, parallel


def _undated(path: Path) -> str:
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\dZ", "DATE", path.read_text())  # each run records its date


@pytest.mark.slow
def test_parallel_run_gives_the_serial_results(tmp_path):
    serial, parallel = _both(tmp_path, "--", "-k", SLICE)
    assert serial.returncode == parallel.returncode == 0, parallel.stdout[-2000:] + parallel.stderr[-2000:]
    assert serial.stdout.splitlines()[-2:] == parallel.stdout.splitlines()[-2:]
    for name in ("results.json", "report.md", "report.html", "badge.json"):
        assert _undated(tmp_path / "serial" / name) == _undated(tmp_path / "parallel" / name), name
    assert len(_outcomes(tmp_path / "parallel")) >= 10


@pytest.mark.slow
def test_expected_failures_hold_across_workers(tmp_path):
    listed = tmp_path / "expect.txt"
    listed.write_text(f"{LISTED_FAILING} | AssertionError: AbortReq (typical) changed  # the testee drops a field\n"
                      f"{LISTED_PASSING}  # listed, but it passes\n")
    serial, parallel = _both(tmp_path, "--impl", BROKEN, "--expectations", str(listed), "--", "-k", BROKEN_SLICE)
    for proc in (serial, parallel):
        assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert proc.stdout.strip().splitlines()[-2:] == ["expected failures: 1",
                                                         "conformance: 3 passed, 2 failed, 0 skipped"]
        assert f"{LISTED_PASSING} is listed in {listed} but passed" in proc.stdout
    outcomes = _outcomes(tmp_path / "parallel")
    assert outcomes == _outcomes(tmp_path / "serial")
    assert (outcomes[LISTED_FAILING], outcomes[UNLISTED_FAILING], outcomes[LISTED_PASSING]) == \
        ("xfailed", "failed", "failed")

    fixed = run("-n", "2", "--impl", BROKEN, "--expectations", str(listed), "--fix-expectations",
                "--", "-k", BROKEN_SLICE)
    assert fixed.returncode == 1, fixed.stdout[-2000:]
    lines = [line.split()[0] for line in listed.read_text().splitlines() if not line.startswith("#")]
    assert lines == [LISTED_FAILING, UNLISTED_FAILING]  # the passing check left, the new failure came in


def test_e2e_checks_are_one_unit_of_work():
    # One worker runs them all: the session-scoped server per transport starts once per run.
    from conformance.plugin.parallel import group_of

    e2e = ["conformance/suite/test_e2e.py::test_e2e_serves_scenario[Required.E2E.pickle.ServesScenario]",
           "conformance/suite/test_e2e.py::test_e2e_shuts_down_cleanly[Required.E2E.msgpack.ShutsDownCleanly]"]
    other = "conformance/suite/test_catalogue.py::test_x[Required.Catalogue.AbortReq.MatchesManifest]"
    assert group_of(e2e[0]) == group_of(e2e[1]) != group_of(other) == other


def test_traced_chain_checks_of_one_transport_are_one_unit_of_work():
    from conformance.plugin.parallel import group_of

    def node(hop: str, transport: str) -> str:
        return (f"conformance/suite/test_trace.py::test_one_linked_trace"
                f"[Required.Trace.{hop}.OneLinkedTrace.{transport}]")

    assert group_of(node("Controller", "msgpack")) == group_of(node("Scheduler", "msgpack"))
    assert group_of(node("Controller", "msgpack")) != group_of(node("Controller", "pickle"))
    forwarding = "conformance/suite/test_unwrap.py::t[Required.Trace.AbortReq.ContextSurvivesForwarding.msgpack]"
    assert group_of(forwarding) == forwarding
