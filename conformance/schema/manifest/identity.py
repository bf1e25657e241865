"""A catalogue's identity: a manifest id names one content, never two.

An installed release whose catalogue was edited (a development tree, a fork that kept the
version) still says `sglang-0.5.23`. Anything keyed by that id (the bundled manifest, golden
vectors, generated classes, expected failures) would describe another catalogue. So a catalogue
that differs from the bundled release it claims to be gets its own id,
`<release>+<short content digest>` (a PEP 440 local version: it sorts with its release).
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Optional

import msgspec

from conformance.schema.manifest.model import Manifest

__all__ = ["DIGEST_CHARS", "content_digest", "nearest_release", "own_identity", "same_content", "split_id"]

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


def split_id(manifest_id: str) -> tuple[str, str]:
    """('sglang', '0.5.23') from 'sglang-0.5.23' (the version is after the last '-' before a digit)."""
    for i in range(len(manifest_id) - 1, 0, -1):
        if manifest_id[i] == "-" and manifest_id[i + 1:i + 2].isdigit():
            return manifest_id[:i], manifest_id[i + 1:]
    return manifest_id, ""


def _key(version: str) -> tuple[Any, ...]:
    from conformance.schema.diff import _version_key  # a PEP 440 version, else its parts

    return _version_key(version)


def nearest_release(implementation: str, version: str, bundled: Iterable[str]) -> Optional[str]:
    """The bundled id of `implementation` nearest `version`: the newest release not newer than it
    (0.5.24.dev0 and 0.5.23+local -> 0.5.23), else the oldest one; None when none is bundled."""
    releases = sorted((v for impl, v in map(split_id, bundled) if impl == implementation and v), key=_key)
    if not releases:
        return None
    older = [v for v in releases if _key(v) <= _key(version)]
    return f"{implementation}-{older[-1] if older else releases[0]}"
