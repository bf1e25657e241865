"""Schema diff: named rules, FULL/BACKWARD/FORWARD/BREAKING per peer kind, CLI, committed reports."""

from __future__ import annotations

import json
import pickle
import sys
import types
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.cli import main
from conformance.schema.diff import (
    BACKWARD,
    BREAKING,
    FORWARD,
    FULL,
    _version_key,
    allowed,
    diff,
    meet,
    older_manifests,
    render_text,
)
from conformance.schema.manifest import Default, EnumSpec, Field, Manifest, StructSpec, load_manifest

ROOT = Path(__file__).resolve().parents[1]
DIFFS = ROOT / "spec" / "diffs"
REQ = Default("required")
NONE = Default("value", value=None)


def f(name: str, type_: str = "int", default: Default = REQ) -> Field:
    return Field(name=name, type=type_, default=default)


def struct(name: str, *fields: Field, array_like: bool = True, kw_only: bool = True, tag: str | None = "",
           role: str = "message", module: str = "m") -> StructSpec:
    return StructSpec(name=name, module=module, fields=list(fields), tag=name if tag == "" else tag,
                      options={"array_like": array_like, "kw_only": kw_only}, role=role)


def manifest(*structs: StructSpec, version: str = "1", enums=None, union=None) -> Manifest:
    return Manifest(implementation="t", version=version, module="m", structs={s.name: s for s in structs},
                    enums=enums or {}, union=union or [s.name for s in structs if s.role == "message"] + ["int"])


def one(old: StructSpec, new: StructSpec):
    result = diff(manifest(old), manifest(new, version="2"))
    assert len(result.changes) == 1, render_text(result)
    return result.changes[0]


A = [f("rid", "Optional[str]", NONE), f("x")]


@pytest.mark.parametrize("new_fields, rule, msgpack, pickle_", [
    (A + [f("y", "int", Default("value", value=0))], "field-appended-with-default", FULL, BACKWARD),
    (A + [f("y")], "field-appended-without-default", FORWARD, BREAKING),
    ([A[0], f("y", "int", Default("value", value=0)), A[1]], "field-inserted", BREAKING, BACKWARD),
    ([A[1], A[0]], "fields-reordered", BREAKING, FULL),
    ([A[0], f("z")], "field-renamed", FULL, BREAKING),
    ([A[0], f("x", "Optional[int]")], "type-widened", BACKWARD, BACKWARD),
    ([A[0], f("x", "Literal[1, 2]")], "type-narrowed", FORWARD, FORWARD),
    ([A[0], f("x", "str")], "type-changed", BREAKING, BREAKING),
    ([A[0], f("x", "int", Default("value", value=3))], "default-added", FULL, FULL),
])
def test_array_like_field_rules(new_fields, rule, msgpack, pickle_):
    change = one(struct("S", *A), struct("S", *new_fields))
    assert (change.rule, change.msgpack, change.pickle) == (rule, msgpack, pickle_), change.line()


def test_removing_fields():
    last = one(struct("S", *A, f("y", "int", Default("value", value=0))), struct("S", *A))
    assert (last.rule, last.msgpack, last.pickle) == ("field-removed-last", FULL, FORWARD)
    required_last = one(struct("S", *A, f("y")), struct("S", *A))
    assert (required_last.msgpack, required_last.pickle) == (BACKWARD, BREAKING)
    middle = one(struct("S", *A), struct("S", A[1]))
    assert (middle.rule, middle.msgpack) == ("field-removed", BREAKING)


def test_respelled_containers_are_full_for_msgpack_but_not_for_pickle():
    change = one(struct("S", f("x", "List[int]")), struct("S", f("x", "Tuple[int, ...]")))
    assert (change.rule, change.msgpack, change.pickle) == ("type-respelled", FULL, BREAKING)


def test_ext_code_change_is_named():
    change = one(struct("S", f("t", "Optional[Tensor]")), struct("S", f("t", "Optional[NDArray]")))
    assert change.rule == "ext-code-changed" and change.msgpack == BREAKING
    assert "ext 2" in change.detail and "ext 3" in change.detail


