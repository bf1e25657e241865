"""A scratch SGLang-like git checkout with no version file, as an engine's CI sees it: io_struct.py
written by codegen from a bundled release, committed and tagged as that release, then one edit
(a field-less message renamed) committed on top. Shared by the schema-check tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conformance.schema.codegen import generate
from conformance.schema.manifest import load_manifest

RELEASE = "sglang-0.5.23"
MODULE = Path("python", "sglang", "srt", "managers", "io_struct.py")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def make_checkout(repo: Path, *, ignore_version_file: bool = False) -> Path:
    """repo: base (tagged v0.5.23), then the edit `HealthCheckOutput -> HealthCheckReqOutput`."""
    (repo / MODULE).parent.mkdir(parents=True)
    (repo / MODULE).write_text(generate(load_manifest(RELEASE)))
    if ignore_version_file:
        (repo / ".gitignore").write_text("_version.py\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "tag", "v0.5.23")
    text = (repo / MODULE).read_text()
    (repo / MODULE).write_text(text.replace("class HealthCheckOutput(", "class HealthCheckReqOutput("))
    git(repo, "commit", "-qam", "edit")
    return repo
