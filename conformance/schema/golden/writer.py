"""The one writer of golden/: `pytest --snapshot-update` (the syrupy extension) and
`ipc-conformance golden update` both write through it.

    recorded_files(root, id)        what golden/ holds for a manifest, checked (GoldenError if broken)
    write_manifest(root, id, want)  write only the files that differ, each atomically, index last
    orphan_vectors(root)            vector files no index names (unused)
    update(ids, root)               the command: every manifest, then the unused files

Writes are atomic (a temporary file in the same folder, then os.replace) and a file whose
content is already right is not touched, so the update of one field rewrites the index, the
refusals and the vectors of the cases that changed, nothing else. Before anything is written the
manifest's files on disk are checked: a vector file whose content does not match the hash in its
name, or that the index names and is gone, stops the update with one line naming the file
(GoldenError), unless `repair` is given (`golden update --repair`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Mapping, Optional

from conformance.errors import UsageError
from conformance.schema.golden.store import HASH_DIGITS, INDEX, VECTORS, Problem, _manifests, expected_files, index_file

__all__ = ["GoldenError", "atomic_write", "orphan_vectors", "recorded_files", "update", "write_manifest"]

REPAIR_HINT = "restore it (git checkout golden/) or run `ipc-conformance golden update --repair`"


class GoldenError(UsageError):
    """golden/ is broken in a way an update must not paper over: one line, naming the file."""


def atomic_write(path: Path, data: bytes) -> bool:
    """Write data to path unless it already holds exactly that; True when written."""
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def _index_names(root: Path, manifest_id: str) -> Optional[list[str]]:
    """The vector files (relative to root) the manifest's index names; None: no index."""
    path = root / index_file(manifest_id)
    if not path.is_file():
        return None
    try:
        index = json.loads(path.read_text())
        names = [c[k] for c in index["cases"] for k in ("msgpack", "view")]
    except (ValueError, KeyError, TypeError) as exc:
        raise GoldenError(f"golden/{index_file(manifest_id)} is not a golden index ({exc}): {REPAIR_HINT}") from None
    if not all(isinstance(n, str) for n in names):
        raise GoldenError(f"golden/{index_file(manifest_id)} is not a golden index (a file name is not a string)")
    return names


def _check_vector(root: Path, manifest_id: str, name: str) -> bytes:
    path = root / name
    if not path.is_file():
        raise GoldenError(f"golden/{index_file(manifest_id)} names golden/{name}, which is missing: {REPAIR_HINT}")
    data = path.read_bytes()
    parts = path.name.split(".")
    digest = hashlib.sha256(data).hexdigest()[:HASH_DIGITS]
    if len(parts) < 4 or parts[2] != digest:
        raise GoldenError(f"golden/{name} is corrupted (its content hashes to {digest}): {REPAIR_HINT}")
    return data


def recorded_files(root: Path, manifest_id: str, repair: bool = False) -> Optional[dict[str, bytes]]:
    """{path relative to root: content} of what golden/ holds for the manifest: every file in its
    folder and every vector its index names (None: no index). Raises GoldenError on a vector the
    index names that is missing or whose content does not match its name (with repair: left out)."""
    names = _index_names(root, manifest_id)
    if names is None:
        return None
    folder = root / manifest_id
    out = {f"{manifest_id}/{p.name}": p.read_bytes() for p in sorted(folder.iterdir())
           if p.is_file() and not p.name.startswith(".")}
    for name in names:
        if name in out:
            continue
        try:
            out[name] = _check_vector(root, manifest_id, name)
        except GoldenError:
            if not repair:
                raise
    return out


def _all_named(root: Path) -> set[str]:
    named: set[str] = set()
    if root.is_dir():
        for child in root.iterdir():
            if child.is_dir() and child.name != VECTORS and (child / INDEX).is_file():
                try:
                    named.update(_index_names(root, child.name) or ())
                except GoldenError:
                    continue  # that manifest's own check says so; its names count as unknown
    return named


def orphan_vectors(root: Path) -> list[str]:
    """Vector files (relative to root) that no index under root names: unused."""
    folder = root / VECTORS
    if not folder.is_dir():
        return []
    named = _all_named(root)
    return sorted(f"{VECTORS}/{p.name}" for p in folder.iterdir()
                  if p.is_file() and not p.name.startswith(".") and f"{VECTORS}/{p.name}" not in named)


def write_manifest(root: Path, manifest_id: str, want: Mapping[str, bytes], repair: bool = False) -> list[Problem]:
    """Make golden/ hold exactly `want` for the manifest (its expected files: vectors, index,
    refusals): write what is missing or different, vectors first and the index last, delete files
    of its folder that `want` lacks and vectors that only its old index named. Checks the files
    on disk first (GoldenError, nothing written). Returns what it did: missing (written), changed
    (rewritten), unused (deleted)."""
    old = recorded_files(root, manifest_id, repair=repair) or {}
    old_vectors = {p for p in old if p.startswith(VECTORS + "/")}
    done: list[Problem] = []
    own = f"{manifest_id}/"
    # vectors, then the manifest's own files, index last: a reader never finds an index naming
    # a vector not yet written
    order = sorted(want, key=lambda p: (p.startswith(own), p == index_file(manifest_id), p))
    for path in order:
        target = root / path
        existed = target.is_file()
        if atomic_write(target, want[path]):
            done.append(Problem("changed" if existed else "missing", path))
    for path in sorted(p for p in old if p.startswith(own) and p not in want):
        (root / path).unlink(missing_ok=True)
        done.append(Problem("unused", path))
    dropped = old_vectors - set(want)
    if dropped:
        still = _all_named(root)
        for path in sorted(dropped - still):
            (root / path).unlink(missing_ok=True)
            done.append(Problem("unused", path, "no index names it any more"))
    return done


def delete_vectors(root: Path, names: Iterable[str]) -> list[Problem]:
    """Delete unused vector files (relative to root), never one an index names."""
    named = _all_named(root)
    done = []
    for name in sorted(names):
        if name.startswith(VECTORS + "/") and name not in named and (root / name).is_file():
            (root / name).unlink()
            done.append(Problem("unused", name))
    return done


def update(manifest_ids: Optional[Iterable[str]] = None, root: Optional[Path] = None,
           repair: bool = False) -> list[Problem]:
    """`ipc-conformance golden update`: every manifest's files through write_manifest (all checked
    before the first is written), then, for a whole update (no ids), the folders of manifests no
    longer bundled and the vectors no index names are deleted."""
    from conformance.paths import golden_dir

    root = root or golden_dir()
    ids = list(manifest_ids) if manifest_ids is not None else None
    manifests = _manifests(ids)
    if not repair:
        for manifest in manifests:
            recorded_files(root, manifest.id)
    done: list[Problem] = []
    for manifest in manifests:
        done += write_manifest(root, manifest.id, expected_files(manifest), repair=repair)
    if ids is None and root.is_dir():
        known = {m.id for m in manifests}
        for child in sorted(root.iterdir()):
            if child.is_dir() and child.name not in known and child.name != VECTORS and not child.name.startswith("."):
                shutil.rmtree(child)
                done.append(Problem("unused", f"{child.name}/", "no bundled manifest has this id"))
        done += delete_vectors(root, orphan_vectors(root))
    return done
