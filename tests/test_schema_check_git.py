"""`schema check --source` on a git checkout with no version file, as an engine's CI job and
pre-commit hook see it (SGLang's `_version.py` is written by setuptools_scm and git-ignored): the
tree's version comes from git (release tag and commits since, else the commit), or --version; the
baseline is a msgspec-era release, never a dataclass catalogue unless asked; a lone file is read
as the catalogue module; every mistake is one line, exit 2, found before the tree is read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from sglang_checkout import MODULE, RELEASE, git, make_checkout

import conformance
from conformance.schema import check
from conformance.schema.codegen import generate
from conformance.schema.manifest import load_manifest
from conformance.schema.manifest.git_version import git_version
from conformance.schema.manifest.source import extract_source

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(conformance.__file__).parents[1])}
    return subprocess.run([sys.executable, "-m", "conformance.cli", "schema", "check", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A checkout with no version file: base (tagged v0.5.23), then an edit; io_struct.py by codegen."""
    return make_checkout(tmp_path_factory.mktemp("sglang"), ignore_version_file=True)


def test_the_version_comes_from_the_release_tag_and_the_commits_since(checkout):
    sha = git(checkout, "rev-parse", "--short=8", "HEAD")
    found = git_version(checkout / MODULE)
    assert found is not None and found.released
    assert (found.version, found.origin) == (f"0.5.24.dev1+g{sha}", "git tag v0.5.23 + 1 commit(s)")
    live = extract_source(checkout)
    assert live.id == f"sglang-0.5.24.dev1+g{sha}" and live.extracted_with["version_from"] == found.origin
    assert check.nearest_baseline(live) == (RELEASE, "the msgspec-era release nearest its version")


def test_on_the_tag_the_tree_is_the_release(checkout, tmp_path):
    base = tmp_path / "base"
    subprocess.run(["git", "clone", "-q", str(checkout), str(base)], check=True)
    git(base, "checkout", "-q", "v0.5.23")
    found = git_version(base)
    assert found is not None and (found.version, found.origin) == ("0.5.23", "git tag v0.5.23")


def test_without_a_tag_the_commit_names_the_tree_and_the_baseline_is_the_closest_in_content(checkout, tmp_path):
    shallow = tmp_path / "shallow"  # a CI checkout: one commit, no tags
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{checkout}", str(shallow)], check=True)
    sha = git(shallow, "rev-parse", "--short=8", "HEAD")
    live = extract_source(shallow)
    assert live.version == f"0+g{sha}" and "no release tag" in live.extracted_with["version_from"]
    assert not check.version_known(live)
    chosen, why = check.nearest_baseline(live)
    assert chosen == RELEASE and "closest in content" in why and "its version is unknown" in why
    assert not load_manifest(chosen).is_dataclass_catalogue


def test_no_git_and_no_version_file_still_never_picks_a_dataclass_catalogue(checkout, tmp_path):
    plain = tmp_path / "plain"
    shutil.copytree(checkout / "python", plain / "python")
    live = extract_source(plain)
    assert live.version == "0" and live.extracted_with["version_from"].startswith("unknown")
    assert check.nearest_baseline(live)[0] == RELEASE  # not sglang-0.5.14, the oldest (dataclasses)


def test_an_old_version_gets_the_oldest_msgspec_era_release():
    import msgspec

    from conformance.schema.manifest import wire_manifests

    old = msgspec.structs.replace(load_manifest(RELEASE), version="0.4.10")
    assert check.nearest_baseline(old) == (wire_manifests()[0], "the msgspec-era release nearest its version")
    assert load_manifest(wire_manifests()[0]).version != "0.5.14"  # 0.5.14 is a dataclass catalogue


def test_the_cli_says_where_the_identity_came_from(checkout):
    proc = cli("--source", ".", cwd=checkout)
    sha = git(checkout, "rev-parse", "--short=8", "HEAD")
    header, identity = proc.stdout.splitlines()[:2]
    assert header.startswith(f"schema check {RELEASE} -> sglang-0.5.24.dev1+g{sha} (--source .)"), proc.stdout
    assert identity == (f"identity: sglang-0.5.24.dev1+g{sha} (version from git tag v0.5.23 + 1 commit(s)); "
                        f"baseline {RELEASE}: the msgspec-era release nearest its version")
    proc = cli("--source", ".", "--version", "0.5.30", cwd=checkout)
    assert "identity: sglang-0.5.30 (version from --version)" in proc.stdout, proc.stdout + proc.stderr


def test_a_lone_file_is_read_as_the_catalogue_module(checkout, tmp_path):
    lone = tmp_path / "io_struct.py"  # an edited copy outside the package, e.g. at the checkout's root
    shutil.copy(checkout / MODULE, lone)
    live = extract_source(lone)
    assert live.module == "sglang.srt.managers.io_struct" and live.id.startswith("sglang-")
    assert {s.module for s in live.structs.values()} == {"sglang.srt.managers.io_struct"}
    other = tmp_path / "mine.py"
    shutil.copy(lone, other)
    named = extract_source(other, module="sglang.srt.managers.io_struct")
    assert named.module == "sglang.srt.managers.io_struct" and set(named.structs) == set(live.structs)
    # the same file inside the checkout (a copy at its root): the tree around it resolves its imports
    inside = checkout / "io_struct.py"
    shutil.copy(lone, inside)
    try:
        assert extract_source(inside).module == "sglang.srt.managers.io_struct"
        assert extract_source(inside, module="sglang.srt.managers.io_struct").structs.keys() == live.structs.keys()
    finally:
        inside.unlink()


