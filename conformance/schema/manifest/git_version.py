"""The version of a source tree that has no version file: from the git checkout it lives in.

SGLang's version comes from setuptools_scm into a git-ignored `_version.py`, so a fresh checkout
(a CI job, a pre-commit hook) has none. The version then comes from git the way setuptools_scm
makes it: on a release tag `v0.5.23`, `0.5.23`; N commits after it, the next patch's development
release with the commit, `0.5.24.devN+g1a2b3c4d` (what `pip install -e .` of that commit
reports); with no release tag reachable (a shallow clone), only the commit is known:
`0+g1a2b3c4d`. A tree with uncommitted changes to tracked files (a pre-commit hook runs on one)
is no commit: `dirty` says so, and extraction adds the content's digest to the local version.
Nothing here fails: no git, no checkout, or git refusing the folder gives None.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

__all__ = ["GitVersion", "git_version"]

_TAG = re.compile(r"^v?(\d+(?:\.\d+)*)$")
_DESCRIBED = re.compile(r"^(?P<tag>.+)-(?P<distance>\d+)-g(?P<sha>[0-9a-f]+)$")
_SHA_CHARS = 8


@dataclass(frozen=True)
class GitVersion:
    version: str
    origin: str  # where it came from, in words: "git tag v0.5.23", "git tag v0.5.23 + 2 commits", "git commit ..."
    released: bool  # a release tag gave it (False: only the commit is known)
    dirty: bool = False  # tracked files under the folder differ from the commit


def _git(folder: Path, *args: str) -> Optional[str]:
    try:
        proc = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def _next_patch(release: str) -> str:
    parts = release.split(".")
    return ".".join([*parts[:-1], str(int(parts[-1]) + 1)])


def git_version(path: Path) -> Optional[GitVersion]:
    """The version git gives the checkout holding `path` (a file or folder), or None."""
    folder = path if path.is_dir() else path.parent
    found_version = _version(folder)
    if found_version is None:
        return None
    status = _git(folder, "status", "--porcelain", "--untracked-files=no", "--", ".")
    if status:
        return GitVersion(found_version.version, found_version.origin + ", uncommitted changes",
                          found_version.released, dirty=True)
    return found_version


def _version(folder: Path) -> Optional[GitVersion]:
    described = _git(folder, "describe", "--tags", "--long", f"--abbrev={_SHA_CHARS}", "--match", "v[0-9]*",
                     "--match", "[0-9]*")
    found = _DESCRIBED.match(described or "")
    tag = _TAG.match(found.group("tag")) if found else None
    if found and tag:
        distance, sha = int(found.group("distance")), found.group("sha")
        if distance == 0:
            return GitVersion(tag.group(1), f"git tag {found.group('tag')}", True)
        return GitVersion(f"{_next_patch(tag.group(1))}.dev{distance}+g{sha}",
                          f"git tag {found.group('tag')} + {distance} commit(s)", True)
    sha = _git(folder, "rev-parse", f"--short={_SHA_CHARS}", "HEAD")
    if sha is None:
        return None
    return GitVersion(f"0+g{sha}", f"git commit {sha} (no release tag reachable)", False)
