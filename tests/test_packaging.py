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


def test_fresh_venv_loads_the_manifest_from_the_installed_package(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    # Dependencies come from this environment; the package itself only from the fresh venv.
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"] + os.pathsep + sysconfig.get_paths()["platlib"]}
    code = (
        "import conformance, reference_impl.codec as c; from conformance.manifest import load_manifest;"
        "m = load_manifest('sglang-0.5.23'); print(conformance.__file__); print(len(m.messages));"
        "print(c.decode(c.encode(m.id)))"
    )
    out = subprocess.run([python, "-c", code], cwd=tmp_path, env=env, check=True, capture_output=True, text=True)
    location, count, echoed = out.stdout.split()
    assert location.startswith(str(env_dir)), f"imported from {location}, not the installed wheel"
    assert count == "101" and echoed == "sglang-0.5.23"