def test_map_structs_match_fields_by_name():
    old = struct("M", f("a"), f("b"), array_like=False, tag=None, role="nested")
    assert one(old, struct("M", f("b"), f("a"), array_like=False, tag=None, role="nested")).msgpack == FULL
    added = one(old, struct("M", f("c", "int", NONE), f("a"), f("b"), array_like=False, tag=None, role="nested"))
    assert (added.rule, added.msgpack) == ("field-added-with-default", FULL)


def test_positional_pickle_for_structs_without_kw_only():
    old, new = struct("P", f("a"), kw_only=False), struct("P", f("b", "int", NONE), f("a"), kw_only=False)
    change = one(old, new)
    assert (change.rule, change.pickle) == ("field-inserted", BREAKING)
    reorder = one(struct("P", f("a"), f("b"), kw_only=False), struct("P", f("b"), f("a"), kw_only=False))
    assert reorder.pickle == BREAKING


def test_struct_level_rules():
    assert one(struct("S", f("a")), struct("S", f("a"), tag="T")).rule == "tag-changed"
    moved = one(struct("S", f("a")), struct("S", f("a"), module="n"))
    assert (moved.rule, moved.msgpack, moved.pickle) == ("class-moved", FULL, BACKWARD)
    encoding = one(struct("S", f("a")), struct("S", f("a"), array_like=False))
    assert (encoding.rule, encoding.msgpack) == ("encoding-changed", BREAKING)
    result = diff(manifest(struct("S", f("a"))), manifest(struct("S", f("a")), struct("N", f("a")), version="2"))
    assert [(c.rule, c.msgpack) for c in result.changes] == [("message-added", BACKWARD)]
    assert result.msgpack == BACKWARD
    back = diff(manifest(struct("S", f("a")), struct("N", f("a"))), manifest(struct("S", f("a")), version="2"))
    assert [(c.rule, c.msgpack) for c in back.changes] == [("message-removed", BREAKING)]


def test_enum_rules():
    def with_enum(members, module="m"):
        return manifest(struct("S", f("e", "E")), enums={"E": EnumSpec(name="E", module=module, members=members)})

    old = with_enum({"A": 1, "B": 2})
    rules = lambda new: {(c.rule, c.msgpack) for c in diff(old, new).changes}
    assert rules(with_enum({"A": 1, "B": 2, "C": 3})) == {("enum-member-added", BACKWARD)}
    assert rules(with_enum({"A": 1})) == {("enum-member-removed", FORWARD)}
    assert rules(with_enum({"A": 1, "BB": 2})) == {("enum-member-renamed", FULL)}
    assert rules(with_enum({"A": 1, "B": 5})) == {("enum-member-value-changed", BREAKING)}


def test_no_change_is_full():
    m = load_manifest("sglang-0.5.23")
    result = diff(m, m)
    assert result.changes == [] and result.msgpack == FULL and "no changes" in render_text(result)


def test_classification_algebra():
    assert meet(BACKWARD, FORWARD) == BREAKING and meet(FULL, BACKWARD) == BACKWARD and meet() == FULL
    assert allowed(FULL, "BACKWARD") and not allowed(FORWARD, "BACKWARD") and allowed(BREAKING, "NONE")


# -- upstream history (hand-verified against the release sources, see spec/diffs/README.md) --
def test_upstream_0_5_21_to_0_5_22_inserts_fields_into_array_like_structs():
    result = diff(load_manifest("sglang-0.5.21"), load_manifest("sglang-0.5.22"))
    found = {(c.subject, c.rule, c.field) for c in result.changes}
    assert ("SamplingParams", "field-inserted", "watermark") in found
    assert ("TokenizedEmbeddingReqInput", "field-inserted", "decision_layout") in found
    assert ("PositionalEmbeds", "type-widened", "embeds") in found
    assert result.msgpack == BREAKING


