"""Golden vectors on disk: golden/<manifest id>/ (layout in spec/SPEC.md, "Vector files").

    golden/<manifest id>/index.json                 the cases, their files, sizes and sha256
    golden/<manifest id>/<Struct>.<variant>.msgpack the exact msgpack bytes of the message
    golden/<manifest id>/<Struct>.<variant>.view.json  its JSON view (conformance.schema.golden.view)
    golden/<manifest id>/refusals.json              inputs every implementation must refuse
                                                    (conformance.schema.golden.refusals)

Every bundled manifest has a folder; one case per message of the manifest and variant
(minimal, typical, edge of conformance.schema.values). index.json records a hash of the
manifest, so a manifest that changed without its vectors is caught.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Iterable, Optional, Sequence

import msgspec

from conformance.paths import golden_dir
from conformance.schema.golden import refusals
from conformance.schema.golden import view as jview
from conformance.schema.golden.catalogue import catalogue_for
from conformance.schema.manifest import Manifest, bundled_manifests, load_manifest
from conformance.schema.values import VARIANTS, ValueBuilder

__all__ = [
    "INDEX", "FORMAT", "Case", "Problem", "UPDATE_COMMAND", "cases", "check", "expected_files",
    "manifest_digest", "read_index", "update",
]

FORMAT = 1
INDEX = "index.json"
MSGPACK_SUFFIX = ".msgpack"
VIEW_SUFFIX = ".view.json"
UPDATE_COMMAND = "ipc-conformance golden update"


def manifest_digest(manifest: Manifest) -> str:
    """sha256 of the manifest's wire content (everything but `extracted_with`)."""
    canonical = msgspec.json.encode(msgspec.structs.replace(manifest, extracted_with={}))
    return hashlib.sha256(canonical).hexdigest()


@dataclass(frozen=True)
class Case:
    manifest: Manifest
    struct: str
    variant: str

    @property
    def name(self) -> str:
        return f"{self.struct}.{self.variant}"

    @property
    def msgpack_file(self) -> str:
        return self.name + MSGPACK_SUFFIX

    @property
    def view_file(self) -> str:
        return self.name + VIEW_SUFFIX

    def value(self) -> object:
        """A fresh canonical instance, built with the manifest's classes."""
        cat = catalogue_for(self.manifest)
        return ValueBuilder(self.manifest, cat.classes, self.variant).instance(self.struct)

    @cached_property
    def msgpack(self) -> bytes:
        return catalogue_for(self.manifest).encode(self.value())

    @cached_property
    def view_text(self) -> str:
        return jview.dumps({
            "manifest": self.manifest.id,
            "struct": self.struct,
            "variant": self.variant,
            "msgpack_sha256": hashlib.sha256(self.msgpack).hexdigest(),
            "value": jview.to_view(self.value()),
        })


def cases(manifest: Manifest, structs: Optional[Iterable[str]] = None) -> list[Case]:
    names = list(structs) if structs is not None else [s.name for s in manifest.messages]
    return [Case(manifest, s, v) for s in names for v in VARIANTS]


def index_text(manifest: Manifest, all_cases: Sequence[Case]) -> str:
    index = {
        "format": FORMAT,
        "manifest": manifest.id,
        "manifest_sha256": manifest_digest(manifest),
        "generated_by": UPDATE_COMMAND,
        "variants": list(VARIANTS),
        "cases": [
            {"struct": c.struct, "variant": c.variant, "msgpack": c.msgpack_file, "view": c.view_file,
             "size": len(c.msgpack), "sha256": hashlib.sha256(c.msgpack).hexdigest()}
            for c in all_cases
        ],
    }
    return json.dumps(index, indent=1) + "\n"


def expected_files(manifest: Manifest) -> dict[str, bytes]:
    """{file name: exact content} of the manifest's golden folder."""
    return dict(_expected_files(manifest.id, manifest.to_json()))


