"""Golden vectors through syrupy (conformance.schema.golden.syrupy_extension), end to end in a
scratch copy of golden/: a changed field fails the snapshot with its path and old -> new value,
`--snapshot-update` rewrites only the files that changed, an unused vector is reported as syrupy
reports unused snapshots, and broken input stops the update with one line, nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("syrupy", reason="syrupy is in the dev extra (Python 3.11+)")

from conformance.paths import golden_dir, manifests_dir
from conformance.schema.golden.store import VECTORS, expected_files, index_file
from conformance.schema.manifest import load_manifest

pytest_plugins = ["pytester"]

MANIFEST = "sglang-0.5.23"

TEST_FILE = '''
from pathlib import Path

from conformance.schema.golden.syrupy_extension import GoldenSnapshotExtension
from conformance.schema.manifest import load_manifest

GOLDEN = GoldenSnapshotExtension.at(Path({root!r}))


def test_golden(snapshot):
    assert snapshot.use_extension(GOLDEN)(name={name!r}) == {value}
'''


@pytest.fixture(scope="module")
def edited(tmp_path_factory) -> Path:
    """The edited manifest's file. pytester runs pytest in this process and forgets the modules
    each run imports: what the runs need (torch, the catalogues' generated modules) is imported
    here, once, so that no run imports it again."""
    import conformance.schema.golden.syrupy_extension  # noqa: F401 - imported before the pytester runs
    from conformance.schema.golden.catalogue import catalogue_for

    path = _edited_manifest(tmp_path_factory.mktemp("manifest") / f"{MANIFEST}.json")
    for manifest in (load_manifest(MANIFEST), load_manifest(path)):
        catalogue_for(manifest).encode(catalogue_for(manifest).classes["AbortReq"]())
    return path


def _scratch_store(root: Path) -> Path:
    """golden/<MANIFEST>/ and the vectors its index names, copied."""
    (root / VECTORS).mkdir(parents=True)
    shutil.copytree(golden_dir() / MANIFEST, root / MANIFEST)
    for case in json.loads((root / index_file(MANIFEST)).read_text())["cases"]:
        for key in ("msgpack", "view"):
            shutil.copy2(golden_dir() / case[key], root / case[key])
    return root


def _state(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under root: (inode, mtime_ns, content): what a write, even of the same bytes, changes."""
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}


def _test_file(pytester, root: Path, value: str, name: str = MANIFEST) -> None:
    pytester.makepyfile(test_scratch_golden=TEST_FILE.format(root=str(root), name=name, value=value))


def _edited_manifest(path: Path) -> Path:
    """The bundled manifest with one field's value changed: AbortReq.abort_all defaults to true."""
    doc = json.loads((manifests_dir() / f"{MANIFEST}.json").read_text())
    field = next(f for f in doc["structs"]["AbortReq"]["fields"] if f["name"] == "abort_all")
    assert field["default"] == {"kind": "value", "value": False}
    field["default"]["value"] = True
    path.write_text(json.dumps(doc, indent=1))
    return path


def test_a_changed_field_fails_with_its_values_and_the_update_rewrites_only_what_changed(pytester, tmp_path, edited):
    root = _scratch_store(tmp_path / "golden")
    manifest = edited
    _test_file(pytester, root, f"load_manifest({str(manifest)!r})")
    before = _state(root)

    failed = pytester.runpytest("-p", "no:cacheprovider")
    failed.assert_outcomes(failed=1)
    out = failed.stdout.str()
    assert "~ AbortReq.minimal:" in out and "abort_all: false -> true" in out, out
    assert "1 changed" in out and "1 snapshot failed" in out, out
    assert _state(root) == before  # a failing run writes nothing

    updated = pytester.runpytest("-p", "no:cacheprovider", "--snapshot-update")
    updated.assert_outcomes(passed=1)
    assert "1 snapshot updated" in updated.stdout.str()
    after = _state(root)
    rewritten = {p for p in before.keys() & after.keys() if before[p] != after[p]}
    written, deleted = after.keys() - before.keys(), before.keys() - after.keys()
    old_minimal = {c[k] for c in json.loads(before[index_file(MANIFEST)][2])["cases"]
                   if (c["struct"], c["variant"]) == ("AbortReq", "minimal") for k in ("msgpack", "view")}
    assert rewritten == {index_file(MANIFEST), f"{MANIFEST}/refusals.json"}
    assert deleted == old_minimal  # no other index of this store names them
    assert len(written) == 2 and all(p.startswith(f"{VECTORS}/AbortReq.minimal.") for p in written), written
    assert {p: after[p][2] for p in after} == expected_files(load_manifest(manifest))  # = golden check

    again = pytester.runpytest("-p", "no:cacheprovider", "--snapshot-update")  # nothing to do: nothing written
    again.assert_outcomes(passed=1)
    assert "1 snapshot passed" in again.stdout.str() and _state(root) == after


