"""`golden check`: every difference between golden/ and what the manifests imply, a changed index
or refusals file told in meaning (the review conformance.schema.golden.diff gives). Its own module:
the store is what diff and writer build on, so the check that uses all three sits above them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from conformance.paths import golden_dir
from conformance.schema.golden import refusals
from conformance.schema.golden.diff import index_lines, refusal_lines
from conformance.schema.golden.store import (
    VECTORS,
    Problem,
    _files,
    _manifests,
    expected_files,
    index_file,
    manifest_digest,
    read_index,
)
from conformance.schema.golden.writer import GoldenError, recorded_files


def check(manifest_ids: Optional[Iterable[str]] = None, root: Optional[Path] = None,
          unused: bool = True) -> list[Problem]:
    """Every difference between golden/ and the vectors the manifests imply (empty: up to date).
    Without explicit ids, the check is whole: folders of manifests that are no longer bundled and
    vector files that no bundled manifest's index names count as unused (with ids, only the
    manifests' own folders are judged: other manifests may share the vectors)."""
    root = root or golden_dir()
    problems: list[Problem] = []
    manifests = _manifests(manifest_ids)
    wanted_vectors: set[str] = set()
    for manifest in manifests:
        index = read_index(manifest.id, root)
        if index is not None and index.get("manifest_sha256") != manifest_digest(manifest):
            problems.append(Problem("stale-manifest", index_file(manifest.id),
                                    "the manifest changed after its vectors were generated"))
        want = expected_files(manifest)
        for path, content in want.items():
            if path.startswith(VECTORS + "/"):
                if path in wanted_vectors:
                    continue
                wanted_vectors.add(path)
            on_disk = root / path
            if not on_disk.is_file():
                problems.append(Problem("missing", path))
            elif (stored := on_disk.read_bytes()) != content:
                problems.append(_changed(root, manifest.id, path, stored, want))
        if unused:
            own = {p.split("/", 1)[1] for p in want if p.startswith(manifest.id + "/")}
            problems += [Problem("unused", f"{manifest.id}/{n}") for n in sorted(_files(root / manifest.id) - own)]
    if unused and manifest_ids is None and root.is_dir():
        known = {m.id for m in manifests}
        for child in sorted(root.iterdir()):
            if child.is_dir() and child.name not in known and child.name != VECTORS and not child.name.startswith("."):
                problems.append(Problem("unused", f"{child.name}/", "no bundled manifest has this id"))
        problems += [Problem("unused", f"{VECTORS}/{n}", "no bundled manifest's index names it")
                     for n in sorted(_files(root / VECTORS)) if f"{VECTORS}/{n}" not in wanted_vectors]
    return problems


def _changed(root: Path, manifest_id: str, path: str, on_disk: bytes, want: dict[str, bytes]) -> Problem:
    """A changed file; a changed index or refusals.json says what changed in meaning: the cases
    (struct.variant, sha256 old -> new, each changed field old -> new value), the index's own
    members, the refusals (conformance.schema.golden.diff, the review syrupy's assertion shows)."""
    lines: list[str] = []
    if path in (index_file(manifest_id), f"{manifest_id}/{refusals.FILE}"):
        try:
            stored = recorded_files(root, manifest_id, repair=True) or {}  # the vectors on disk that its index names
        except GoldenError:
            stored = {}  # not readable as an index: the bytes say what they can
        if path == index_file(manifest_id) and path in stored:
            lines = index_lines(manifest_id, stored, want, old_name=f"golden/{manifest_id}",
                                new_name=f"the manifest {manifest_id}")
        elif path in stored:
            lines = list(refusal_lines(path, stored[path], want[path]))
    if lines:
        return Problem("changed", path, "in meaning, golden/ -> the manifest", tuple(lines))
    return Problem("changed", path, _what_changed(on_disk, want[path]))


def _what_changed(old: bytes, new: bytes) -> str:
    if len(old) != len(new):
        return f"{len(old)} bytes on disk, {len(new)} expected"
    first = next(i for i, (a, b) in enumerate(zip(old, new)) if a != b)
    return f"first difference at byte {first}: {old[first]:#04x} on disk, {new[first]:#04x} expected"
