"""The lean install, as a user gets it: the built wheel in a fresh venv whose dependencies hold no
torch (torch comes with the `reference` extra). There `schema check --source` reads an SGLang-like
git checkout (no version file), a `cmd:` testee is smoked and run, `run` against the reference is
refused in one line naming the extra, and torch is never imported.

The fresh venv gets its dependencies from this environment (every installed distribution but torch
and this package, through a .pth file), so the test needs no network; `pip check` then proves the
wheel's requirements are met without torch, and the wheel's metadata that pip would never resolve
torch for it."""

from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import venv
import zipfile
from pathlib import Path

import pytest
from sglang_checkout import RELEASE, make_checkout

ROOT = Path(__file__).resolve().parents[1]
#: What the fresh venv must not see of this environment: torch (and what only it needs), this package.
_LEFT_OUT = ("torch", "functorch", "torchgen", "nvidia", "triton", "ipc_conformance", "conformance", "reference_impl",
             "reference_tools", "_editable_impl", "__editable__", "__pycache__", "distutils-precedence.pth",
             "_distutils_hack", "pip", "setuptools")

# Loaded first by the fresh venv's interpreter: at exit it says whether torch got into sys.modules.
_REPORTER = '''
import atexit, os, sys
if os.environ.get("TORCH_REPORT"):
    atexit.register(lambda: open(os.environ["TORCH_REPORT"], "a").write(
        ("imported" if "torch" in sys.modules else "never imported") + "\\n"))
'''

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("git") is None, reason="needs git")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # pip builds it, as tests/test_packaging.py does: the test extra has hatchling, not build.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(out),
                    str(ROOT)], check=True, capture_output=True)
    (found,) = out.glob("ipc_conformance-*.whl")
    return found


@pytest.fixture(scope="module")
def lean(wheel, tmp_path_factory):
    """(venv dir, env, torch report file): the wheel alone, no pip, deps from here but torch."""
    root = tmp_path_factory.mktemp("lean")
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True)
    purelib = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    farm = root / "deps"
    farm.mkdir()
    here = {Path(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
    for site in here:
        for entry in site.iterdir():
            if not entry.name.startswith(_LEFT_OUT) and not (farm / entry.name).exists():
                (farm / entry.name).symlink_to(entry)
    (purelib / "zz_deps.pth").write_text(f"{farm}\n")
    (purelib / "sitecustomize.py").write_text(_REPORTER)
    report = root / "torch-report"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(TORCH_REPORT=str(report), PATH=f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}")
    return env_dir, env, report


def _run(lean, *args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env_dir, env, report = lean
    report.unlink(missing_ok=True)
    proc = subprocess.run([env_dir / "bin" / "ipc-conformance", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    said = report.read_text().splitlines()  # one line per Python process of the lean venv
    assert said and set(said) == {"never imported"}, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def test_the_wheel_requires_torch_only_in_extras(wheel):
    archive = zipfile.ZipFile(wheel)
    meta = email.message_from_bytes(archive.read(next(n for n in archive.namelist()
                                                      if n.endswith(".dist-info/METADATA"))))
    torch = [r.replace("'", '"') for r in meta.get_all("Requires-Dist") if re.match(r"torch\b", r)]
    assert torch and all(re.search(r'; extra == "(reference|serve)"$', r) for r in torch), torch


def test_the_lean_venv_has_its_dependencies_and_no_torch(lean, tmp_path):
    env_dir, env, _ = lean
    python = env_dir / "bin" / "python"
    check = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "check"], env=env,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    proc = subprocess.run([python, "-c", "import torch"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1 and "No module named 'torch'" in proc.stderr
    proc = subprocess.run([python, "-c", "import conformance; print(conformance.__file__)"], env=env,
                          capture_output=True, text=True, cwd=tmp_path, check=True)
    assert proc.stdout.startswith(str(env_dir)), proc.stdout


def test_schema_check_on_a_git_checkout_without_torch(lean, tmp_path):
    repo = make_checkout(tmp_path / "sglang")
    started = time.monotonic()
    proc = _run(lean, "schema", "check", "--source", ".", cwd=repo)
    took = time.monotonic() - started
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    header = proc.stdout.splitlines()[0]
    assert header.startswith(f"schema check {RELEASE} -> sglang-0.5.24.dev1+g"), proc.stdout[-3000:]
    assert proc.returncode == 1, proc.stdout[-3000:]  # a removed message is breaking for the peer that sends it
    print(f"schema check --source on a git checkout without torch: {took:.1f} s")


def test_a_cmd_testee_without_torch(lean, tmp_path):
    """The testee is any program (here the reference's, run by this environment's Python, which
    has torch): the runner itself never imports torch."""
    testee = f"cmd:{sys.executable} -m reference_impl.testee --transports msgpack"
    proc = _run(lean, "smoke", "--impl", testee, cwd=tmp_path)
    assert proc.returncode == 0 and " 0 failed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    proc = _run(lean, "run", "--impl", testee, "--", "-k", "AbortReq", cwd=tmp_path)
    last = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode == 0 and last.startswith("conformance: ") and " 0 failed" in last, proc.stdout[-3000:]


def test_the_reference_without_torch_is_one_line_naming_the_extra(lean, tmp_path):
    proc = _run(lean, "run", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "ipc-conformance[reference]" in lines[0] and "'torch'" in lines[0], proc.stderr