@pytest.mark.parametrize("args, message", [
    (("--against", "sglang-9.9.9"), "no manifest 'sglang-9.9.9'"),
    (("--version", "not a version"), "--version 'not a version': not a PEP 440 version"),
    (("--module", "a..b"), "--module 'a..b': not a dotted module name"),
    (("--allow", "X:no-rule"), "a declared change reads STRUCT[.FIELD][:RULE]"),
])
def test_mistakes_are_refused_before_the_tree_is_read(args, message, tmp_path):
    broken = tmp_path / "io_struct.py"
    broken.write_text("class (:\n")  # reading it would fail: the mistake must be found first
    proc = cli("--source", str(broken), *args, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, proc.stderr


@pytest.mark.parametrize("args, message", [
    (("--manifest", RELEASE, "--version", "1.0"), "--version goes with --source"),
    (("--manifest", RELEASE, "--module", "x.y"), "--module goes with --source"),
])
def test_source_options_without_a_source(args, message, tmp_path):
    proc = cli(*args, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_fork_wheel_keeps_its_distribution_name(tmp_path):
    wheel = tmp_path / "sglang_kt-0.7.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("sglang/srt/managers/io_struct.py", generate(load_manifest(RELEASE)))
        z.writestr("sglang_kt-0.7.2.dist-info/METADATA", "Metadata-Version: 2.1\nName: sglang_kt\nVersion: 0.7.2\n")
    live = extract_source(wheel)
    assert live.id == "sglang-kt-0.7.2"
    chosen, why = check.nearest_baseline(live)
    assert chosen == RELEASE and "no bundled release of sglang-kt" in why


# -- the real SGLang tree, when the CI's wheels are there ----------------------------------------------
def _wheel() -> Path:
    folder = os.environ.get("IPC_SGLANG_WHEELS")
    found = sorted(Path(folder).glob("sglang-0.5.23-*.whl")) if folder else []
    if not found:
        pytest.skip("IPC_SGLANG_WHEELS has no sglang 0.5.23 wheel (.ci/fetch-sglang-wheels)")
    return found[0]


def recipe() -> dict[str, list[str]]:
    """The CI recipe's commands as written (examples/ci/github-actions.yml, .pre-commit-hooks.yaml)."""
    import shlex

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_ci_recipe import hook_command, workflow_commands

    return {"plain": ["ipc-conformance", "schema", "check", "--source", ".", "--allow-file", ".ipc-schema-allow"],
            "workflow": shlex.split(workflow_commands()[0]), "pre-commit": hook_command()}


def run_words(words: list[str], cwd: Path) -> subprocess.CompletedProcess:
    assert words[:3] == ["ipc-conformance", "schema", "check"]
    return cli(*words[3:], cwd=cwd)


@pytest.mark.slow
def test_a_real_checkout_base_edit_declared(tmp_path):
    """SGLang 0.5.23's own tree in a checkout with three commits: the base (tagged), a field-less
    message renamed, the rename declared; no _version.py (the version comes from git). The recipe's
    commands, as written, and the plain command: 0, 1, 0."""
    repo = tmp_path / "sglang"
    with zipfile.ZipFile(_wheel()) as z:
        for member in z.namelist():
            if member.startswith("sglang/") and member.endswith(".py") and member != "sglang/_version.py":
                target = repo / "python" / member
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(member))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "tag", "v0.5.23")
    commands = recipe()
    for name, words in commands.items():
        started = time.monotonic()
        proc = run_words(words, repo)
        assert proc.returncode == 0 and f"schema check {RELEASE} -> {RELEASE} (--source .): 0 change(s)" \
            in proc.stdout, (name, proc.stdout + proc.stderr)
        assert time.monotonic() - started < 60, name
    text = (repo / MODULE).read_text()
    (repo / MODULE).write_text(text.replace("class HealthCheckOutput(", "class HealthCheckReqOutput("))
    git(repo, "commit", "-qam", "rename")
    for name, words in commands.items():
        proc = run_words(words, repo)
        assert proc.returncode == 1 and "HealthCheckReqOutput" in proc.stdout and "message-renamed" in proc.stdout, \
            (name, proc.stdout + proc.stderr)
    (repo / ".ipc-schema-allow").write_text("HealthCheckReqOutput  # reviewed: every process upgrades at once\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "declared")
    for name, words in commands.items():
        proc = run_words(words, repo)
        assert proc.returncode == 0 and "HealthCheckReqOutput (declared)" in proc.stdout, \
            (name, proc.stdout + proc.stderr)


def test_uncommitted_changes_add_the_content_digest(checkout, tmp_path):
    work = tmp_path / "work"  # a pre-commit hook's tree: the edit is not committed yet
    subprocess.run(["git", "clone", "-q", str(checkout), str(work)], check=True)
    sha = git(work, "rev-parse", "--short=8", "HEAD")
    clean = extract_source(work)
    assert clean.version == f"0.5.24.dev1+g{sha}"
    text = (work / MODULE).read_text()
    (work / MODULE).write_text(text.replace("class HealthCheckReqOutput(", "class HealthCheckOutput2("))
    dirty = extract_source(work)
    assert dirty.version.startswith(f"0.5.24.dev1+g{sha}.") and len(dirty.version.rsplit(".", 1)[1]) == 8
    assert dirty.extracted_with["version_from"].endswith("uncommitted changes")
    assert dirty.id != clean.id
