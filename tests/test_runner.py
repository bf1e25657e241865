"""ipc-conformance run: the summary line, expected-failure lists, reports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conformance import report

SELECT = "AbortReq and (RoundTrip or Catalogue)"


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance.cli", "run", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    proc = run("--report-dir", str(folder), "--", "-k", SELECT)
    return proc, folder


def test_last_line_is_the_summary(clean_run):
    proc, _ = clean_run
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert lines[-1] == "conformance: 15 passed, 0 failed, 0 skipped"
    assert lines[-2] == "expected failures: 0"


def test_report_files(clean_run):
    _, folder = clean_run
    results = json.loads((folder / "results.json").read_text())
    assert results["impl"].startswith("reference") and results["manifest"] == "sglang-0.5.23"
    assert {r["outcome"] for r in results["results"]} == {"passed"}
    assert "| AbortReq |" in (folder / "report.md").read_text()
    assert "<table>" in (folder / "report.html").read_text()
    assert json.loads((folder / "badge.json").read_text())["message"] == "15/15"


def test_listed_check_that_passes_fails_the_run(tmp_path):
    listed = tmp_path / "expect.txt"
    listed.write_text("Required.RoundTrip.AbortReq.Identical.msgpack.typical  # not really failing\n")
    proc = run("--expectations", str(listed), "--", "-k", SELECT)
    assert proc.returncode != 0
    assert "is listed in" in proc.stdout and "but passed" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "conformance: 14 passed, 1 failed, 0 skipped"


def test_fix_expectations_rewrites_the_list(tmp_path):
    listed = tmp_path / "expect.txt"
    listed.write_text("Required.RoundTrip.AbortReq.Identical.msgpack.typical  # stale\n")
    run("--expectations", str(listed), "--fix-expectations", "--", "-k", SELECT)
    assert "AbortReq" not in listed.read_text()  # the passing check left the list


def test_markdown_table_and_badge_from_records():
    records = [
        {"id": "Required.RoundTrip.A.Identical.pickle.typical", "outcome": "passed"},
        {"id": "Required.RoundTrip.A.Identical.msgpack.typical", "outcome": "failed", "message": "boom"},
        {"id": "Recommended.Security.top_level.NoPickle", "outcome": "recommended-failed", "message": "rce"},
    ]
    text = report.markdown({"impl": "x", "manifest": "m", "transport": "both"}, records)
    assert "| A | ✗ msgpack.typical |" in text
    assert "`Required.RoundTrip.A.Identical.msgpack.typical` (failed): boom" in text
    assert report.badge(records) == {"schemaVersion": 1, "label": "ipc conformance", "message": "2/3", "color": "red"}


def test_compare_table_counts_each_area_per_implementation():
    a = {"impl": "a", "results": [{"id": "Required.RoundTrip.X.I.pickle", "outcome": "passed"},
                                  {"id": "Required.RoundTrip.X.I.msgpack", "outcome": "xfailed"}]}
    b = {"impl": "b", "results": [{"id": "Required.RoundTrip.X.I.pickle", "outcome": "passed"}]}
    table = report.compare([a, b])
    assert "| Required.RoundTrip | 1/2 (1 failing) | 1/1 |" in table
