"""The bundled golden vectors of a manifest, for the checks that read them (Golden, Bytes, Accepts)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec
import pytest


@lru_cache(maxsize=None)
def golden_vectors(manifest_json: bytes, manifest_id: str) -> dict[tuple[str, str], Path]:
    """(struct, variant) -> vector file; empty when the manifest has none or they are stale
    (written for another version of the manifest)."""
    from conformance.schema.golden import manifest_digest, read_index, vector_paths
    from conformance.schema.manifest.model import Manifest

    index = read_index(manifest_id)
    if index is None:
        return {}
    if index["manifest_sha256"] != manifest_digest(msgspec.json.decode(manifest_json, type=Manifest)):
        return {}
    return vector_paths(manifest_id)


def golden_vector_name(ipc: Any, struct: str, variant: str) -> str:
    """The vector's file as a reader finds it (golden/vectors/<Struct>.<variant>.<h16>.msgpack),
    for failure messages; the case's name when there is none."""
    from conformance.paths import golden_dir

    path = golden_vectors(ipc.manifest.to_json(), ipc.manifest.id).get((struct, variant))
    if path is None:
        return f"the golden vector of {ipc.manifest.id} {struct}.{variant}"
    try:
        return "golden/" + path.relative_to(golden_dir()).as_posix()
    except ValueError:
        return str(path)


def golden_vector(ipc: Any, struct: str, variant: str) -> bytes:
    """The vector's bytes; skips the check when this run does not test msgpack or there is none."""
    if "msgpack" not in ipc.transports:
        pytest.skip("golden vectors are msgpack; this run does not check msgpack")
    path = golden_vectors(ipc.manifest.to_json(), ipc.manifest.id).get((struct, variant))
    if path is None:
        pytest.skip(f"no golden vector for {ipc.manifest.id} {struct}.{variant} "
                    "(run `ipc-conformance golden update` for a new bundled manifest)")
    return path.read_bytes()
