"""The pytest plugin costs other projects nothing: installed, it loads into every pytest run
of the environment, and until a conformance run is asked for it imports nothing heavy and
starts no run.

The first test needs a fresh process (which modules it imports); the others run pytest in this
one (tests/inprocess_pytest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from inprocess_pytest import run_pytest, warm  # noqa: F401 - warm: the fixture the tests below use
from summary_lines import summary

pytest_plugins = ["pytester"]

# What a conformance run needs and an unrelated project must not pay for.
HEAVY = ("torch", "hypothesis", "msgspec", "numpy", "zmq", "conformance.session", "conformance.suite",
         "conformance.adapters", "reference_impl")

PROBE = '''
import json, sys

def test_one(pytestconfig):
    from conformance.plugin.hooks import RUN_KEY
    json.dump({"modules": sorted(sys.modules),
               "loaded": pytestconfig.pluginmanager.has_plugin("ipc_conformance"),
               "run": pytestconfig.stash.get(RUN_KEY, None) is not None}, open("seen.json", "w"))
'''


def _pytest_in(project: Path, *args: str) -> dict:
    (project / "test_one.py").write_text(PROBE)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=project,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads((project / "seen.json").read_text())


def _pytest_here(pytester, *args: str) -> dict:
    pytester.makepyfile(test_one=PROBE)
    result = run_pytest(pytester, "-q", "-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.stdout.str()[-2000:]
    return json.loads((pytester.path / "seen.json").read_text())


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_an_unrelated_project_pays_nothing(tmp_path):
    seen = _pytest_in(tmp_path)
    assert seen["loaded"], "the entry point was not loaded: this test would prove nothing"
    assert _heavy(seen["modules"]) == []
    assert not seen["run"]


@pytest.mark.usefixtures("warm")
def test_ipc_impl_asks_for_a_run(pytester):
    seen = _pytest_here(pytester, "--ipc-impl", "reference")
    assert seen["loaded"] and seen["run"]


@pytest.mark.usefixtures("warm")
def test_a_suite_module_that_cannot_be_imported_starts_a_failing_run(pytester):
    # No check of it is collected, yet the run must count it (Required.Harness.Collection.Collects).
    suite = pytester.path / "conformance" / "suite"
    suite.mkdir(parents=True)
    (suite / "test_broken.py").write_text("import no_such_module_anywhere\n")
    pytester.makepyfile(test_mine="import no_such_module_either\n")  # a user's: no run for it
    result = run_pytest(pytester, "-q", "-p", "no:cacheprovider", "test_mine.py")
    assert result.ret != 0 and "conformance:" not in result.stdout.str(), result.stdout.str()[-2000:]
    result = run_pytest(pytester, "-q", "-p", "no:cacheprovider", "conformance/suite")
    assert result.ret != 0
    assert summary(0, 1) in result.stdout.str(), result.stdout.str()[-2000:]
