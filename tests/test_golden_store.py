"""The JSON view (lossless, language-neutral) and the golden store's update/check workflow."""

from __future__ import annotations

import array
import json
import math
import struct
import subprocess
import sys

import msgspec
import numpy as np
import pytest
import torch

from conformance.cli import main
from conformance.compare import differences
from conformance.schema.golden import ViewError, cases, check, dumps, from_view, loads, to_view, update
from conformance.schema.golden.catalogue import catalogue_for
from conformance.schema.golden.store import INDEX, VECTORS, expected_files, read_index
from conformance.schema.golden.writer import GoldenError
from conformance.schema.manifest import load_manifest

MANIFEST = load_manifest("sglang-0.5.23")
CLASSES = catalogue_for(MANIFEST).classes


def _roundtrip(value):
    return from_view(loads(dumps(to_view(value))), CLASSES)


@pytest.mark.parametrize("value", [
    None, True, 0, -(2**63), 2**64 - 1, 1.5, -0.0, 1e308, math.inf, -math.inf, "ünï 漢字 🙂\x00", b"",
    bytes(range(256)),
    [1, [None, -0.18], []], (1, "a"), {1, 2}, frozenset({"x"}), {1: "a", "k": None, (1, 2): 3.0},
    torch.tensor(-0.0, dtype=torch.bfloat16), torch.zeros((0, 4), dtype=torch.int64),
    torch.arange(6.0).reshape(2, 3).t(),
    np.array(-0.0), np.zeros((0, 2), dtype=np.int32), array.array("q", [0, -1, 2**62]), array.array("d", [0.5]),
    msgspec.msgpack.Ext(9, b"\x01\x02"),
])
def test_view_round_trips_exactly(value):
    assert not differences(value.contiguous() if isinstance(value, torch.Tensor) else value, _roundtrip(value))


def test_nan_keeps_its_bits():
    for bits in ("7ff8000000000000", "fff8000000000000", "7ff0000000000001"):
        value = struct.unpack(">d", bytes.fromhex(bits))[0]
        view = to_view(value)
        assert view == ({"$float": "nan"} if bits == "7ff8000000000000" else {"$float": "0x" + bits})
        assert struct.pack(">d", from_view(view, {})).hex() == bits


def test_structs_and_enums_carry_every_field_in_wire_order():
    value = cases(MANIFEST, ["TokenizedGenerateReqInput"])[1].value()
    view = to_view(value)
    assert list(view)[0] == "$struct" and list(view)[1:] == list(value.__struct_fields__)
    assert not differences(value, _roundtrip(value))
    member = list(CLASSES["Modality"])[0]
    assert to_view(member) == {"$enum": "Modality", "member": member.name, "value": member.value}


def test_floats_and_ints_stay_apart_in_the_text():
    text = dumps(to_view([1, 1.0, -0.0, 1e308]))
    assert json.loads(text) == [1, 1.0, -0.0, 1e308] and "1.0" in text and "-0.0" in text and "1e+308" in text


@pytest.mark.parametrize("view, message", [
    ({"a": 1}, "exactly one of"),
    ({"$struct": "Nope"}, "unknown struct"),
    ({"$bytes": "not base64!"}, "invalid base64"),
    ({"$float": "huge"}, "nan, inf"),
    ({"$tensor": {"dtype": "float32", "shape": [2], "device": "cpu", "data": "AAAA"}}, "data bytes"),
    ({"$tensor": {"dtype": "complex_thing", "shape": [], "data": ""}}, "torch dtype"),
    ({"$ndarray": {"dtype": "O", "shape": [1], "data": ""}}, "object arrays"),
    ({"$enum": "Modality", "member": "SMELL"}, "no member"),
    ({"$dict": [[1]]}, "pairs"),
])
def test_bad_views_name_the_problem(view, message):
    with pytest.raises(ViewError, match=message):
        from_view(view, CLASSES)


