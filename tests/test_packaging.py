"""The wheel carries the whole suite: spec/ and golden/ data, entry points, both packages."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True, capture_output=True,
    )
    (found,) = out.glob("ipc_conformance-*.whl")
    return found


def test_wheel_contains_data_and_entry_points(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "conformance/_data/spec/manifests/sglang-0.5.23.json" in names
    assert any(n.startswith("conformance/_data/golden/") for n in names)
    assert "reference_impl/io_struct.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "ipc-conformance = conformance.cli:main" in text
    assert "ipc_conformance = conformance.plugin" in text


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """A fresh venv holding only the wheel; its dependencies come from this environment."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.create(env_dir, with_pip=True)
    subprocess.run([env_dir / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    paths = sysconfig.get_paths()
    env = {**os.environ, "PYTHONPATH": paths["purelib"] + os.pathsep + paths["platlib"],
           "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    return env_dir, env


def test_fresh_venv_loads_the_manifest_from_the_installed_package(installed, tmp_path):
    env_dir, env = installed
    python = env_dir / "bin" / "python"
    code = (
        "import conformance, reference_impl.codec as c; from conformance.schema.manifest import load_manifest;"
        "m = load_manifest('sglang-0.5.23'); print(conformance.__file__); print(len(m.messages));"
        "print(c.decode(c.encode(m.id)))"
    )
    out = subprocess.run([python, "-c", code], cwd=tmp_path, env=env, check=True, capture_output=True, text=True)
    location, count, echoed = out.stdout.split()
    assert location.startswith(str(env_dir)), f"imported from {location}, not the installed wheel"
    assert count == "101" and echoed == "sglang-0.5.23"


@pytest.mark.parametrize("impl", ["reference", "cmd:python -m reference_impl.testee"])
def test_installed_suite_runs_outside_the_source_tree(installed, tmp_path, impl):
    """Entry points and data files ship: the console script, the pytest plugin, the
    suite, the golden vectors, and the testee, all from the wheel alone."""
    env_dir, env = installed
    proc = subprocess.run(
        [env_dir / "bin" / "ipc-conformance", "run", "--impl", impl, "--", "-k", "AbortReq"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("conformance: ") and " 0 failed" in last
    assert int(last.split()[1]) > 20  # golden, round trip, socket... checks of AbortReq ran
