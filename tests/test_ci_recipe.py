"""The CI recipe for an engine's own repository (examples/ci/github-actions.yml, .pre-commit-hooks.yaml):
both files parse, and the commands they hold, run on a source tree generated from a bundled manifest by
codegen, pass it unedited, fail it on a breaking change (naming the struct and field), and pass it again
once that change is declared in .ipc-schema-allow, as the recipe documents."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import conformance
from conformance.schema.codegen import generate
from conformance.schema.manifest import Manifest, load_manifest, save_manifest
from conformance.schema.manifest.source import extract_source

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
WORKFLOW = ROOT / "examples" / "ci" / "github-actions.yml"
HOOKS = ROOT / ".pre-commit-hooks.yaml"
ALLOW_FILE = ".ipc-schema-allow"

sys.path.insert(0, str(HERE))
from dev_install_adapters import edited  # noqa: E402 - tests/ holds the edit


# -- the two files, read with no YAML library (a line-based subset is all they use) ----------------
def workflow_commands() -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^\s*(?:- )?\s*run:\s*(ipc-conformance .+)$",
                                                    WORKFLOW.read_text(), re.M)]


def hook() -> dict[str, str]:
    """The first hook's `key: value` lines."""
    out: dict[str, str] = {}
    for line in HOOKS.read_text().splitlines():
        m = re.match(r"^(?:- |  )(\w+): (.*)$", line)
        if m:
            out.setdefault(m.group(1), m.group(2).strip())
    return out


def hook_command() -> list[str]:
    h = hook()
    return shlex.split(h["entry"]) + json.loads(h["args"])  # pre-commit appends args to the entry


def test_the_workflow_runs_the_check_on_pull_requests():
    text = WORKFLOW.read_text()
    assert re.search(r"^on:\n  pull_request:", text, re.M)
    # installs what the docs say: the package from a git ref, no extra, so no torch (the check reads source)
    assert "torch" not in "".join(line for line in text.splitlines() if "pip install" in line)
    assert 'pip install "ipc-conformance @ git+' in text and "pip install ipc-conformance\n" not in text
    (command,) = workflow_commands()
    words = shlex.split(command)
    assert words[:3] == ["ipc-conformance", "schema", "check"]
    for flag, value in (("--source", "."), ("--against", "sglang-0.5.23"), ("--fail-on", "BREAKING"),
                        ("--allow-file", ALLOW_FILE)):
        assert words[words.index(flag) + 1] == value, (flag, command)


def test_the_pre_commit_hook():
    h = hook()
    assert (h["id"], h["language"], h["pass_filenames"]) == ("ipc-schema-check", "python", "false")
    files = re.compile(h["files"])
    assert files.search("python/sglang/srt/managers/io_struct.py") and not files.search("python/sglang/x.py")
    words = hook_command()
    assert words[:3] == ["ipc-conformance", "schema", "check"] and "--source" in words and "--against" in words


# -- running them ---------------------------------------------------------------------------------
def against(words: list[str]) -> str:
    return words[len(words) - 1 - words[::-1].index("--against") + 1]  # argparse keeps the last one


def source_tree(root: Path, manifest: Manifest) -> Path:
    """An engine checkout whose io_struct.py codegen made from the manifest."""
    module = root / "python" / "sglang" / "srt" / "managers" / "io_struct.py"
    module.parent.mkdir(parents=True)
    module.write_text(generate(manifest))
    (root / "python" / "sglang" / "version.py").write_text(f'__version__ = "{manifest.version}"\n')  # as SGLang's
    return root


def run_recipe(words: list[str], tree: Path, release: Manifest, tmp: Path) -> subprocess.CompletedProcess:
    """The recipe's command, as the installed CLI runs it, in the tree: --source reads the tree.
    codegen writes the whole catalogue into one module where the release spreads it over several,
    so the release is given as the tree's own unedited extraction (same content, codegen's modules)."""
    assert words[0] == "ipc-conformance"
    argv = [sys.executable, "-m", "conformance.cli", *words[1:]]
    baseline = tmp / f"{release.id}.json"
    if not baseline.exists():
        unedited = source_tree(tmp / "unedited", release)
        save_manifest(extract_source(unedited, version=release.version), baseline)
    for at in [i for i, w in enumerate(argv) if w == "--against"]:
        argv[at + 1] = str(baseline)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(conformance.__file__).parents[1]),
                                                        os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(argv, cwd=tree, capture_output=True, text=True, env=env, timeout=600)


COMMANDS = {"workflow": lambda: shlex.split(workflow_commands()[0]), "pre-commit": hook_command}


@pytest.mark.parametrize("where", COMMANDS)
def test_an_unedited_tree_passes(where, tmp_path):
    words = COMMANDS[where]()
    release = load_manifest(against(words))
    proc = run_recipe(words, source_tree(tmp_path / "tree", release), release, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"schema check {release.id} -> {release.id}" in proc.stdout and "0 change(s)" in proc.stdout


@pytest.mark.parametrize("where", COMMANDS)
def test_a_breaking_change_fails_and_is_named_until_declared(where, tmp_path):
    words = COMMANDS[where]()
    release = load_manifest(against(words))
    tree = source_tree(tmp_path / "tree", edited(release.id))
    proc = run_recipe(words, tree, release, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    row = r"^AbortReq\.inserted +.*BREAKING .*field-inserted +bytes confirm$"
    assert re.search(row, proc.stdout, re.M), proc.stdout
    assert "FAILED, 1 change(s) not allowed: AbortReq.inserted (field-inserted)" in proc.stdout
    # the recipe's way to accept it: a reviewed line in .ipc-schema-allow
    (tree / ALLOW_FILE).write_text("AbortReq.inserted:field-inserted  # reviewed: every peer upgrades at once\n")
    proc = run_recipe(words, tree, release, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "AbortReq.inserted (declared)" in proc.stdout and f"declared changes: 1 in {ALLOW_FILE}" in proc.stdout