def test_every_vector_decodes_to_its_view_and_back(tmp_path):
    """For each bundled manifest: the bytes decode to the value the view describes, and the
    view's value encodes to the same bytes (the two files agree)."""
    from conformance.paths import golden_dir
    from conformance.schema.manifest import wire_manifests

    for manifest_id in wire_manifests():
        manifest = load_manifest(manifest_id)
        cat = catalogue_for(manifest)
        listed = {(c["struct"], c["variant"]): c for c in read_index(manifest_id)["cases"]}
        for case in cases(manifest):
            entry = listed[(case.struct, case.variant)]  # a third party's way in: the index names the files
            data = (golden_dir() / entry["msgpack"]).read_bytes()
            view = json.loads((golden_dir() / entry["view"]).read_text())
            assert len(data) == entry["size"] and view["msgpack_sha256"] == entry["sha256"]
            assert view["struct"] == case.struct and view["variant"] == case.variant
            from_text = from_view(view["value"], cat.classes)
            assert not differences(from_text, cat.decode(data)), f"{manifest_id} {case.name}"
            assert cat.encode(from_text) == data, f"{manifest_id} {case.name}"


def test_reference_codec_and_generic_encoder_agree_on_the_reference_manifest():
    from reference_impl import ext

    encoder = msgspec.msgpack.Encoder(enc_hook=ext.enc_hook)
    for case in cases(MANIFEST)[::7]:
        assert encoder.encode(case.value()) == case.msgpack


def test_update_then_check_in_a_scratch_folder(tmp_path):
    ids = ["sglang-0.5.19"]
    fixed = update(ids, root=tmp_path)
    assert {p.kind for p in fixed} == {"missing"} and check(ids, root=tmp_path) == []
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == \
        sorted(expected_files(load_manifest(ids[0])))
    index = json.loads((tmp_path / "sglang-0.5.19" / INDEX).read_text())
    assert index["manifest"] == ids[0] and len(index["cases"]) == 3 * len(load_manifest(ids[0]).messages)
    assert index["format"] == 2 and all(c["msgpack"].startswith(VECTORS + "/") for c in index["cases"])

    typical = next(c["msgpack"] for c in index["cases"] if c["struct"] == "AbortReq" and c["variant"] == "typical")
    (tmp_path / typical).write_bytes(b"\x90")
    (tmp_path / "sglang-0.5.19" / "Stray.minimal.msgpack").write_bytes(b"")
    problems = {(p.kind, p.path) for p in check(ids, root=tmp_path)}
    assert problems == {("changed", typical), ("unused", "sglang-0.5.19/Stray.minimal.msgpack")}
    # a vector whose content does not match its name is not papered over: one line, nothing written
    with pytest.raises(GoldenError, match=f"^golden/{typical} is corrupted .*--repair"):
        update(ids, root=tmp_path)
    assert (tmp_path / "sglang-0.5.19" / "Stray.minimal.msgpack").exists()
    update(ids, root=tmp_path, repair=True)
    assert check(ids, root=tmp_path) == []


def test_vectors_no_manifest_names_are_unused_and_missing_ones_fail(tmp_path):
    """The whole check (no ids) judges golden/vectors/: a file no bundled index names is unused,
    one an index names and that is gone is missing; update refuses the missing one (one line),
    update --repair puts both right."""
    update(root=tmp_path)
    assert check(root=tmp_path) == []
    (tmp_path / VECTORS / "AbortReq.typical.0000000000000000.msgpack").write_bytes(b"\x90")
    shared = read_index("sglang-0.5.19", tmp_path)["cases"][0]["view"]
    assert all(shared in [c["view"] for c in read_index(m, tmp_path)["cases"]]
               for m in ("sglang-0.5.20", "sglang-0.5.23"))  # one file, three manifests
    (tmp_path / shared).unlink()
    problems = {(p.kind, p.path) for p in check(root=tmp_path)}
    assert problems == {("unused", f"{VECTORS}/AbortReq.typical.0000000000000000.msgpack"), ("missing", shared)}
    assert {(p.kind, p.path) for p in check(["sglang-0.5.23"], root=tmp_path)} == {("missing", shared)}
    with pytest.raises(GoldenError, match=f"^golden/sglang-0.5.19/index.json names golden/{shared}, which is missing"):
        update(root=tmp_path)
    assert (tmp_path / VECTORS / "AbortReq.typical.0000000000000000.msgpack").exists()  # nothing done
    update(root=tmp_path, repair=True)
    assert check(root=tmp_path) == []


def test_folders_of_unknown_manifests_are_unused(tmp_path):
    (tmp_path / "sglang-0.0.1").mkdir()
    (tmp_path / "sglang-0.0.1" / INDEX).write_text("{}")
    problems = [p for p in check(root=tmp_path) if p.kind == "unused"]
    assert [p.path for p in problems] == ["sglang-0.0.1/"]


