"""ipc-conformance run: the summary line, expected-failure lists, reports."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from inprocess_pytest import run_pytest
from summary_lines import listed_line, summary

from conformance import report
from conformance.records import CheckRecord, Outcome, Results

SELECT = "AbortReq and (RoundTrip or Catalogue)"

pytest_plugins = ["pytester"]


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance.cli", "run", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    proc = run("--report-dir", str(folder), "--", "-k", SELECT)
    return proc, folder


def test_last_line_is_the_summary(clean_run):
    proc, folder = clean_run
    lines = proc.stdout.strip().splitlines()
    ran = len(json.loads((folder / "results.json").read_text())["results"])
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert ran >= 15 and lines[-1] == summary(ran, 0)
    assert lines[-2] == listed_line()


def test_report_files(clean_run):
    _, folder = clean_run
    results = json.loads((folder / "results.json").read_text())
    assert results["impl"].startswith("reference") and results["manifest"] == "sglang-0.5.23"
    assert {r["outcome"] for r in results["results"]} == {"passed"}
    markdown = (folder / "report.md").read_text()
    roundtrip = sum(r["id"].startswith("Required.RoundTrip.") for r in results["results"])
    assert f"| Required.RoundTrip | {roundtrip} |" in markdown
    assert "## Failures" not in markdown  # nothing failed: no section for it
    assert 'class="matrix"' in (folder / "report.html").read_text()
    ran = len(results["results"])
    assert json.loads((folder / "badge.json").read_text())["message"] == f"{ran}/{ran} passed"


def test_listed_check_that_passes_fails_the_run(tmp_path):
    listed = tmp_path / "expect.txt"
    listed.write_text("Required.RoundTrip.AbortReq.Identical.msgpack.typical  # not really failing\n")
    proc = run("--expectations", str(listed), "--", "-k", "AbortReq and Identical")
    assert proc.returncode != 0
    assert "is listed in" in proc.stdout and "but passed" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == summary(5, 1)


def test_fix_expectations_rewrites_the_list(tmp_path):
    listed = tmp_path / "expect.txt"
    listed.write_text("Required.RoundTrip.AbortReq.Identical.msgpack.typical  # stale\n")
    run("--expectations", str(listed), "--fix-expectations", "--", "-k", SELECT)
    assert "AbortReq" not in listed.read_text()  # the passing check left the list


RECOMMENDED = "EncodesVector and AbortReq"  # Recommended.Golden.AbortReq.EncodesVector.<3 variants>


def _testee_crashing_on(op: str, folder) -> str:
    """A real testee process (the reference one) that exits in the middle of every `op` request."""
    script = folder / f"crash_on_{op}.py"
    script.write_text("import os, sys\nfrom reference_impl import testee\n"
                      f"testee.Testee.op_{op} = lambda self, request: os._exit(3)\nsys.exit(testee.main())\n")
    return f"cmd:python {script}"


def test_testee_crash_in_a_recommended_check_fails_the_run(tmp_path):
    proc = run("--impl", _testee_crashing_on("encode", tmp_path), "--report-dir", str(tmp_path),
               "--", "-k", RECOMMENDED)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert lines[-1] == summary(0, 3), proc.stdout[-2000:]
    assert lines[-2] == listed_line()
    records = json.loads((tmp_path / "results.json").read_text())
    assert records["counts"]["failed"] == 3 and records["counts"]["recommended-failed"] == 0
    assert all(r["message"].startswith("harness error: ") and "testee closed its stdout" in r["message"]
               for r in records["results"]), records["results"]


@pytest.mark.parametrize("op, select, checks", [("receive", "NoPickleFromUntrustedPeer", 2),
                                                ("receive", "WrapperStaysClosed", 2),
                                                ("decode", "DuplicateKeyLastValue", 6)])
def test_testee_crash_in_a_check_that_allows_refusals_fails_it(op, select, checks, tmp_path):
    # Refusing the message is a right answer there; a testee that dies on it is not.
    proc = run("--impl", _testee_crashing_on(op, tmp_path), "--", "-k", select)
    assert proc.returncode == 1, proc.stdout[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last == summary(0, checks), proc.stdout[-2000:]


def test_testee_crash_cannot_be_an_expected_failure(tmp_path):
    listed = tmp_path / "expect.txt"
    listed.write_text("Required.RoundTrip.AbortReq.Identical.msgpack.typical  # listed, no message given\n")
    proc = run("--impl", "cmd:python -m reference_impl.testee --break crash", "--expectations", str(listed),
               "--", "-k", "AbortReq and Identical and msgpack.typical")
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert proc.stdout.strip().splitlines()[-2:] == [listed_line(), summary(0, 1)]
    run("--impl", "cmd:python -m reference_impl.testee --break crash", "--expectations", str(listed),
        "--fix-expectations", "--", "-k", "AbortReq and Identical and msgpack.typical")
    assert "AbortReq" not in listed.read_text()  # never written into the list either


def test_recommended_failures_have_their_own_count(tmp_path):
    testee = "cmd:python -m reference_impl.testee --break flip-byte"
    proc = run("--impl", testee, "--report-dir", str(tmp_path), "--", "-k", RECOMMENDED)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert lines[-2:] == [listed_line(recommended=3), summary(0, 0, recommended=3)]
    counts = json.loads((tmp_path / "results.json").read_text())["counts"]
    assert counts == {"passed": 0, "failed": 0, "xfailed": 0, "recommended-failed": 3, "skipped": 0,
                      "required-failed": 0, "not-tested": {}}
    phrase = summary(0, 0, recommended=3).removeprefix("conformance: ")
    assert phrase in (tmp_path / "report.md").read_text() and phrase in (tmp_path / "report.html").read_text()
    assert json.loads((tmp_path / "badge.json").read_text())["message"] == "0/3 passed, 3 recommended failed"
    strict = run("--impl", testee, "--strict", "--", "-k", RECOMMENDED)
    assert strict.returncode == 1
    assert strict.stdout.strip().splitlines()[-1] == summary(0, 3)


def test_markdown_summary_per_area_then_grouped_failures_and_badge_from_records():
    records = [
        CheckRecord("Required.RoundTrip.A.Identical.pickle.typical", Outcome.PASSED, ""),
        CheckRecord("Required.RoundTrip.A.Identical.msgpack.typical", Outcome.FAILED, "boom\nat a"),
        CheckRecord("Required.RoundTrip.B.Identical.msgpack.typical", Outcome.FAILED, "boom\nat b"),
        CheckRecord("Recommended.Security.top_level.NoPickle", Outcome.RECOMMENDED_FAILED, "rce"),
    ]
    text = report.markdown({"impl": "x", "manifest": "m", "transport": "both"}, records)
    lines = text.splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert table[2:] == ["| Required.RoundTrip | 1 | 2 |  |  |  |", "| Recommended.Security |  |  |  | 1 |  |",
                         "| **all** | 1 | 2 |  | 1 |  |"]
    assert max(len(line) for line in table) < 80  # a short table, not a column per check
    assert "## Failures (3 in 2 groups)" in text
    boom = lines.index("- **2 ×** failed: `boom`")
    assert lines[boom + 1] == "  - `Required.RoundTrip.A.Identical.msgpack.typical`, " \
                              "`Required.RoundTrip.B.Identical.msgpack.typical`"
    assert boom < lines.index("- **1 ×** recommended failed: `rce`")  # Required first
    assert report.badge(records) == {"schemaVersion": 1, "label": "ipc conformance",
                                     "message": "1/4 passed, 2 failed, 1 recommended failed", "color": "red"}
    assert report.badge(records[3:])["color"] == "orange"  # Recommended failures only


def test_compare_table_counts_each_area_per_implementation():
    a = Results(impl="a", results=[CheckRecord("Required.RoundTrip.X.I.pickle", Outcome.PASSED, ""),
                                   CheckRecord("Required.RoundTrip.X.I.msgpack", Outcome.XFAILED, "")])
    b = Results(impl="b", results=[CheckRecord("Required.RoundTrip.X.I.pickle", Outcome.PASSED, "")])
    table = report.compare([a, b])
    # the same words as the badge: a listed failure is a failure
    assert "| Required.RoundTrip | 1/2 passed, 1 failed (1 listed) | 1/1 passed |" in table
    assert "- a: 1 passed, 1 failed (1 listed), 0 recommended failed, 0 not tested" in table
    assert report.badge(list(a.results))["message"] == "1/2 passed, 1 failed (1 listed)"


def test_pytest_users_are_told_their_own_flags(tmp_path):
    # Under plain pytest the flag is --ipc-strict; `ipc-conformance run` users type --strict.
    # A subprocess: the cmd: testee it starts would outlive an in-process run (tests/inprocess_pytest.py).
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--pyargs",
                           "conformance.suite", "--ipc-impl", "cmd:python -m reference_impl.testee --break flip-byte",
                           "-k", RECOMMENDED], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert listed_line(recommended=3, flag="--ipc-strict") in proc.stdout
    assert "Recommended check failed (fails with --ipc-strict)" in proc.stdout
    assert summary(0, 0, recommended=3) in proc.stdout
    # pytest's own line counts them as the conformance lines do: their own category, no skip
    pytest_line = [line for line in proc.stdout.splitlines() if re.search(r" in [0-9.]+s", line)][-1]
    assert "3 recommended failed" in pytest_line and "skipped" not in pytest_line, proc.stdout[-2000:]


def test_one_option_table_feeds_both_front_doors(monkeypatch, pytester):
    from conformance.cli import build_parser
    from conformance.plugin import options

    monkeypatch.delenv("IPC_CONFORMANCE_TRANSPORT", raising=False)
    args = build_parser().parse_args(["run"])
    # A user's scripts keep working: the flags and defaults `run` always had.
    assert {k: v for k, v in vars(args).items() if k not in ("func", "command")} == {
        "impl": "reference", "transport": "both", "manifest": None, "expectations": None, "strict": False,
        "hypothesis_profile": None, "e2e": False, "fix_expectations": False, "report": None, "report_dir": None,
        "peer": None, "workers": None, "pytest_args": []}
    shown = run_pytest(pytester, "--help", "-p", "no:cacheprovider").stdout.str()
    for option in options.OPTIONS:
        assert (option.pytest_flag in shown) != option.hidden, option.name
    assert options.pytest_args({"impl": "x", "strict": True, "report": None, "e2e": False}) == [
        "--ipc-impl", "x", "--ipc-strict"]


def test_runner_takes_its_options_from_the_table():
    """runner.run() lists no option of its own: it takes each of the table's by dest and refuses others."""
    import inspect

    from conformance import runner
    from conformance.plugin import options

    assert set(inspect.signature(runner.run).parameters) == {"pytest_args", "workers", "chosen"}
    with pytest.raises(TypeError, match=r"unknown options \['nosuch'\].*'report_dir'"):
        runner.run(nosuch=1)
    assert {o.dest for o in options.OPTIONS if o.cli} >= {"impl", "transport", "report", "report_dir", "peer"}


def test_the_run_skips_assertion_rewriting_unless_asked(monkeypatch):
    """The checks never use a bare assert (tests/test_failure_helper.py): `ipc-conformance run`
    asks pytest for --assert=plain, so no start rewrites the suite and the plugins' modules
    (hypothesis's) again, and leaves out the unraisable-exception plugin's garbage collection at
    the end; a user's own --assert wins."""
    from conformance import runner

    seen: list[list[str]] = []
    monkeypatch.setattr(runner.pytest, "main", lambda args, plugins: seen.append(list(args)) or 0)
    runner.run(pytest_args=["-k", "AbortReq"])
    runner.run(pytest_args=["--assert=rewrite"])
    assert "--assert=plain" in seen[0] and "no:unraisableexception" in seen[0]
    assert "--assert=plain" not in seen[1] and "--assert=rewrite" in seen[1]
