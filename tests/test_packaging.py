"""The wheel carries the whole suite: spec/ and golden/ data, entry points, both packages, their
py.typed markers and full metadata; the version is written once."""

from __future__ import annotations

import email
import os
import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

import conformance

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        # pip's PEP 517 front end with the env's hatchling (the `test` extra): tox's test envs carry
        # no `build` (a dev tool)
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(out), str(ROOT)],
        check=True, capture_output=True,
    )
    (found,) = out.glob("ipc_conformance-*.whl")
    return found


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_wheel_ships_type_information_and_full_metadata(wheel):
    """py.typed for both typed packages (PEP 561); the version of conformance/__init__.py; the
    classifiers a user filters by; no test-only dependency among those every install pulls in."""
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    assert {"conformance/py.typed", "reference_impl/py.typed"} <= set(names)
    meta = email.message_from_bytes(archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))))
    assert meta["Version"] == conformance.__version__
    classifiers = set(meta.get_all("Classifier"))
    assert {"Framework :: Pytest", "Typing :: Typed", "Programming Language :: Python :: 3.10"} <= classifiers
    runtime = {re.split(r"[<>=!~; \[]", r, maxsplit=1)[0].lower() for r in meta.get_all("Requires-Dist")
               if "extra ==" not in r}
    # pytest, hypothesis and pytest-xdist are the plugin's own runtime; what only the tests use is not;
    # torch comes with the reference (and serve) extra only
    assert runtime == {"msgspec", "pydantic", "pyzmq", "numpy", "hypothesis", "pytest", "pytest-xdist", "jinja2"}
    extras = {r.split(";")[1].split("==")[1].strip().strip("'\"") for r in meta.get_all("Requires-Dist")
              if r.startswith("torch") and "extra ==" in r}
    assert {"reference", "serve"} <= extras


#: Files a version number could be copied into by hand.
_VERSION_HOMES = ("conformance", "reference_impl", "reference_tools", "examples", "docs", "spec")


def test_the_version_is_written_once():
    """conformance/__init__.py holds it; hatch reads it there for the wheel, reference_impl
    re-exports it, the CLI and reports import it. No other file spells it out."""
    version = conformance.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:[.-]?\w+)?", version)
    literal = re.compile(rf"""["']{re.escape(version)}["']""")
    copies = [str(path.relative_to(ROOT)) for home in _VERSION_HOMES for path in sorted((ROOT / home).rglob("*"))
              if path.suffix in (".py", ".toml", ".cfg", ".json", ".md") and path.is_file()
              and path != ROOT / "conformance" / "__init__.py" and literal.search(path.read_text(errors="replace"))]
    copies += ["pyproject.toml"] if literal.search((ROOT / "pyproject.toml").read_text()) else []
    assert copies == [], f"the version {version} is written by hand in {copies}: import conformance.__version__"
    assert 'path = "conformance/__init__.py"' in (ROOT / "pyproject.toml").read_text()
    import reference_impl

    assert reference_impl.__version__ == version


def test_the_changelog_has_a_section_for_the_version():
    """Keep a Changelog: `## [X.Y.Z] - date` per released version, `## [Unreleased]` above it."""
    text = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d+\.\d+\.\d+[^\]]*)\] - \d{4}-\d{2}-\d{2}$", text, re.MULTILINE)
    assert conformance.__version__ in released or "## [Unreleased]" in text
    assert released and released[0] == max(released, key=lambda v: tuple(int(x) for x in re.findall(r"\d+", v)))
    assert text.index("## [Unreleased]") < text.index(f"## [{released[0]}]")