def test_golden_is_deterministic_across_hash_seeds():
    """Another process with another hash seed regenerates exactly the committed bytes."""
    out = subprocess.run([sys.executable, "-m", "conformance.cli", "golden", "check", "--manifest", "sglang-0.5.23"],
                         capture_output=True, text=True, env={"PYTHONHASHSEED": "4242", "PATH": ""})
    assert out.returncode == 0 and "up to date" in out.stdout, out.stdout + out.stderr


def test_cli_golden_check_passes_on_the_committed_vectors(capsys):
    assert main(["golden", "check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_a_new_manifest_adds_only_the_vectors_it_changes_and_update_reviews_them(tmp_path):
    """Format 2's promise: bundling sglang-0.5.23 next to 0.5.22 writes its two files and one pair
    per changed or added case, nothing for the ~280 cases that stay the same; `update` reviews it
    against 0.5.22 with the same diff `golden diff` prints."""
    from conformance.schema.golden.diff import golden_diff, snapshot, update_review

    update(["sglang-0.5.22"], root=tmp_path)
    before = {p.name for p in (tmp_path / VECTORS).iterdir()}
    taken = snapshot(["sglang-0.5.22", "sglang-0.5.23"], tmp_path)
    assert taken["sglang-0.5.23"] is None
    fixed = update(["sglang-0.5.23"], root=tmp_path)
    added = {p.name for p in (tmp_path / VECTORS).iterdir()} - before
    expected = golden_diff(load_manifest("sglang-0.5.22"), load_manifest("sglang-0.5.23"))
    new_cases = len(expected.changed) + 3 * len(expected.added_messages)
    assert 0 < len(added) <= 2 * new_cases < 60
    assert {p.path for p in fixed} == {f"{VECTORS}/{n}" for n in added} | {"sglang-0.5.23/index.json",
                                                                          "sglang-0.5.23/refusals.json"}
    same, review = update_review(taken, tmp_path)
    assert same.empty and review == expected


def test_check_says_what_a_changed_index_changes_in_meaning(tmp_path):
    """One field's default changed in the manifest (AbortReq.abort_all: true): `check` names the
    cases whose vectors change, their hashes old -> new and the field's old -> new value, under
    the changed index; and what the refusals change, under refusals.json. Not a byte offset."""
    import shutil

    from conformance.paths import golden_dir, manifests_dir
    from conformance.schema.golden.store import index_file

    mid = "sglang-0.5.23"
    root = tmp_path / "golden"
    (root / VECTORS).mkdir(parents=True)
    shutil.copytree(golden_dir() / mid, root / mid)
    for case in json.loads((root / index_file(mid)).read_text())["cases"]:
        for key in ("msgpack", "view"):
            shutil.copy2(golden_dir() / case[key], root / case[key])
    doc = json.loads((manifests_dir() / f"{mid}.json").read_text())
    field = next(f for f in doc["structs"]["AbortReq"]["fields"] if f["name"] == "abort_all")
    field["default"]["value"] = True
    edited = tmp_path / f"{mid}.json"
    edited.write_text(json.dumps(doc, indent=1))
    old = {c["variant"]: c["sha256"] for c in read_index(mid, root)["cases"] if c["struct"] == "AbortReq"}
    want = json.loads(expected_files(load_manifest(edited))[index_file(mid)])
    new = {c["variant"]: c["sha256"] for c in want["cases"] if c["struct"] == "AbortReq"}
    changed = [v for v in old if old[v] != new[v]]
    assert changed == ["minimal"]  # the variant that leaves abort_all at its default

    problems = {p.path: p for p in check([str(edited)], root=root)}
    index = problems[index_file(mid)]
    assert index.kind == "changed"
    text = str(index).splitlines()
    assert text[0] == f"changed: {mid}/index.json (in meaning, golden/ -> the manifest)"
    unchanged = len(want["cases"]) - 1
    assert text[1] == f"    golden diff golden/{mid} -> the manifest {mid}: 1 changed, {unchanged} unchanged"
    assert text[2].startswith("    ~ AbortReq.minimal: ")
    assert f"sha256 {old['minimal'][:16]} -> {new['minimal'][:16]}" in text[2]
    assert text[3] == "        abort_all: false -> true"
    assert "~ sglang-0.5.23/index.json: manifest_sha256: " in str(index)
    assert problems[f"{mid}/refusals.json"].lines  # what the refusals change, not a byte offset
