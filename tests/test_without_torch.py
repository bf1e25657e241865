"""The schema and golden tools without torch (an engine's CI job or pre-commit hook reads source
files; it should not install gigabytes to do it): `schema check --source`, `schema diff` and
`golden check` run in a subprocess where torch cannot be imported, give the verdicts and the bytes
they give with torch (every bundled vector, tensors included: conformance.schema.wire_ext), and
torch is never imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import conformance
from conformance.schema.codegen import generate
from conformance.schema.manifest import load_manifest

RELEASE = "sglang-0.5.23"

# Installed first thing in the subprocess: `import torch` fails as on a machine without it, and at
# exit the process says whether torch got into sys.modules anyway.
_BLOCKER = textwrap.dedent('''
    import atexit, os, sys

    class _NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoTorch())
    atexit.register(lambda: open(os.environ["TORCH_REPORT"], "w").write(
        "imported" if "torch" in sys.modules else "never imported"))
''')


@pytest.fixture
def no_torch(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_BLOCKER)
    report = tmp_path / "torch-report"

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
        report.unlink(missing_ok=True)
        env = {**os.environ, "TORCH_REPORT": str(report),
               "PYTHONPATH": os.pathsep.join([str(site), str(Path(conformance.__file__).parents[1])])}
        proc = subprocess.run([sys.executable, "-m", "conformance.cli", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=600)
        assert report.read_text() == "never imported", proc.stdout[-2000:] + proc.stderr[-2000:]
        return proc

    return run


def test_the_blocker_blocks(no_torch, tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-c", "import torch"], env={**os.environ, "PYTHONPATH": str(site),
                          "TORCH_REPORT": str(tmp_path / "r")}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "No module named 'torch'" in proc.stderr


def test_schema_check_source_without_torch(no_torch, tmp_path):
    tree = tmp_path / "checkout"
    module = tree / "python" / "sglang" / "srt" / "managers" / "io_struct.py"
    module.parent.mkdir(parents=True)
    module.write_text(generate(load_manifest(RELEASE)))
    (tree / "python" / "sglang" / "version.py").write_text('__version__ = "0.5.23"\n')
    started = time.monotonic()
    proc = no_torch("schema", "check", "--source", ".", "--golden-out", "review", cwd=tree)
    took = time.monotonic() - started
    # codegen keeps every class in one module: each one moved (class-moved, pickle), nothing else
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    rules = {line.split()[-3] for line in proc.stdout.splitlines()[3:] if line.endswith("bytes confirm")}
    assert rules == {"class-moved"}, proc.stdout[-3000:]
    # the golden update: the vectors are those bundled (tensor fields included), so none is written
    assert "(0 vector(s) differ from sglang-0.5.23's, 0 new, 0 gone)" in proc.stdout, proc.stdout[-3000:]
    assert not (tree / "review" / "vectors").exists()
    assert took < 120, took


def test_golden_check_and_schema_diff_without_torch(no_torch, tmp_path):
    # every vector of the release, tensors included, made without torch, byte for byte
    proc = no_torch("golden", "check", "--manifest", RELEASE, cwd=tmp_path)
    assert proc.returncode == 0 and "golden: up to date" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    proc = no_torch("schema", "diff", "sglang-0.5.22", RELEASE, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith(f"schema diff sglang-0.5.22 -> {RELEASE}"), proc.stderr


def test_a_generated_catalogue_decodes_a_late_subclass():
    """The golden codec's decoder learns message classes defined after start-up (SPEC R-MSG-8), as
    the reference's does: a torch-free runner decodes a testee's late grandchild."""
    import types

    from conformance.schema.golden.catalogue import catalogue_for

    cat = catalogue_for(load_manifest("sglang-0.5.22"))  # never the reference's classes: generated
    parent = cat.classes["AbortReq"]
    late = types.new_class("LateAbortReqForTest", (parent,), {"kw_only": True})
    value = late(rid="r-1")
    got = cat.decode(cat.encode(value))
    assert type(got) is late and got == value
