"""Golden vectors on disk, format 2 (layout in spec/SPEC.md, "Vector files").

    golden/vectors/<Struct>.<variant>.<h16>.msgpack     exact msgpack bytes of one message
    golden/vectors/<Struct>.<variant>.<h16>.view.json   a JSON view (conformance.schema.golden.view)
    golden/<manifest id>/index.json                      the manifest's cases -> their two files
    golden/<manifest id>/refusals.json                   inputs every implementation must refuse
                                                         (conformance.schema.golden.refusals)

<h16> is the first 16 hex digits of the SHA-256 of the file's own bytes, so a vector that two
manifests share is one pair of files: a new manifest adds the vectors its changes touch and its
two per-manifest files, not a copy of every vector. A view names no manifest for the same reason.
Writing them is conformance.schema.golden.writer's (`update`, and the syrupy extension's writes).
One case per message of the manifest and variant (minimal, typical, edge of
conformance.schema.values). index.json records a hash of the manifest, so a manifest that changed
without its vectors is caught.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import msgspec

from conformance.errors import UsageError
from conformance.paths import golden_dir
from conformance.schema.golden import refusals
from conformance.schema.golden import view as jview
from conformance.schema.golden.catalogue import catalogue_for
from conformance.schema.manifest import Manifest, load_manifest, wire_manifests
from conformance.schema.values import VARIANTS, ValueBuilder

__all__ = [
    "INDEX", "FORMAT", "VECTORS", "Case", "Problem", "UPDATE_COMMAND", "cases", "expected_files",
    "manifest_digest", "read_index", "vector_paths",
]

FORMAT = 2
INDEX = "index.json"
VECTORS = "vectors"  # the folder, under golden/, of every manifest's vector files
HASH_DIGITS = 16  # of a file's SHA-256 in its name: 64 bits, and check compares whole contents
MSGPACK_SUFFIX = ".msgpack"
VIEW_SUFFIX = ".view.json"
UPDATE_COMMAND = "ipc-conformance golden update"


def manifest_digest(manifest: Manifest) -> str:
    """sha256 of the manifest's wire content (everything but `extracted_with`)."""
    canonical = msgspec.json.encode(msgspec.structs.replace(manifest, extracted_with={}))
    return hashlib.sha256(canonical).hexdigest()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def vector_file(stem: str, data: bytes, suffix: str) -> str:
    """The path, relative to golden/, of a vector file: named by its case and its content."""
    return f"{VECTORS}/{stem}.{_sha256(data)[:HASH_DIGITS]}{suffix}"


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
        """Relative to golden/: vectors/<Struct>.<variant>.<h16>.msgpack."""
        return vector_file(self.name, self.msgpack, MSGPACK_SUFFIX)

    @property
    def view_file(self) -> str:
        """Relative to golden/: vectors/<Struct>.<variant>.<h16>.view.json."""
        return vector_file(self.name, self.view_text.encode("utf-8"), VIEW_SUFFIX)

    def value(self) -> object:
        """A fresh canonical instance, built with the manifest's classes."""
        cat = catalogue_for(self.manifest)
        return ValueBuilder(self.manifest, cat.classes, self.variant).instance(self.struct)

    @cached_property
    def msgpack(self) -> bytes:
        return catalogue_for(self.manifest).encode(self.value())

    @cached_property
    def view(self) -> object:
        """The JSON view of the value (plain JSON data)."""
        return jview.to_view(self.value())

    @cached_property
    def view_text(self) -> str:
        # No manifest id: the same message with the same bytes is one file for every manifest.
        return jview.dumps({
            "struct": self.struct,
            "variant": self.variant,
            "msgpack_sha256": _sha256(self.msgpack),
            "value": self.view,
        })


def cases(manifest: Manifest, structs: Optional[Iterable[str]] = None) -> list[Case]:
    names = list(structs) if structs is not None else [s.name for s in manifest.messages]
    return [Case(manifest, s, v) for s in names for v in VARIANTS]


def index_file(manifest_id: str) -> str:
    return f"{manifest_id}/{INDEX}"


def index_text(manifest: Manifest, all_cases: Sequence[Case]) -> str:
    index = {
        "format": FORMAT,
        "manifest": manifest.id,
        "manifest_sha256": manifest_digest(manifest),
        "generated_by": UPDATE_COMMAND,
        "variants": list(VARIANTS),
        "cases": [
            {"struct": c.struct, "variant": c.variant, "msgpack": c.msgpack_file, "view": c.view_file,
             "size": len(c.msgpack), "sha256": _sha256(c.msgpack)}
            for c in all_cases
        ],
    }
    return json.dumps(index, indent=1) + "\n"


def expected_files(manifest: Manifest) -> dict[str, bytes]:
    """{path relative to golden/: exact content} of every file the manifest needs there: its
    vector files (some shared with other manifests), its index and its refusals."""
    return dict(_expected_files(manifest.id, manifest.to_json()))


@lru_cache(maxsize=16)
def _expected_files(manifest_id: str, manifest_json: bytes) -> dict[str, bytes]:
    manifest = msgspec.json.decode(manifest_json, type=Manifest)
    all_cases = cases(manifest)
    out: dict[str, bytes] = {}
    for c in all_cases:
        out[c.msgpack_file] = c.msgpack
        out[c.view_file] = c.view_text.encode("utf-8")
    out[index_file(manifest.id)] = index_text(manifest, all_cases).encode("utf-8")
    typical = {c.struct: c.msgpack for c in all_cases if c.variant == "typical"}
    out[f"{manifest.id}/{refusals.FILE}"] = refusals.corpus_text(
        manifest, typical.__getitem__, manifest_digest(manifest), UPDATE_COMMAND).encode("utf-8")
    return out


def read_index(manifest_id: str, root: Optional[Path] = None) -> Optional[dict[str, Any]]:
    path = (root or golden_dir()) / index_file(manifest_id)
    return json.loads(path.read_text()) if path.exists() else None


def vector_paths(manifest_id: str, root: Optional[Path] = None) -> dict[tuple[str, str], Path]:
    """(struct, variant) -> the .msgpack file of each case the manifest's index lists (empty
    when it has none). The one place readers turn an index entry into a path."""
    root = root or golden_dir()
    index = read_index(manifest_id, root)
    return {(c["struct"], c["variant"]): root / c["msgpack"] for c in (index or {}).get("cases", [])}


@dataclass(frozen=True)
class Problem:
    """One way golden/ differs from what the manifests imply."""

    kind: str  # missing | changed | unused | stale-manifest
    path: str  # relative to golden/; a folder ends with /
    detail: str = ""
    lines: tuple[str, ...] = ()  # what changed in meaning (a changed index or refusals), one per line

    def __str__(self) -> str:
        head = f"{self.kind}: {self.path}" + (f" ({self.detail})" if self.detail else "")
        return "\n".join([head, *(f"    {line}" for line in self.lines)])


def require_wire(manifest: Manifest) -> Manifest:
    """The manifest, when it has golden vectors: a dataclass catalogue (pickle only) has none."""
    if manifest.is_dataclass_catalogue:
        raise UsageError(f"{manifest.id} is a dataclass catalogue (pickle only): golden vectors are msgpack, it has "
                         f"none; `ipc-conformance schema diff {manifest.id} <release>` is its migration report")
    return manifest


def _manifests(ids: Optional[Iterable[str]]) -> list[Manifest]:
    return [require_wire(load_manifest(i)) for i in (ids if ids is not None else wire_manifests())]


def _files(folder: Path) -> set[str]:
    return ({p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")}
            if folder.is_dir() else set())
