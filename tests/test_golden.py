"""Golden vectors: the live encoder against golden/ (syrupy, single-file extensions).

A run fails on any changed, missing or unused golden file. One command rewrites them,
`ipc-conformance golden update` (tox -e golden-update), so a reviewer reads one kind of diff:
`--snapshot-update` here refuses instead of writing. The file formats are in spec/SPEC.md
("Vector files").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from conformance.paths import golden_dir
from conformance.schema.golden import INDEX, UPDATE_COMMAND, cases, manifest_digest, read_index
from conformance.schema.golden.store import check, expected_files, index_text
from conformance.schema.manifest import bundled_manifests, load_manifest

MANIFESTS = bundled_manifests()
pytestmark = pytest.mark.filterwarnings("ignore:(?s).*Can not relate snapshot:UserWarning")


@pytest.fixture(autouse=True)
def _one_writer(request):
    if request.config.getoption("--snapshot-update", default=False):
        pytest.fail(f"golden files are rewritten by one command only: `{UPDATE_COMMAND}`", pytrace=False)


class _GoldenFile(SingleFileSnapshotExtension):
    """golden/<manifest>/<Struct>.<variant>.<ext>: one file per case, named by the case."""

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(golden_dir() / test_location.item.callspec.params["manifest_id"])

    @classmethod
    def discovery_dirname(cls, *, test_location) -> str:
        return str(golden_dir())

    @classmethod
    def get_snapshot_name(cls, *, test_location, index=0) -> str:
        return str(index)

    @classmethod
    def matches_test_location(cls, *, test_location, snapshot_location: str) -> bool:
        return Path(snapshot_location).parent == Path(cls.dirname(test_location=test_location))


class GoldenBytes(_GoldenFile):
    file_extension = "msgpack"
    _write_mode = WriteMode.BINARY


class GoldenView(_GoldenFile):
    file_extension = "view.json"
    _write_mode = WriteMode.TEXT


def _assert_each(snapshot, extension, pairs) -> None:
    """Assert every (name, data) against its file; report all mismatches, not just the first."""
    failed = []
    for name, data in pairs:
        try:
            assert snapshot(extension_class=extension, name=name) == data
        except AssertionError:
            failed.append(name)
    assert not failed, (
        f"{len(failed)} golden files differ from the live encoder: {', '.join(failed[:8])}"
        f"{' ...' if len(failed) > 8 else ''}. If the change is intended, review it and run "
        f"`{UPDATE_COMMAND}`"
    )


def _live(manifest_id: str, suffix: str) -> list[tuple[str, bytes]]:
    """(case name, what the live encoder makes of it) for the manifest's files ending in suffix."""
    files = expected_files(load_manifest(manifest_id))
    return [(name[: -len(suffix)], data) for name, data in files.items() if name.endswith(suffix)]


@pytest.mark.parametrize("manifest_id", MANIFESTS)
def test_golden_bytes(manifest_id, snapshot):
    _assert_each(snapshot, GoldenBytes, _live(manifest_id, ".msgpack"))


@pytest.mark.parametrize("manifest_id", MANIFESTS)
def test_golden_views(manifest_id, snapshot):
    _assert_each(snapshot, GoldenView, [(n, d.decode("utf-8")) for n, d in _live(manifest_id, ".view.json")])


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
    syrupy's unused snapshots); `ipc-conformance golden update` deletes them."""
    unused = [p for p in check() if p.kind == "unused"]
    assert not unused, (f"unused golden files: {', '.join(p.path for p in unused[:8])}: "
                        f"delete them with `{UPDATE_COMMAND}`")


def test_every_struct_is_reached_by_a_vector():
    """Nested structs have no vectors of their own: each must appear inside some message's."""
    for manifest_id in MANIFESTS:
        manifest = load_manifest(manifest_id)
        seen: set[str] = set()
        for _, text in _live(manifest_id, ".view.json"):
            _collect_structs(json.loads(text)["value"], seen)
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
