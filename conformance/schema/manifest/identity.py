"""A catalogue's identity: a manifest id names one content, never two.

An installed release whose catalogue was edited (a development tree, a fork that kept the
version) still says `sglang-0.5.23`. Anything keyed by that id (the bundled manifest, golden
vectors, generated classes, expected failures) would describe another catalogue. So a catalogue
that differs from the bundled release it claims to be gets its own id,
`<release>+<short content digest>` (a PEP 440 local version: it sorts with its release).
"""

from __future__ import annotations

import hashlib
from typing import Optional

import msgspec

from conformance.schema.manifest.model import Manifest

__all__ = ["DIGEST_CHARS", "content_digest", "own_identity", "same_content"]

DIGEST_CHARS = 8


def content_digest(manifest: Manifest) -> str:
    """sha256 of what the catalogue says on the wire: everything but how it was extracted and
    the version (so one edited tree keeps one digest whichever release it claims)."""
    plain = msgspec.structs.replace(manifest, extracted_with={}, version="")
    return hashlib.sha256(msgspec.json.encode(plain)).hexdigest()


def same_content(a: Manifest, b: Manifest) -> bool:
    return a.implementation == b.implementation and content_digest(a) == content_digest(b)


def own_identity(manifest: Manifest, claimed: Optional[Manifest] = None) -> Manifest:
    """`manifest` as it is when it equals the release it claims to be (`claimed`, by default
    the bundled manifest of its id) or when no such release is bundled; else a copy whose
    version is `<version>+<digest>`."""
    if claimed is None:
        from conformance.schema.manifest.model import bundled_manifests, load_manifest

        if manifest.id not in bundled_manifests():
            return manifest
        claimed = load_manifest(manifest.id)
    if same_content(manifest, claimed):
        return manifest
    base = manifest.version.split("+", 1)[0]
    return msgspec.structs.replace(manifest, version=f"{base}+{content_digest(manifest)[:DIGEST_CHARS]}")
