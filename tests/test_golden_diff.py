"""golden diff: what a manifest change does to the golden vectors, for a reviewer. Planted
changes between a bundled manifest and an edited copy give exactly the expected entries."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.paths import manifests_dir
from conformance.schema.golden.diff import (
    ABSENT,
    FieldChange,
    GoldenDiff,
    Vector,
    diff_vectors,
    golden_diff,
    manifest_vectors,
    render_text,
)
from conformance.schema.manifest import load_manifest

BASE = "sglang-0.5.23"


def _edited(tmp_path: Path, edit) -> Path:
    doc = json.loads((manifests_dir() / f"{BASE}.json").read_text())
    doc["version"] = "0.5.99"
    edit(doc)
    path = tmp_path / "sglang-0.5.99.json"
    path.write_text(json.dumps(doc))
    return path


def _plant_all(doc: dict) -> None:
    structs = doc["structs"]
    # a new defaulted field appended to one struct
    structs["AbortReq"]["fields"].append({"name": "note", "type": "Optional[str]", "default": {"kind": "value"}})
    # a retyped field
    status = next(f for f in structs["ActiveRanksOutput"]["fields"] if f["name"] == "status")
    status["type"] = "List[int]"
    # a removed message
    del structs["AddExternalCorpusReqOutput"]
    doc["union"].remove("AddExternalCorpusReqOutput")
    # an added message
    added = copy.deepcopy(structs["AttachHiCacheStorageReqInput"])
    added["name"] = added["tag"] = "DetachEverythingReqInput"
    structs["DetachEverythingReqInput"] = added
    doc["union"].insert(doc["union"].index("AttachHiCacheStorageReqInput") + 1, "DetachEverythingReqInput")


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[GoldenDiff, dict]:
    new = load_manifest(_edited(tmp_path_factory.mktemp("planted"), _plant_all))
    return golden_diff(load_manifest(BASE), new), manifest_vectors(new)


def test_planted_changes_give_exactly_the_expected_entries(planted):
    result, new_vectors = planted
    assert result.added_messages == ("DetachEverythingReqInput",)
    assert result.removed_messages == ("AddExternalCorpusReqOutput",)
    assert result.added_cases == () and result.removed_cases == ()
    assert result.cases_per_message == {"DetachEverythingReqInput": 3, "AddExternalCorpusReqOutput": 3}
    changed = {(c.struct, c.variant): c for c in result.changed}
    # the retype shows where there are values: ActiveRanksOutput.minimal has `status: []`, the
    # same bytes and view as a List[bool] or a List[int], so it is no change
    assert sorted(changed) == sorted([("AbortReq", "minimal"), ("AbortReq", "typical"), ("AbortReq", "edge"),
                                      ("ActiveRanksOutput", "typical"), ("ActiveRanksOutput", "edge")])
    messages = len(load_manifest(BASE).messages)
    assert result.unchanged == 3 * (messages - 1) - 5  # every other case of both sides: silent

    for variant in ("minimal", "typical", "edge"):
        appended = changed[("AbortReq", variant)]
        # only the new field, absent before; one more element on the wire, in the array header
        assert appended.fields == (FieldChange("note", ABSENT, new_vectors[("AbortReq", variant)].view["note"]),)
        assert appended.bytes_changed and appended.first_difference == 0
        assert appended.new_size > appended.old_size
    retyped = changed[("ActiveRanksOutput", "typical")]
    assert [f.path for f in retyped.fields] and all(f.path.startswith("status") for f in retyped.fields)
    assert all(isinstance(f.old, bool) and type(f.new) is int for f in retyped.fields)


def test_the_text_shows_only_what_changed(planted):
    result, _ = planted
    text = render_text(result)
    lines = text.splitlines()
    assert lines[0] == result.summary() == (
        f"golden diff {BASE} -> sglang-0.5.99: 5 changed, 1 added message, 1 removed message, "
        f"{result.unchanged} unchanged")
    assert "+ DetachEverythingReqInput: new message (3 cases)" in lines
    assert "- AddExternalCorpusReqOutput: removed message (3 cases)" in lines
    header = next(line for line in lines if line.startswith("~ AbortReq.typical: "))
    c = next(c for c in result.changed if (c.struct, c.variant) == ("AbortReq", "typical"))
    assert f"{c.old_size} -> {c.new_size} bytes (+{c.new_size - c.old_size})" in header
    assert f"{c.old_sha256[:16]} -> {c.new_sha256[:16]}" in header and "first difference at byte 0" in header
    assert lines[lines.index(header) + 1].startswith("    note: (absent) -> ")
    # nothing about a vector that did not change, not even the unchanged fields of a changed one
    assert "TokenizedGenerateReqInput" not in text and "http_worker_ipc" not in text
    assert sum(line.startswith("~ ") for line in lines) == 5


def test_an_identical_pair_prints_only_the_no_change_summary(capsys):
    manifest = load_manifest(BASE)
    result = golden_diff(manifest, manifest)
    assert result.empty and result.unchanged == 3 * len(manifest.messages)
    assert render_text(result) == f"golden diff {BASE} -> {BASE}: no change ({result.unchanged} vectors unchanged)\n"
    assert main(["golden", "diff", BASE, BASE]) == 0
    assert capsys.readouterr().out == render_text(result)


def test_a_value_that_changes_without_its_bytes_is_shown():
    """array_like bytes do not carry field names: a renamed field is the same bytes, another view."""
    old = {("S", "typical"): Vector(b"\x92\xa1S\x01", {"$struct": "S", "a": 1})}
    new = {("S", "typical"): Vector(b"\x92\xa1S\x01", {"$struct": "S", "b": 1})}
    result = diff_vectors("o", old, "n", new)
    (change,) = result.changed
    assert not change.bytes_changed and change.first_difference is None
    assert change.fields == (FieldChange("a", 1, ABSENT), FieldChange("b", ABSENT, 1))
    assert "same 4 bytes" in render_text(result)
    # 1 and 1.0 are different views (and different bytes): never "no change"
    floats = {("S", "typical"): Vector(b"\x92\xa1S\xcb" + bytes(8), {"$struct": "S", "a": 1.0})}
    assert diff_vectors("o", old, "n", floats).changed[0].fields == (FieldChange("a", 1, 1.0),)


def test_cli_diffs_a_manifest_file_that_is_not_bundled(tmp_path, capsys):
    path = _edited(tmp_path, lambda doc: doc["structs"]["AbortReq"]["fields"].append(
        {"name": "note", "type": "Optional[str]", "default": {"kind": "value"}}))
    assert main(["golden", "diff", BASE, str(path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"golden diff {BASE} -> sglang-0.5.99: 3 changed, ")
    assert out.count("~ AbortReq.") == 3


@pytest.mark.parametrize("args, message", [
    (["golden", "diff", "sglang-0.0.0", BASE], "no manifest 'sglang-0.0.0'"),
    (["golden", "diff", BASE, "/nonexistent/m.json"], "no manifest '/nonexistent/m.json'"),
    (["golden", "diff", "sglang-0.5.14", BASE], "sglang-0.5.14 is a dataclass catalogue (pickle only)"),
])
def test_cli_bad_input_is_one_line_and_exit_2(args, message):
    out = subprocess.run([sys.executable, "-m", "conformance.cli", *args], capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and message in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_an_inserted_field_is_shown_first_and_the_renumbered_rest_is_cut(tmp_path):
    """The canonical values follow positions: inserting a field renumbers those after it. The
    review leads with the inserted field and cuts the rest to a count."""
    def insert(doc: dict) -> None:
        fields = doc["structs"]["TokenizedGenerateReqInput"]["fields"]
        fields.insert(8, {"name": "priority_class", "type": "Optional[str]", "default": {"kind": "value"}})

    result = golden_diff(load_manifest(BASE), load_manifest(_edited(tmp_path, insert)))
    typical = next(c for c in result.changed if (c.struct, c.variant) == ("TokenizedGenerateReqInput", "typical"))
    assert len(typical.fields) > 12
    text = render_text(result).splitlines()
    at = text.index(next(line for line in text if line.startswith("~ TokenizedGenerateReqInput.typical")))
    assert text[at + 1].startswith("    priority_class: (absent) -> ")
    assert text[at + 13].startswith(f"    ... and {len(typical.fields) - 12} more changed fields")
    assert len(render_text(result, fields=None).splitlines()) > len(text)
