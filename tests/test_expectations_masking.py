"""A known defect never masks a new one: a listed check is an expected failure only when every
one of its differences is explained, and a Generated check stops drawing a listed cause's
trigger, so hypothesis finds the next defect instead of shrinking to the known one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from inprocess_pytest import run_suite, warm  # noqa: F401 - warm: the fixture the tests below use

from conformance import expectations

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHECK = "Required.RoundTrip.AbortReq.Identical.msgpack.typical"
FIRST_CAUSE = f"cause: http_worker_ipc overwritten | at $.http_worker_ipc: | {CHECK}\n"
SECOND_CAUSE = f"cause: abort_message overwritten | at $.abort_message: | {CHECK}\n"

pytest_plugins = ["pytester"]


def test_a_trigger_is_the_optional_last_part_of_a_cause_line():
    parsed = expectations.parse(
        "cause: 0-d | : ndarray shape () != (1,) | Required.Generated.* | trigger: ndarray-0d tensor-dtype:float8_*\n"
        "cause: old | re:a|b | Required.X.*\n")
    zero_d, old = parsed.causes
    assert zero_d.globs == ("Required.Generated.*",) and zero_d.triggers == ("ndarray-0d", "tensor-dtype:float8_*")
    assert old.message == "re:a|b" and old.globs == ("Required.X.*",) and old.triggers == ()  # old lines: as before
    assert parsed.get("Required.Generated.A.RoundTrip.pickle").triggers == ("ndarray-0d", "tensor-dtype:float8_*")


@pytest.mark.parametrize("trigger", ["ndarray-1d", "tensor-dtype:", ""])
def test_an_unknown_trigger_is_refused_with_its_line(trigger):
    with pytest.raises(expectations.ExpectationsError, match=r"list.txt:1: unknown trigger"):
        expectations.parse(f"cause: c | m | Required.X.* | trigger: {trigger}\n", "list.txt")


def test_every_trigger_of_the_vocabulary_changes_what_is_drawn():
    from conformance.schema.manifest import load_manifest
    from conformance.strategies import StrategyBuilder
    from reference_tools.adapter import ReferenceAdapter

    builder = StrategyBuilder(load_manifest("sglang-0.5.23"), ReferenceAdapter().classes(),
                              exclude=[t + ("*" if t.endswith(":") else "") if not t.endswith(":") else t + "bool"
                                       for t in expectations.TRIGGERS])
    assert builder.exclude == {"ndarray-0d", "tensor-0d", "ndarray-dtype:bool", "tensor-dtype:bool", "float-nan",
                               "float-inf"}
    with pytest.raises(ValueError, match="unknown triggers"):
        StrategyBuilder(builder.manifest, builder.classes, exclude=["ndarray-0D"])


def test_each_difference_must_be_explained():
    listing = expectations.parse(FIRST_CAUSE).get(CHECK)
    first = "AssertionError: AbortReq (typical) changed crossing msgpack at $.http_worker_ipc: expected 'a', got 'b'"
    second = "AssertionError: AbortReq (typical) changed crossing msgpack at $.abort_message: expected 'c', got 'd'"
    assert listing.explains(first + " (+1 more)") == "http_worker_ipc overwritten"  # the first line alone: masked
    assert listing.explains_each([first, second]) == (None, [second])
    both = expectations.parse(FIRST_CAUSE + SECOND_CAUSE).get(CHECK)
    assert both.explains_each([first, second]) == ("http_worker_ipc overwritten; abort_message overwritten", [])


def _run(pytester, impl: str, listed: str, select: str, **chosen: str) -> tuple[pytest.RunResult, dict]:
    """The suite under pytest, in this process (tests/inprocess_pytest.py)."""
    (pytester.path / "list.txt").write_text(listed)
    report = pytester.path / "r.json"
    result = run_suite(pytester, "-k", select, "-p", "no:randomly", impl=impl,
                       expectations=str(pytester.path / "list.txt"), report=str(report), **chosen)
    return result, {r["id"]: r for r in json.loads(report.read_text())["results"]}


def _cli_run(tmp_path: Path, impl: str, listed: str, select: str, *extra: str) -> tuple[subprocess.CompletedProcess,
                                                                                         dict]:
    """`ipc-conformance run` in a fresh process: for Generated checks, whose Hypothesis state (its
    modules, imported during the run, and the settings conformance.profiles keeps) must not
    outlive the run in this process."""
    (tmp_path / "list.txt").write_text(listed)
    report = tmp_path / "r.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--impl", impl, "--expectations",
                           str(tmp_path / "list.txt"), "--report", str(report), *extra, "--", "-k", select,
                           "-p", "no:randomly"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    return proc, {r["id"]: r for r in json.loads(report.read_text())["results"]}


@pytest.mark.slow
@pytest.mark.usefixtures("warm")
def test_a_second_defect_in_a_listed_check_fails_the_run(pytester):
    """PlantedTwice overwrites two AbortReq fields on decode; the list knows only the first. The
    first line names the known one (and '+1 more'): matched by the first line alone, the new
    defect would pass as expected. Judged per difference, it fails the run, named."""
    result, records = _run(pytester, "planted_adapters:PlantedTwice", FIRST_CAUSE, CHECK)
    record = records[CHECK]
    assert result.ret == 1 and record["outcome"] == "failed", result.stdout.str()[-2000:]
    first = record["message"].splitlines()[0]
    assert "at $.http_worker_ipc: " in first and "(+1 more)" in first  # the known defect comes first
    assert "1 of its 2 differences are, these are not:" in record["message"]
    unexplained = record["message"].split("these are not:")[1]
    assert "at $.abort_message: expected 'abort_message-4', got 'planted'" in unexplained
    assert "$.http_worker_ipc" not in unexplained
    result, records = _run(pytester, "planted_adapters:PlantedTwice", FIRST_CAUSE + SECOND_CAUSE, CHECK)
    assert result.ret == 0 and records[CHECK]["outcome"] == "xfailed", result.stdout.str()[-2000:]
    assert records[CHECK]["reason"] == "http_worker_ipc overwritten; abort_message overwritten"


@pytest.mark.slow
def test_a_generated_check_goes_on_searching_past_a_listed_trigger(tmp_path):
    """SGLang's listed 0-d ndarray defect, and a new one (non-finite logprobs written as nil) in
    the same messages: the Generated msgpack round trips draw no 0-d ndarray (the cause's
    trigger), so they find the new defect and fail the run; without it, both are listed ones."""
    listed = (expectations.HERE / "sglang-0.5.23.txt").read_text()
    select = "Generated and (BatchStrOutput or BatchTokenIDOutput) and RoundTrip and msgpack"
    proc, records = _cli_run(tmp_path, "planted_adapters:NonFiniteAsNil", listed, select, "--hypothesis-profile", "ci")
    failed = {i: r["message"] for i, r in records.items() if r["outcome"] == "failed"}
    assert proc.returncode == 1 and failed, proc.stdout[-3000:]
    for message in failed.values():
        first = message.splitlines()[0]
        judged = message.split("(listed in")[0]  # what failed, not what the list expected
        assert "logprobs_val" in first and "got NoneType None" in first and "ndarray shape" not in judged, message
        assert "not drawn (known defects' triggers): ndarray-0d" in message
    proc, records = _cli_run(tmp_path, "sglang_like_adapter:SGLangLike", listed, select, "--hypothesis-profile", "ci")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert {r["outcome"] for r in records.values()} <= {"xfailed", "passed"}


def test_a_generated_search_stops_only_at_what_the_verdict_would_call_listed():
    """verdicts.explained (what a Generated check's search stops at, unshrunk) judges an exception
    as the verdict judges its report: the first line, or difference by difference; a testee's
    crash is never a known failure."""
    from types import SimpleNamespace

    from conformance.plugin.verdicts import explained
    from conformance.suite.failure import Failure, raise_failure
    from conformance.testee.adapter import TesteeRuntimeError

    run = SimpleNamespace(expectations=expectations.parse(FIRST_CAUSE))

    def raised(failure: Failure) -> BaseException:
        try:
            raise_failure(failure)
        except BaseException as exc:  # noqa: BLE001 - AssertionError or pytest's Failed, as a check raises it
            return exc
        raise AssertionError("raise_failure returned")

    known = raised(Failure("AbortReq (typical) changed crossing msgpack", "R-MSG-1",
                           differences=["$.http_worker_ipc: expected 'a', got 'b'"]))
    assert explained(run, CHECK, known) == "http_worker_ipc overwritten"
    both = raised(Failure("AbortReq (typical) changed crossing msgpack", "R-MSG-1",
                          differences=["$.http_worker_ipc: expected 'a', got 'b'",
                                       "$.abort_message: expected 'c', got 'd'"]))
    assert explained(run, CHECK, both) is None  # a new defect beside the known one: shrunk as usual
    assert explained(run, "Required.RoundTrip.Other.Identical.msgpack.typical", known) is None  # not listed
    listed_any = SimpleNamespace(expectations=expectations.parse(f"{CHECK}\n"))  # any message
    assert explained(listed_any, CHECK, ValueError("boom")) == "listed in the expected-failure list"
    crash = TesteeRuntimeError("the testee exited")
    assert explained(listed_any, CHECK, crash) is None
