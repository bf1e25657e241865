"""Golden vectors: the live encoder against golden/ (format 2, spec/SPEC.md "Vector files").

A run fails on any changed, missing or unused golden file. Where syrupy is installed (the dev
extra) the golden vectors are syrupy snapshots (conformance.schema.golden.syrupy_extension):
`pytest tests/test_golden.py --snapshot-update` rewrites what changed, the failing run shows
each changed field (old -> new), and vector files no index names are syrupy's unused snapshots.
`ipc-conformance golden update` writes through the same writer; `ipc-conformance golden diff OLD
NEW` says what a new manifest changes in them.
"""

from __future__ import annotations

import json

import pytest

from conformance.paths import golden_dir
from conformance.schema.golden import INDEX, UPDATE_COMMAND, cases, manifest_digest, read_index
from conformance.schema.golden.checking import check
from conformance.schema.golden.store import MSGPACK_SUFFIX, VECTORS, VIEW_SUFFIX, index_text
from conformance.schema.manifest import load_manifest, wire_manifests

MANIFESTS = wire_manifests()

try:
    import syrupy  # noqa: F401 - only whether it is installed

    SYRUPY = True
except ImportError:  # syrupy is in the dev extra (Python 3.11+): the checks below stand in for it
    SYRUPY = False

without_syrupy = pytest.mark.skipif(SYRUPY, reason="with syrupy, test_golden_vectors (a snapshot) checks this")


@pytest.mark.skipif(not SYRUPY, reason="syrupy is not installed (dev extra, Python 3.11+)")
@pytest.mark.parametrize("manifest_id", MANIFESTS)
def test_golden_vectors(manifest_id, request):
    """The manifest's golden files (vectors, index, refusals) as one syrupy snapshot."""
    from conformance.schema.golden.syrupy_extension import GoldenSnapshotExtension

    golden = request.getfixturevalue("snapshot").use_extension(GoldenSnapshotExtension)
    assert golden(name=manifest_id) == load_manifest(manifest_id)


def _assert_files(manifest_id: str, suffix: str) -> None:
    """Every file of the manifest ending in suffix is on disk with exactly the live encoder's
    content; report all mismatches, not just the first."""
    problems = [p for p in check([manifest_id], unused=False) if p.path.endswith(suffix)]
    assert not problems, (
        f"{len(problems)} golden files of {manifest_id} differ from the live encoder: "
        f"{', '.join(str(p) for p in problems[:8])}{' ...' if len(problems) > 8 else ''}. If the change is "
        f"intended, review it (`ipc-conformance golden diff`) and run `{UPDATE_COMMAND}`"
    )


@without_syrupy
@pytest.mark.parametrize("manifest_id", MANIFESTS)
def test_golden_bytes(manifest_id):
    _assert_files(manifest_id, MSGPACK_SUFFIX)


@without_syrupy
@pytest.mark.parametrize("manifest_id", MANIFESTS)
def test_golden_views(manifest_id):
    _assert_files(manifest_id, VIEW_SUFFIX)


def test_vector_files_are_named_by_their_content():
    """vectors/<Struct>.<variant>.<first 16 hex of the file's sha256><suffix>: what a third party
    may rely on to verify a file without the index."""
    import hashlib

    files = sorted((golden_dir() / VECTORS).iterdir())
    assert len(files) > 600
    for path in files:
        stem, digest = path.name.split(".")[:2], path.name.split(".")[2]
        assert len(stem) == 2 and path.name.endswith((MSGPACK_SUFFIX, VIEW_SUFFIX)), path.name
        assert hashlib.sha256(path.read_bytes()).hexdigest()[:16] == digest, path.name


def test_manifests_share_the_vectors_they_have_in_common():
    """The point of format 2: one file per distinct vector, whatever the number of manifests."""
    named = [c["msgpack"] for m in MANIFESTS for c in read_index(m)["cases"]]
    assert len(set(named)) < len(named) / 2
    assert len(list((golden_dir() / VECTORS).glob("*" + MSGPACK_SUFFIX))) == len(set(named))


@without_syrupy
@pytest.mark.parametrize("manifest_id", MANIFESTS)
def test_index_matches_manifest(manifest_id):
    """The gate: a manifest changed without its golden files fails here, naming the command."""
    manifest = load_manifest(manifest_id)
    path = golden_dir() / manifest_id / INDEX
    want = index_text(manifest, cases(manifest))
    index = read_index(manifest_id)
    assert index is not None, f"golden/{manifest_id}/ has no {INDEX}: run `{UPDATE_COMMAND} --manifest {manifest_id}`"
    assert index["manifest_sha256"] == manifest_digest(manifest), (
        f"spec/manifests/{manifest_id}.json changed but golden/{manifest_id}/ was not regenerated: "
        f"run `{UPDATE_COMMAND} --manifest {manifest_id}` and review the changed vectors"
    )
    assert path.read_text() == want, f"golden/{manifest_id}/{INDEX} is stale: run `{UPDATE_COMMAND}`"


def test_no_unused_golden_files():
    """Files and folders under golden/ that no manifest case accounts for fail the run (like
    snapshot tools' unused snapshots); `ipc-conformance golden update` deletes them. With syrupy,
unused vector files are its unused snapshots (the session fails; --snapshot-update deletes them)."""
    unused = [p for p in check() if p.kind == "unused" and not (SYRUPY and p.path.startswith(VECTORS + "/"))]
    assert not unused, (f"unused golden files: {', '.join(p.path for p in unused[:8])}: "
                        f"delete them with `{UPDATE_COMMAND}`")


def test_every_struct_is_reached_by_a_vector():
    """Nested structs have no vectors of their own: each must appear inside some message's."""
    for manifest_id in MANIFESTS:
        manifest = load_manifest(manifest_id)
        seen: set[str] = set()
        for case in cases(manifest):
            _collect_structs(json.loads(case.view_text)["value"], seen)
        missing = sorted(n for n, s in manifest.structs.items() if s.role != "base" and n not in seen)
        assert not missing, f"{manifest_id}: no golden vector contains {missing}"


def _collect_structs(view, seen: set[str]) -> None:
    if isinstance(view, dict):
        if "$struct" in view:
            seen.add(view["$struct"])
        for v in view.values():
            _collect_structs(v, seen)
    elif isinstance(view, list):
        for v in view:
            _collect_structs(v, seen)
