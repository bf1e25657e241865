"""The walkthrough's example (docs/third-party.md) works as documented."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_minimal_python_implementation_passes_with_its_expectations(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", "examples.minimal_impl.adapter:MinimalAdapter",
         "--expectations", str(ROOT / "examples/minimal_impl/expectations.txt"), "--hypothesis-profile", "ci"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900,
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, proc.stdout[-3000:]
    # Every listed deterministic check fails as listed; listed generated ones may go unmet.
    assert lines[-2].startswith("listed failures: ")
    listed_part, _, unreproduced = lines[-2].partition(", listed generated failures not reproduced: ")
    listed = int(listed_part.split(": ")[1].split(" ")[0])
    # 24 listed checks (its device strings follow SPEC R-TEN-3 now), 6 CollidingKeysNotWritten checks
    # of its colliding-keys cause, and 12 generated checks covered by the float8 cause line
    assert listed + int(unreproduced or 0) == 42
    # the run passes, and its listed failures are counted as failures all the same
    assert lines[-1].startswith("conformance: ") and f" {listed} failed ({listed} listed)," in lines[-1]


def test_the_walkthrough_counts_the_example_list_right():
    """docs/third-party.md says how many entries the example's list has: the number is the list's."""
    import re

    text = (ROOT / "docs" / "third-party.md").read_text()
    stated = re.search(r"The example's list \((\d+) entries: (\d+) check lines and (\d+) cause lines\)",
                       " ".join(text.split()))
    assert stated, "docs/third-party.md no longer counts the example's list"
    lines = [line for line in (ROOT / "examples/minimal_impl/expectations.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    causes = [line for line in lines if line.startswith("cause:")]
    assert tuple(int(n) for n in stated.groups()) == (len(lines), len(lines) - len(causes), len(causes))


def _search_draws(tmp_path: Path, listed: list[str], check_id: str) -> tuple[dict, int]:
    """Run one Generated check of the example under the ci profile with `listed` as its list: its
    record and the number of values its search drew (shrinking draws again and again)."""
    import json

    (tmp_path / "list.txt").write_text("\n".join(listed) + "\n")
    draws, report = tmp_path / "draws.jsonl", tmp_path / "r.json"
    draws.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", "examples.minimal_impl.adapter:MinimalAdapter",
         "--expectations", str(tmp_path / "list.txt"), "--hypothesis-profile", "ci", "--report", str(report),
         "--", "-k", check_id, "--ipc-record-draws", str(draws)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    record = next(r for r in json.loads(report.read_text())["results"] if r["id"] == check_id)
    return record, len(draws.read_text().splitlines())


@pytest.mark.slow
def test_a_listed_generated_failure_stops_the_search_unshrunk(tmp_path):
    """The example's float8 cause, without its trigger: the one Generated check the ci profile sees
    fail stops at that draw (at most the profile's 10 draws, no shrinking: shrinking it took
    15 s and hundreds of calls), fails as listed, and its message carries the drawn value. Listed
    as failing with another message, the same failure is no known one: it is shrunk as before."""
    check_id = "Required.Generated.BatchTokenIDOutput.RoundTrip.pickle"
    listed = [line.split(" | trigger:")[0] for line in
              (ROOT / "examples/minimal_impl/expectations.txt").read_text().splitlines()]
    record, drawn = _search_draws(tmp_path, listed, check_id)
    assert record["outcome"] == "xfailed", record
    assert "the search stopped at this listed failure, not shrunk" in record["message"]
    assert 1 <= drawn <= 10
    otherwise = [line for line in listed if not line.startswith("cause: plain pickle of float8")]
    record, shrunk = _search_draws(tmp_path, otherwise + [f"{check_id} | KeyError: not this defect"], check_id)
    assert record["outcome"] == "failed" and "not shrunk" not in record["message"], record
    assert shrunk > 10 * drawn  # hypothesis shrank it
