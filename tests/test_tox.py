"""The tox matrix has the lanes users need: one per bundled msgspec-era SGLang release (in `full`,
never in CI's `quick`), one for a cmd: testee; and its test envs install what the tests use, not
the developer's tools."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.schema.manifest import wire_manifests

ROOT = Path(__file__).resolve().parents[1]
#: the developer's tools, which no test env installs
DEV_TOOLS = ("tox", "ruff", "mypy", "build")


@pytest.fixture(scope="module")
def tox() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "tox.ini")
    return parser


def _list(value: str) -> list[str]:
    return [v.strip() for v in re.split(r"[,\n]", value) if v.strip()]


def _labels(tox: configparser.ConfigParser) -> dict[str, list[str]]:
    return {name.strip(): _list(envs) for name, _, envs in
            (line.partition("=") for line in tox["tox"]["labels"].splitlines() if "=" in line)}


def test_one_lane_per_bundled_release_in_full_never_in_ci(tox):
    releases = [m.removeprefix("sglang-") for m in wire_manifests() if m.startswith("sglang-")]
    assert releases and releases[0] == "0.5.15" and releases[-1] == "0.5.23"
    labels = _labels(tox)
    for release in releases:
        lane = tox[f"testenv:upstream-{release}"]
        assert f"sglang=={release}" in lane["commands_pre"]
        # its own expected-failure list, by path: a release without one stops at once, saying so
        assert f"sglang-{release}.txt" in lane["commands"] and "--impl sglang" in lane["commands"]
        assert f"upstream-{release}" in labels["full"] and f"upstream-{release}" in labels["releases"]
        assert f"upstream-{release}" not in labels["quick"]  # CI runs `quick`
    assert len(labels["releases"]) == len(releases)


def test_a_lane_runs_the_reference_as_a_cmd_testee(tox):
    lane = tox["testenv:py311-conformance-testee"]
    assert '--impl "cmd:python -m reference_impl.testee"' in lane["commands"]
    assert "py311-conformance-testee" in _labels(tox)["full"]


def test_test_envs_install_no_developer_tools(tox):
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=\[ ]", req)[0] for req in extras["test"]}
    assert not names & set(DEV_TOOLS), extras["test"]
    assert "ipc-conformance[test]" in extras["dev"]  # a developer has what the tests need
    for section in tox.sections():
        used = _list(tox[section].get("extras", ""))
        if section != "testenv:types":  # the type checker is the one env that runs a dev tool
            assert "dev" not in used, f"[{section}] installs the dev tools"
    assert _list(tox["testenv:types"]["extras"]) == ["serve", "dev"]


@pytest.mark.skipif(shutil.which("tox") is None and not (Path(sys.executable).parent / "tox").exists(),
                    reason="tox is not installed here (the dev extra)")
def test_tox_lists_the_lanes():
    tox = shutil.which("tox") or str(Path(sys.executable).parent / "tox")
    listed = subprocess.run([tox, "-c", str(ROOT / "tox.ini"), "-l", "-m", "full"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    envs = listed.stdout.split()
    assert "py311-conformance-testee" in envs and "upstream-0.5.19" in envs and "upstream-0.5.23" in envs