def test_upstream_0_5_22_to_0_5_23_only_appends_and_adds():
    result = diff(load_manifest("sglang-0.5.22"), load_manifest("sglang-0.5.23"))
    assert result.msgpack == BACKWARD
    assert {c.rule for c in result.changes} == {"field-appended-with-default", "message-added", "class-moved"}


def _expected_reports() -> dict[str, str]:
    """What `schema diff OLD NEW` prints for each consecutive pair of bundled releases (a
    migration report where one side is a dataclass catalogue)."""
    from conformance.schema.manifest import bundled_manifests
    from conformance.schema.migration import migration
    from conformance.schema.migration import render_text as render_migration

    sglang = [load_manifest(m) for m in bundled_manifests() if m.startswith("sglang-")]
    sglang.sort(key=lambda m: _version_key(m.version))
    return {f"{a.id}..{b.id}.txt": (render_migration(migration(a, b)) if a.is_dataclass_catalogue
                                    or b.is_dataclass_catalogue else render_text(diff(a, b)))
            for a, b in zip(sglang, sglang[1:])}


def test_committed_upstream_diff_reports_are_current():
    for name, text in _expected_reports().items():
        path = DIFFS / name
        assert path.exists() and path.read_text() == text, (
            f"spec/diffs/{name} is missing or stale: regenerate it with "
            f"`ipc-conformance schema diff {name.split('..')[0]} {name.split('..')[1][:-4]} > spec/diffs/{name}`")


def test_reference_structs_match_the_committed_manifest():
    """The gate: the live reference catalogue against the manifest it was generated from."""
    from conformance.adapters import load_adapter

    adapter = load_adapter("reference")
    committed = load_manifest(adapter.manifest_id())
    result = diff(committed, adapter.live_manifest(), modules=False)
    assert not result.changes, (
        f"reference_impl/io_struct.py drifted from spec/manifests/{committed.id}.json:\n{render_text(result)}"
        f"Regenerate it: `ipc-conformance codegen {committed.id} --out reference_impl/io_struct.py`; "
        f"if the manifest is what changed, also run `ipc-conformance golden update` and review the vectors")


# -- the CLI ----------------------------------------------------------------------------
def test_cli_text_json_check_and_transitive(capsys):
    assert main(["schema", "diff", "sglang-0.5.22", "sglang-0.5.23"]) == 0
    assert "field-appended-with-default: gc_threshold" in capsys.readouterr().out
    assert main(["schema", "diff", "sglang-0.5.22", "sglang-0.5.23", "--check", "BACKWARD"]) == 0
    assert main(["schema", "diff", "sglang-0.5.22", "sglang-0.5.23", "--check", "FULL"]) == 1
    assert "message-added" in capsys.readouterr().err
    assert main(["schema", "diff", "sglang-0.5.21", "sglang-0.5.22", "--check", "BACKWARD"]) == 1
    capsys.readouterr()
    assert main(["schema", "diff", "sglang-0.5.22", "sglang-0.5.23", "--transitive", "--format", "json"]) == 0
    reports = json.loads(capsys.readouterr().out)
    older = [m.id for m in older_manifests(load_manifest("sglang-0.5.23")) if m.id != "sglang-0.5.22"]
    assert [r["old"] for r in reports] == ["sglang-0.5.22", *older] and "sglang-0.5.21" in older
    assert reports[0]["subjects"]["FreezeGCReq"]["changes"][0]["rule"] == "field-appended-with-default"
    assert main(["schema", "diff", "sglang-0.5.22", "sglang-0.5.23", "--transitive", "--check", "BACKWARD"]) == 1
    versions = [m.version for m in older_manifests(load_manifest("sglang-0.5.21"))]
    assert versions[-2:] == ["0.5.19", "0.5.20"] and "0.5.21" not in versions


