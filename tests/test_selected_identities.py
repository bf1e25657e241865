"""A run's records carry each check's identity (level, area, subject, name, axes: the parts of its
id, from its declaration) also where -k selects a few of the checks: the identities are attached
after the selection, to the checks that run, not to every collected one."""

from __future__ import annotations

import json
import subprocess
import sys


def test_a_selected_check_s_record_names_its_parts(tmp_path):
    report = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--report", str(report), "--",
                           "-k", "Generated and AbortReq"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads(report.read_text())["results"]
    assert len(results) == 3
    for record in results:
        parts = record["check"]
        assert record["id"] == ".".join([parts["level"], parts["area"], parts["subject"], parts["name"],
                                         *(value for _, value in parts.get("axes", []))]), record
