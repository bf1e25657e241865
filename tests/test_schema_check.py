"""ipc-conformance schema check: the live catalogue against a release, verdicts proven by bytes, the
golden update for review, and the exit status by policy (0 ok, 1 not allowed, 2 a user mistake)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.errors import UsageError
from conformance.schema import check
from conformance.schema.manifest import load_manifest, save_manifest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dev_install_adapters import edited  # noqa: E402 - tests/ holds the edit

RELEASE = "sglang-0.5.23"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance.cli", "schema", "check", *args],
                          capture_output=True, text=True, timeout=600)


def appended():
    """The release with a defaulted field appended to AbortReq: FULL on msgpack, BACKWARD on pickle."""
    m = edited(RELEASE)
    spec = m.structs["AbortReq"]
    spec.fields.append(spec.fields.pop([f.name for f in spec.fields].index("inserted")))
    return m


@pytest.fixture(scope="module")
def breaking(tmp_path_factory):
    folder = tmp_path_factory.mktemp("check")
    save_manifest(edited(RELEASE), folder / "edited.json")
    proc = cli("--manifest", str(folder / "edited.json"), "--json", str(folder / "out.json"),
               "--golden-out", str(folder / "golden"))
    return proc, folder


def test_a_breaking_change_fails_the_default_policy(breaking):
    proc, _ = breaking
    assert proc.returncode == 1, proc.stdout + proc.stderr
    header, identity, columns, row = proc.stdout.splitlines()[:4]
    assert header.startswith(f"schema check {RELEASE} -> {RELEASE}+") and "1 change(s), 1 breaking" in header
    assert identity.startswith(f"identity: {RELEASE}+") and f"baseline {RELEASE}: the msgspec-era release nearest " \
        "its version" in identity
    assert columns.split() == ["STRUCT", "CHANGE", "MSGPACK", "PICKLE", "RULE", "PROOF"]
    assert row.startswith("AbortReq.inserted") and row.endswith("field-inserted  bytes confirm")


def test_json_and_golden_update(breaking):
    _, folder = breaking
    out = json.loads((folder / "out.json").read_text())
    assert out["exit"] == 1 and out["violations"] == ["AbortReq.inserted"] and out["against"] == RELEASE
    (row,) = out["rows"]
    assert (row["rule"], row["msgpack"], row["proof"]) == ("field-inserted", "BREAKING", check.CONFIRM)
    golden = out["golden"]
    live = out["live"]
    assert Path(golden["folder"]) == folder / "golden" and (folder / "golden" / f"{live}.json").is_file()
    # what a reviewer reads: only AbortReq's vectors changed, one per variant
    assert golden["added"] == golden["removed"] == []
    assert golden["changed"] and {c.split(".")[0] for c in golden["changed"]} == {"AbortReq"}
    # the folder holds only what changed: one .msgpack and one view per changed case, and the index
    vectors = sorted(p.name for p in (folder / "golden" / "vectors").iterdir())
    assert len(vectors) == 2 * len(golden["changed"]) and all(v.startswith("AbortReq.") for v in vectors), vectors
    assert sorted(p.name for p in (folder / "golden" / live).iterdir()) == ["index.json", "refusals.json"]
    assert golden["files"] == len(vectors) + 2 and golden["bundled_vectors"] > 500


@pytest.mark.parametrize("policy, code", [("BREAKING", 0), ("NOT_FULL", 1), ("NEVER", 0)])
def test_policies(policy, code, tmp_path):
    save_manifest(appended(), tmp_path / "appended.json")
    proc = cli("--manifest", str(tmp_path / "appended.json"), "--fail-on", policy)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "field-appended-with-default" in proc.stdout


def test_a_contradicted_verdict_fails_every_policy_but_never():
    row = check.Row("AbortReq.x", "x", "FULL", "FULL", "field-appended-with-default", check.CONTRADICT)
    assert check.forbidden(row, "BREAKING") and check.forbidden(row, "NOT_FULL") and not check.forbidden(row, "NEVER")


def test_declared_changes():
    (row,) = check.check(edited(RELEASE), load_manifest(RELEASE), prove=False)
    for spec, covers in (("AbortReq", True), ("AbortReq.inserted", True), ("AbortReq.inserted:field-inserted", True),
                         ("AbortReq.other", False), ("AbortReq:field-removed", False), ("BatchStrOutput", False)):
        (allowance,) = check.parse_allowances([spec])
        assert allowance.covers(row) is covers, spec
    with pytest.raises(UsageError, match="STRUCT\\[.FIELD\\]\\[:RULE\\]"):
        check.parse_allowances(["AbortReq:no-such-rule"])


def test_the_baseline_is_the_nearest_release_by_default():
    assert check.baseline_for(check.live_catalogue(manifest=RELEASE)).id == RELEASE
    assert check.baseline_for(edited(RELEASE)).id == RELEASE


@pytest.mark.parametrize("args, message", [
    ((), "one of the arguments --source --impl --manifest is required"),
    (("--source", "/nonexistent/tree"), "--source '/nonexistent/tree': no such file or folder"),
    (("--manifest", RELEASE, "--against", "sglang-0.0.1"), "no manifest 'sglang-0.0.1'"),
    (("--manifest", RELEASE, "--allow", "AbortReq:nope"), "a declared change reads STRUCT[.FIELD][:RULE]"),
])
def test_user_mistakes_exit_2_with_one_line(args, message):
    proc = cli(*args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_an_unchanged_release_passes():
    proc = cli("--manifest", RELEASE)
    assert proc.returncode == 0 and f"schema check {RELEASE} -> {RELEASE} (--manifest {RELEASE}): 0 change(s)" \
        in proc.stdout, proc.stdout + proc.stderr


def test_an_implementation_with_its_own_modules_checked_by_content():
    # the reference keeps every class in reference_impl.io_struct: with --ignore-modules only the
    # wire content counts, and it is the release's
    proc = cli("--impl", "reference", "--against", RELEASE, "--ignore-modules")
    assert proc.returncode == 0 and "0 change(s)" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = check.check(edited(RELEASE), load_manifest(RELEASE), prove=False, modules=False)
    assert [r.rule for r in rows] == ["field-inserted"]