def test_cli_live_reference_and_pickle_peers(capsys):
    assert main(["schema", "diff", "sglang-0.5.23", "reference", "--ignore-modules", "--check", "FULL",
                 "--peers", "both"]) == 0
    assert "no changes" in capsys.readouterr().out
    assert main(["schema", "diff", "sglang-0.5.23", "live:reference_impl.io_struct", "--union-attr",
                 "CUSTOM_MESSAGE_TYPES", "--ignore-modules", "--check", "FULL"]) == 0
    assert main(["schema", "diff", "sglang-0.5.22", "sglang-0.5.23", "--check", "BACKWARD", "--peers", "pickle"]) == 0
    assert main(["schema", "diff", str(ROOT / "spec" / "manifests" / "sglang-0.5.21.json"), "sglang-0.5.22",
                 "--check", "BACKWARD", "--peers", "pickle"]) == 0  # insertions are harmless to kw_only pickle


# -- the classification is sound: what it calls compatible really decodes -----------------
_TYPES = {"int": (int, 7), "str": (str, "s"), "Optional[int]": (int | None, 5)}
_POOL = ["a", "b", "c", "d"]


@st.composite
def _field_lists(draw):
    names = draw(st.lists(st.sampled_from(_POOL), min_size=1, max_size=4, unique=True))
    return [(n, draw(st.sampled_from(sorted(_TYPES))), draw(st.booleans())) for n in names]


def _spec(fields, kw_only=True):
    return struct("S", *[f(n, t, Default("value", value=None) if t.startswith("Optional") and d else
                           (Default("value", value=_TYPES[t][1]) if d else REQ)) for n, t, d in fields],
                  kw_only=kw_only)


def _cls(fields, module, kw_only=True):
    cls_fields = [(n, _TYPES[t][0], None if t.startswith("Optional") else _TYPES[t][1]) if d else (n, _TYPES[t][0])
                  for n, t, d in fields]
    return msgspec.defstruct("S", cls_fields, tag=True, array_like=True, kw_only=kw_only, module=module.__name__)


def _values(fields):
    return {n: _TYPES[t][1] for n, t, _ in fields}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_field_lists(), _field_lists(), st.booleans())
def test_compatible_claims_hold_on_real_msgspec_structs(old_fields, new_fields, kw_only):
    if not kw_only:  # positional structs (pickled as cls(*values)) need their defaults last
        old_fields = sorted(old_fields, key=lambda x: x[2])
        new_fields = sorted(new_fields, key=lambda x: x[2])
    module = types.ModuleType("_schema_diff_probe")
    sys.modules[module.__name__] = module
    old_cls, new_cls = _cls(old_fields, module, kw_only), _cls(new_fields, module, kw_only)
    result = diff(manifest(_spec(old_fields, kw_only)), manifest(_spec(new_fields, kw_only), version="2"))
    common = {n for n, _, _ in old_fields} & {n for n, _, _ in new_fields}

    def crosses(writer, writer_fields, reader, via_pickle: bool) -> bool:
        value = writer(**_values(writer_fields)) if kw_only else writer(*_values(writer_fields).values())
        try:
            if via_pickle:
                module.S = writer
                data = pickle.dumps(value)
                module.S = reader
                got = pickle.loads(data)
            else:
                got = msgspec.msgpack.decode(msgspec.msgpack.encode(value), type=reader)
        except (msgspec.ValidationError, TypeError):
            return False
        return all(getattr(got, n) == getattr(value, n) for n in common)

    for peers, via_pickle in (("msgpack", False), ("pickle", True)):
        level = result.level(peers)
        if level in (FULL, BACKWARD):
            assert crosses(old_cls, old_fields, new_cls, via_pickle), f"{peers}: claimed {level}\n{render_text(result)}"
        if level in (FULL, FORWARD):
            assert crosses(new_cls, new_fields, old_cls, via_pickle), f"{peers}: claimed {level}\n{render_text(result)}"


# -- renamed structs: name and shared fields, field-less by name, alias lines ---------------------
def renames(old: Manifest, new: Manifest) -> dict[str, str]:
    from conformance.schema.renames import struct_renames

    return struct_renames(old, new)