@lru_cache(maxsize=16)
def _expected_files(manifest_id: str, manifest_json: bytes) -> dict[str, bytes]:
    manifest = msgspec.json.decode(manifest_json, type=Manifest)
    all_cases = cases(manifest)
    out: dict[str, bytes] = {}
    for c in all_cases:
        out[c.msgpack_file] = c.msgpack
        out[c.view_file] = c.view_text.encode("utf-8")
    out[INDEX] = index_text(manifest, all_cases).encode("utf-8")
    typical = {c.struct: c.msgpack for c in all_cases if c.variant == "typical"}
    out[refusals.FILE] = refusals.corpus_text(manifest, typical.__getitem__, manifest_digest(manifest),
                                              UPDATE_COMMAND).encode("utf-8")
    return out


def read_index(manifest_id: str, root: Optional[Path] = None) -> Optional[dict]:
    path = (root or golden_dir()) / manifest_id / INDEX
    return json.loads(path.read_text()) if path.exists() else None


@dataclass(frozen=True)
class Problem:
    """One way the golden folder differs from what the manifests imply."""

    kind: str  # missing | changed | unused | stale-manifest
    path: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.path}" + (f" ({self.detail})" if self.detail else "")


def _manifests(ids: Optional[Iterable[str]]) -> list[Manifest]:
    return [load_manifest(i) for i in (ids if ids is not None else bundled_manifests())]


def check(manifest_ids: Optional[Iterable[str]] = None, root: Optional[Path] = None,
          unused: bool = True) -> list[Problem]:
    """Every difference between golden/ and the vectors the manifests imply (empty: up to date).
    Without explicit ids, folders of manifests that are no longer bundled count as unused."""
    root = root or golden_dir()
    problems: list[Problem] = []
    manifests = _manifests(manifest_ids)
    for manifest in manifests:
        folder = root / manifest.id
        index = read_index(manifest.id, root)
        if index is not None and index.get("manifest_sha256") != manifest_digest(manifest):
            problems.append(Problem("stale-manifest", f"{manifest.id}/{INDEX}",
                                    "the manifest changed after its vectors were generated"))
        want = expected_files(manifest)
        have = ({p.name for p in folder.glob("*") if p.is_file() and not p.name.startswith(".")}
                if folder.is_dir() else set())
        for name, content in want.items():
            path = folder / name
            if name not in have:
                problems.append(Problem("missing", f"{manifest.id}/{name}"))
            elif path.read_bytes() != content:
                problems.append(Problem("changed", f"{manifest.id}/{name}", _what_changed(path.read_bytes(), content)))
        if unused:
            problems += [Problem("unused", f"{manifest.id}/{n}") for n in sorted(have - set(want))]
    if unused and manifest_ids is None and root.is_dir():
        known = {m.id for m in manifests}
        for child in sorted(root.iterdir()):
            if child.is_dir() and child.name not in known:
                problems.append(Problem("unused", f"{child.name}/", "no bundled manifest has this id"))
    return problems


def _what_changed(old: bytes, new: bytes) -> str:
    if len(old) != len(new):
        return f"{len(old)} bytes on disk, {len(new)} expected"
    first = next(i for i, (a, b) in enumerate(zip(old, new)) if a != b)
    return f"first difference at byte {first}: {old[first]:#04x} on disk, {new[first]:#04x} expected"


def update(manifest_ids: Optional[Iterable[str]] = None, root: Optional[Path] = None) -> list[Problem]:
    """Rewrite golden/ to match the manifests (write missing/changed files, delete unused ones).
    Returns what was fixed."""
    root = root or golden_dir()
    fixed = check(manifest_ids, root)
    for problem in fixed:
        path = root / problem.path
        if problem.kind == "unused":
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    for manifest in _manifests(manifest_ids):
        folder = root / manifest.id
        touched = {p.path.split("/", 1)[1] for p in fixed if p.path.startswith(manifest.id + "/")
                   and p.kind in ("missing", "changed")}
        if not touched:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for name, content in expected_files(manifest).items():
            if name in touched:
                (folder / name).write_bytes(content)
    return fixed
