"""pytest's --junitxml through `ipc-conformance run`: one testcase per check, named by its check id.

CI dashboards (GitLab, Jenkins, GitHub test reporters) group testcases by classname and show
the name: the file must say Level.Area and the check id, the same ids as results.json, also
when the checks ran on pytest-xdist workers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _run(tmp: Path, impl: str, *extra: str) -> tuple[dict[str, ET.Element], dict[str, str]]:
    xml, report = tmp / "junit.xml", tmp / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", impl, "--transport", "msgpack",
         "--report", str(report), *extra, "--", "-k", "Primitive", "--junitxml", str(xml)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "tests")}, capture_output=True, text=True,
        timeout=600)
    assert xml.is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    cases = {c.get("name"): c for c in ET.parse(xml).iter("testcase")}
    outcomes = {r["id"]: r["outcome"] for r in json.loads(report.read_text())["results"]}
    return cases, outcomes


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_testcases_are_named_by_check_id(tmp_path, workers):
    cases, outcomes = _run(tmp_path, "defective_adapters:NoTopLevelStr", *workers)
    assert set(cases) == set(outcomes)  # one testcase per check, the same ids as results.json
    for check_id, case in cases.items():
        assert case.get("classname") == ".".join(check_id.split(".")[:2])
        failed = case.find("failure") is not None or case.find("error") is not None
        assert failed == (outcomes[check_id] == "failed"), check_id
    assert any(o == "failed" for o in outcomes.values())  # the defect shows up as a failing testcase