def test_an_unused_vector_is_reported_then_deleted_by_the_update(pytester, tmp_path, edited):
    root = _scratch_store(tmp_path / "golden")
    stray = root / VECTORS / "AbortReq.minimal.0000000000000000.msgpack"
    stray.write_bytes(b"\x90")
    _test_file(pytester, root, f"load_manifest({MANIFEST!r})")

    reported = pytester.runpytest("-p", "no:cacheprovider", "--snapshot-details")
    assert reported.ret == 1  # syrupy fails a session with unused snapshots
    out = reported.stdout.str()
    assert "1 snapshot passed. 1 snapshot unused." in out, out
    assert f"Unused {stray.name} ({root / VECTORS / 'test_scratch_golden'})" in out, out
    assert "Re-run pytest with --snapshot-update to delete unused snapshots." in out

    before = _state(root)
    deleted = pytester.runpytest("-p", "no:cacheprovider", "--snapshot-update")
    assert deleted.ret == 0 and "1 unused snapshot deleted." in deleted.stdout.str()
    assert not stray.exists() and _state(root) == {k: v for k, v in before.items() if k != f"{VECTORS}/{stray.name}"}


def _refused(pytester, root: Path, value: str, line: str) -> None:
    before = _state(root)
    result = pytester.runpytest("-p", "no:cacheprovider", "--snapshot-update")
    result.assert_outcomes(failed=1)
    errors = [s for s in result.stdout.lines if s.startswith("E ")]
    # the first line under syrupy's header says it, whole (pytest cuts explanations at 640 characters)
    assert errors[0].endswith("assert [- snapshot] == [+ received]"), result.stdout.str()
    assert line in errors[1], result.stdout.str()
    if "GoldenError" in line:
        assert errors[1].endswith("`ipc-conformance golden update --repair`"), errors[1]
    assert _state(root) == before  # nothing written, nothing deleted


def test_update_refuses_a_corrupted_vector(pytester, tmp_path, edited):
    root = _scratch_store(tmp_path / "golden")
    victim = json.loads((root / index_file(MANIFEST)).read_text())["cases"][4]["msgpack"]
    (root / victim).write_bytes(b"\x90")
    _test_file(pytester, root, f"load_manifest({MANIFEST!r})")
    _refused(pytester, root, MANIFEST, f"GoldenError: golden/{victim} is corrupted (its content hashes to")


def test_update_refuses_an_index_naming_a_missing_vector(pytester, tmp_path, edited):
    root = _scratch_store(tmp_path / "golden")
    victim = json.loads((root / index_file(MANIFEST)).read_text())["cases"][7]["view"]
    (root / victim).unlink()
    _test_file(pytester, root, f"load_manifest({MANIFEST!r})")
    _refused(pytester, root, MANIFEST, f"golden/{index_file(MANIFEST)} names golden/{victim}, which is missing")


def test_update_refuses_a_manifest_that_does_not_exist(pytester, tmp_path, edited):
    root = _scratch_store(tmp_path / "golden")
    _test_file(pytester, root, "'nosuch-1.0'", name="nosuch-1.0")
    _refused(pytester, root, "nosuch-1.0", "UsageError: no manifest 'nosuch-1.0'")
    assert not (root / "nosuch-1.0").exists()


def test_a_snapshot_without_a_manifest_name_says_how_to_name_it(pytester, tmp_path, edited):
    root = _scratch_store(tmp_path / "golden")
    pytester.makepyfile(test_scratch_golden=TEST_FILE.format(root=str(root), name=MANIFEST, value="0").replace(
        f"(name={MANIFEST!r})", ""))
    before = _state(root)
    result = pytester.runpytest("-p", "no:cacheprovider", "--snapshot-update")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E   *GoldenError: a golden snapshot is named by its manifest id: *"])
    assert _state(root) == before


def test_golden_update_is_the_same_writer_and_refuses_the_same_way(tmp_path, monkeypatch, capsys, edited):
    """`ipc-conformance golden update`: a corrupted vector stops it with one line (exit 2), nothing
    written; --repair rewrites only that file; a second update writes nothing."""
    import conformance.paths
    import conformance.schema.golden.store as store
    from conformance.cli import main

    root = _scratch_store(tmp_path / "golden")
    monkeypatch.setattr(conformance.paths, "golden_dir", lambda: root)
    monkeypatch.setattr(store, "golden_dir", lambda: root)
    victim = json.loads((root / index_file(MANIFEST)).read_text())["cases"][4]["msgpack"]
    (root / victim).write_bytes(b"\x90")
    before = _state(root)
    assert main(["golden", "update", "--manifest", MANIFEST]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"golden/{victim} is corrupted" in err[0] and "--repair" in err[0], err
    assert _state(root) == before

    assert main(["golden", "update", "--manifest", MANIFEST, "--repair"]) == 0
    after = _state(root)
    assert {p for p in before if before[p] != after[p]} == {victim} and after.keys() == before.keys()
    assert main(["golden", "update", "--manifest", MANIFEST]) == 0
    assert "golden: up to date" in capsys.readouterr().out and _state(root) == after


def test_a_manifest_without_golden_files_is_a_new_snapshot(pytester, tmp_path, edited):
    root = tmp_path / "golden"
    root.mkdir()
    _test_file(pytester, root, f"load_manifest({MANIFEST!r})")
    missing = pytester.runpytest("-p", "no:cacheprovider")
    missing.assert_outcomes(failed=1)
    want = expected_files(load_manifest(MANIFEST))
    missing.stdout.fnmatch_lines([f"E  *golden/{MANIFEST}/ has no index.json: `pytest --snapshot-update` writes "
                                  f"its {len(want)} files"])
    assert not any(root.iterdir())

    created = pytester.runpytest("-p", "no:cacheprovider", "--snapshot-update")
    created.assert_outcomes(passed=1)
    assert "1 snapshot generated." in created.stdout.str()
    assert {k: v[2] for k, v in _state(root).items()} == want
