"""A development tree has its own identity: a catalogue that differs from the release it claims
to be gets its own id; classes are chosen by content; a development install runs against its
live catalogue with the nearest release's expected failures (conformance/releases.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import expectations
from conformance.errors import UsageError
from conformance.releases import choose, nearest_release, split_id
from conformance.schema.golden.catalogue import catalogue_for
from conformance.schema.manifest import load_manifest, save_manifest
from conformance.schema.manifest.identity import DIGEST_CHARS, content_digest, own_identity

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dev_install_adapters import edited  # noqa: E402 - tests/ holds the adapters


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "conformance.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)


# -- classes by content, never by id -------------------------------------------------------
def test_the_reference_manifest_gets_the_reference_classes():
    from reference_impl import io_struct

    cat = catalogue_for(load_manifest(io_struct.MANIFEST_ID))
    assert cat.classes["AbortReq"] is io_struct.AbortReq


def test_an_edited_manifest_with_the_reference_id_gets_its_own_classes():
    from reference_impl import io_struct

    changed = edited(io_struct.MANIFEST_ID)
    assert changed.id == io_struct.MANIFEST_ID
    cls = catalogue_for(changed).classes["AbortReq"]
    assert cls is not io_struct.AbortReq
    assert list(cls.__struct_fields__) == [f.name for f in changed.structs["AbortReq"].fields]


def test_schema_verify_of_an_edited_release_has_no_traceback(tmp_path):
    # the scenario: `schema verify sglang-0.5.23 <edited>` died with TypeError
    path = tmp_path / "edited.json"
    save_manifest(edited(), path)
    proc = cli("schema", "verify", "sglang-0.5.23", str(path))
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "AbortReq backward msgpack: loud  [field-inserted]" in proc.stdout


# -- ids -------------------------------------------------------------------------------------
def test_a_catalogue_that_differs_from_its_release_gets_its_own_id():
    changed = own_identity(edited())
    assert changed.id == f"sglang-0.5.23+{content_digest(edited())[:DIGEST_CHARS]}"
    assert own_identity(load_manifest("sglang-0.5.23")).id == "sglang-0.5.23"
    # its digest does not depend on the version it claims: one edited tree, one id suffix
    assert content_digest(changed) == content_digest(edited())


def test_an_unbundled_id_is_kept():
    import msgspec

    dev = msgspec.structs.replace(edited(), version="0.5.24.dev0")
    assert own_identity(dev).id == "sglang-0.5.24.dev0"


# -- what an installed version runs against ------------------------------------------------------
@pytest.mark.parametrize("version, nearest", [
    ("0.5.24.dev0", "sglang-0.5.23"), ("0.5.23+local", "sglang-0.5.23"), ("0.5.23.post1", "sglang-0.5.23"),
    ("0.5.21", "sglang-0.5.20"), ("0.4.10", "sglang-0.5.19"), ("1.0.0", "sglang-0.5.23"),
])
def test_nearest_release(version, nearest):
    assert split_id(nearest) == ("sglang", nearest.split("-")[1])
    bundled = ["sglang-0.5.19", "sglang-0.5.20", "sglang-0.5.23", "other-9.9"]
    assert nearest_release("sglang", version, bundled) == nearest


def test_a_bundled_release_runs_against_itself():
    choice = choose("sglang-0.5.23", ["sglang-0.5.22", "sglang-0.5.23"], ["sglang-0.5.23"])
    assert (choice.manifest, choice.expectations, choice.note) == ("sglang-0.5.23", "sglang-0.5.23", "")
    # a bundled release without a list of its own borrows the nearest release's, and says so
    choice = choose("sglang-0.5.22", ["sglang-0.5.22", "sglang-0.5.23"], ["sglang-0.5.23"])
    assert (choice.manifest, choice.expectations) == ("sglang-0.5.22", "sglang-0.5.23")
    assert "no expected-failure list of its own: using sglang-0.5.23's" in choice.note
    assert choose("sglang-0.5.22", ["sglang-0.5.22"], []).expectations is None


@pytest.mark.parametrize("version", ["0.5.24.dev0", "0.5.23+local"])
def test_a_development_install_runs_its_live_catalogue_with_the_nearest_list(version):
    choice = choose(f"sglang-{version}", ["sglang-0.5.22", "sglang-0.5.23"], ["sglang-0.5.23"])
    assert choice.manifest is None and choice.expectations == "sglang-0.5.23"
    assert "live catalogue" in choice.note and "expected failures of sglang-0.5.23" in choice.note
    assert "--manifest ID|PATH --expectations ID|PATH" in choice.note


def test_the_nearest_release_without_a_list_borrows_the_nearest_list():
    choice = choose("sglang-0.5.22.dev0", ["sglang-0.5.22", "sglang-0.5.23"], ["sglang-0.5.23"])
    assert choice.manifest is None and choice.expectations == "sglang-0.5.23"
    assert "expected failures of sglang-0.5.23" in choice.note
    none = choose("sglang-0.5.22.dev0", ["sglang-0.5.22"], [])
    assert none.expectations is None and "none is bundled" in none.note


def test_expectations_by_id_or_path(tmp_path):
    assert expectations.resolve("sglang-0.5.23") == expectations.HERE / "sglang-0.5.23.txt"
    own = tmp_path / "mine.txt"
    own.write_text("")
    assert expectations.resolve(str(own)) == own
    assert expectations.resolve(os.devnull) == Path(os.devnull)  # no list at all
    with pytest.raises(UsageError, match="no expected-failure list 'nosuch'.*sglang-0.5.23"):
        expectations.resolve("nosuch")
    assert expectations.resolve(str(tmp_path / "new.txt"), new_ok=True) == tmp_path / "new.txt"


# -- the run header ------------------------------------------------------------------------------
SELECT = "AbortReq and Identical and typical"


def test_a_development_install_says_what_it_runs_against():
    proc = cli("run", "--impl", "dev_install_adapters:DevInstall", "--transport", "msgpack", "--", "-k", SELECT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert ("sglang-0.5.24.dev0 is not a bundled release: running against its live catalogue, with the expected "
            "failures of sglang-0.5.23") in proc.stdout


def test_explicit_manifest_and_expectations_by_id():
    proc = cli("run", "--impl", "dev_install_adapters:DevInstall", "--manifest", "sglang-0.5.23",
               "--expectations", "sglang-0.5.23", "--transport", "msgpack", "--", "-k", SELECT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "is not a bundled release" not in proc.stdout


def test_an_unknown_expectations_id_is_a_usage_error():
    proc = cli("run", "--expectations", "sglang-0.0.1", "--", "-k", SELECT)
    assert proc.returncode == 2 and "no expected-failure list 'sglang-0.0.1'" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_an_edited_release_names_its_breaking_changes_in_the_header():
    proc = cli("run", "--impl", "dev_install_adapters:EditedRelease", "--transport", "msgpack", "--", "-k", SELECT)
    assert ("catalogue: the live catalogue of dev_install_adapters:EditedRelease (sglang-0.5.23+"
            in proc.stdout), proc.stdout[-3000:]
    assert ("differs from sglang-0.5.23: 1 change(s), 1 breaking; see them: ipc-conformance schema check "
            "--impl dev_install_adapters:EditedRelease --against sglang-0.5.23") in proc.stdout


def test_a_failure_of_a_changed_struct_points_to_schema_check():
    proc = cli("run", "--impl", "dev_install_adapters:EditedRelease", "--transport", "msgpack", "--",
               "-k", "AbortReq and Catalogue and MatchesManifest")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert ("  schema: AbortReq differs between sglang-0.5.23 and the implementation's live catalogue "
            "(field-inserted): ipc-conformance schema check --impl dev_install_adapters:EditedRelease "
            "--against sglang-0.5.23") in proc.stdout, proc.stdout[-3000:]


def test_a_development_install_with_a_breaking_change_names_each_changed_struct():
    # a real one passes (the run checks the live catalogue against itself): the header is where the
    # change shows. (This stand-in's classes are the release's, so its AbortReq check fails.)
    proc = cli("run", "--impl", "dev_install_adapters:DevInstallBreaking", "--transport", "msgpack", "--",
               "-k", SELECT)
    assert "differs from sglang-0.5.23: 1 change(s), 1 breaking" in proc.stdout, proc.stdout[-3000:]
    assert "  BREAKING: AbortReq.inserted: field-inserted (msgpack BREAKING, pickle BACKWARD)" in proc.stdout, \
        proc.stdout[-3000:]