def test_a_field_less_message_renamed_is_paired_by_name_and_breaks():
    old = manifest(struct("HealthCheckOutput"), struct("Other", f("a")))
    new = manifest(struct("HealthCheckReqOutput"), struct("Other", f("a")), version="2")
    assert renames(old, new) == {"HealthCheckOutput": "HealthCheckReqOutput"}
    result = diff(old, new)
    assert {(c.rule, c.msgpack, c.pickle) for c in result.changes} == {
        ("message-renamed", FULL, BREAKING), ("tag-changed", BREAKING, FULL)}
    # two field-less messages with names that are not close stay a removal and an addition
    far = manifest(struct("PauseReq"), version="2")
    assert renames(manifest(struct("FlushCacheReqOutput")), far) == {}


def test_a_removed_message_breaks_whatever_else_is_added():
    old = manifest(struct("GetLoadsReqInput", f("a")), struct("Keep", f("k")))
    new = manifest(struct("Keep", f("k")), struct("ShutdownReq", f("b")), version="2")
    by_rule = {c.rule: c for c in diff(old, new).changes}
    assert (by_rule["message-removed"].msgpack, by_rule["message-removed"].pickle) == (BREAKING, BREAKING)
    assert (by_rule["message-added"].msgpack, by_rule["message-added"].pickle) == (BACKWARD, BACKWARD)


def test_a_rename_with_new_fields_pairs_on_half_the_smaller_side():
    own = [f(n) for n in "abcdefghij"]
    old = manifest(struct("BatchTokenIDOut", *own))  # 10 fields, all kept, and 12 new ones
    new = manifest(struct("BatchTokenIDOutput", *own, *[f(f"n{i}") for i in range(12)]), version="2")
    assert renames(old, new) == {"BatchTokenIDOut": "BatchTokenIDOutput"}
    unrelated = manifest(struct("BatchTokenIDOutput", f("a"), *[f(f"n{i}") for i in range(12)]), version="2")
    assert renames(old, unrelated) == {}  # 1 of the 10 shared: another message


def test_an_alias_line_pairs_a_rename_the_name_alone_would_not():
    fields = [f("success", "bool"), f("error_message", "Optional[str]", NONE)]
    old = manifest(struct("LoRAUpdateResult", *fields))
    new = manifest(struct("LoRAUpdateOutput", *fields), version="2")
    assert renames(old, new) == {}  # LoRAUpdateResult / LoRAUpdateOutput: not close enough by name
    old.extracted_with["aliases"] = "LoadLoRAAdapterReqOutput=LoRAUpdateResult"
    new.extracted_with["aliases"] = ("LoadLoRAAdapterReqOutput=LoRAUpdateOutput, "
                                     "UnloadLoRAAdapterReqOutput=LoRAUpdateOutput")
    assert renames(old, new) == {"LoRAUpdateResult": "LoRAUpdateOutput"}
    kept = manifest(struct("LoRAUpdateOutput", *fields), version="2")  # the new keeps the old name as an alias
    kept.extracted_with["aliases"] = "LoRAUpdateResult=LoRAUpdateOutput"
    assert renames(old, kept) == {"LoRAUpdateResult": "LoRAUpdateOutput"}


def test_extraction_records_alias_lines(tmp_path):
    from conformance.schema.manifest.source import extract_source

    module = tmp_path / "cat" / "io_struct.py"
    module.parent.mkdir()
    module.write_text("import msgspec\n\nclass Base(msgspec.Struct, tag=True, array_like=True):\n    pass\n\n"
                      "class LoRAUpdateOutput(Base):\n    success: bool\n\n"
                      "LoadLoRAAdapterReqOutput = UnloadLoRAAdapterReqOutput = LoRAUpdateOutput\nLIMIT = 3\n")
    found = extract_source(module, module="cat.io_struct")
    assert found.extracted_with["aliases"] == ("LoadLoRAAdapterReqOutput=LoRAUpdateOutput, "
                                               "UnloadLoRAAdapterReqOutput=LoRAUpdateOutput")
