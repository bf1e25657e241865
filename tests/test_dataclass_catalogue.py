"""Implementations from before the msgspec migration: a dataclass catalogue extracts, runs the
suite pickle-only, and diffs against sglang-0.5.23 as a migration report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.schema.manifest import Manifest, load_manifest, save_manifest
from conformance.schema.manifest.extract import extract
from conformance.schema.migration import is_dataclass_catalogue, migration, render_text

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def fork():
    sys.path.insert(0, str(FIXTURES))
    try:
        yield extract("dataclass_io_struct", implementation="dataclass-fork", version="0.4.0")
    finally:
        sys.path.remove(str(FIXTURES))


def test_extract_reads_fields_types_defaults_and_inheritance(fork):
    assert is_dataclass_catalogue(fork) and not is_dataclass_catalogue(load_manifest("sglang-0.5.23"))
    roles = {s.name: s.role for s in fork.structs.values()}
    assert roles == {"BaseReq": "base", "BaseBatchReq": "base", "SamplingParams": "nested", "SessionParams": "nested",
                     "TokenizedGenerateReqInput": "message", "BatchTokenIDOutput": "message", "AbortReq": "message",
                     "FlushCacheReqInput": "message", "ProfileReq": "message", "GetMemPoolSizeReq": "message"}
    gen = fork.structs["TokenizedGenerateReqInput"]
    assert gen.base == "BaseReq" and gen.tag is None and gen.options["dataclass"] and not gen.array_like
    assert [f.name for f in gen.fields][:3] == ["rid", "input_text", "input_ids"]  # the base's field first
    assert gen.field("rid").type == "Optional[Union[List[str], str]]" and gen.field("rid").default.kind == "value"
    assert gen.field("input_ids").type == "List[int]" and gen.field("input_ids").default.kind == "required"
    assert gen.field("sampling_params").type == "SamplingParams"
    # a Python object with no wire form: recorded, not refused
    assert gen.field("time_stats").type == "Optional[Any]"
    assert gen.field("time_stats").annotations == ["python:dataclass_io_struct.RequestTimeStats"]
    assert fork.structs["ProfileReq"].field("type").default.value == "START_PROFILE"
    assert fork.structs["GetMemPoolSizeReq"].field("request_id").default.factory == "opaque"
    assert fork.enums["ProfileReqType"].members == {"START_PROFILE": 1, "STOP_PROFILE": 2}


def test_migration_report_against_sglang_0_5_23(fork):
    report = migration(fork, load_manifest("sglang-0.5.23"))
    assert report.only_source == {"message": ["GetMemPoolSizeReq"]}
    assert "PickleWrapper" in report.only_target["wrapper"]
    structs = {s.name: s for s in report.structs}
    gen = structs["TokenizedGenerateReqInput"]
    assert "input_ids: List[int] -> Optional[Array[q]]" in gen.retyped
    assert "input_embeds: Optional[List[List[float]]]  (required: every sender must fill it)" in gen.added
    assert "lora_path: Optional[str] = null" in gen.removed
    assert structs["ProfileReq"].renamed == ["type -> req_type (ProfileReqType)"]
    notes = {(n.struct, n.field): n for n in report.no_msgpack_form}
    assert notes["TokenizedGenerateReqInput", "time_stats"].line() == (
        "TokenizedGenerateReqInput.time_stats holds dataclass_io_struct.RequestTimeStats objects: "
        "the target wraps it: Optional[PickleWrapper]")
    assert notes["TokenizedGenerateReqInput", "mm_inputs"].target == "Optional[MultimodalProcessorOutput]"
    text = render_text(report)
    assert text.startswith("migration report dataclass-fork-0.4.0 (dataclasses, pickle) -> sglang-0.5.23")
    assert "  ~ renamed?: type -> req_type (ProfileReqType)" in text


def test_schema_diff_prints_the_migration_report(fork, tmp_path, capsys):
    path = tmp_path / "fork.json"
    save_manifest(fork, path)
    assert main(["schema", "diff", str(path), "sglang-0.5.23"]) == 0
    assert "fields with no msgpack form: 4" in capsys.readouterr().out
    assert main(["schema", "diff", str(path), "sglang-0.5.23", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["only_source"] == {"message": ["GetMemPoolSizeReq"]}


def _run(tmp_path: Path, adapter: str, fork) -> tuple[int, dict, str]:
    manifest = tmp_path / "fork.json"
    save_manifest(fork, manifest)
    report = tmp_path / "results.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", adapter, "--manifest", str(manifest),
         "--report", str(report), "--expectations", os.devnull],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    return proc.returncode, json.loads(report.read_text()), proc.stdout + proc.stderr


def test_a_pickle_only_implementation_runs_the_suite(tmp_path, fork):
    rc, report, output = _run(tmp_path, "dataclass_adapter:DataclassAdapter", fork)
    assert rc == 0, output[-3000:]
    results = report["results"]
    passed = [r["id"] for r in results if r["outcome"] == "passed"]
    assert any(i.endswith(".pickle") for i in passed) and not any("msgpack" in i for i in passed)
    assert not [r for r in results if r["outcome"] == "failed"]
    golden = [r for r in results if r["id"].startswith("Required.Golden.")]
    assert golden and all(r["outcome"] == "skipped" and "does not check msgpack" in r["message"] for r in golden)


def test_a_broken_pickle_only_implementation_fails(tmp_path, fork):
    rc, report, output = _run(tmp_path, "dataclass_adapter:DropsLastField", fork)
    failed = [r["id"] for r in report["results"] if r["outcome"] == "failed"]
    assert rc == 1 and any(".RoundTrip." in i and i.endswith(".pickle") for i in failed), output[-3000:]


def test_schema_verify_refuses_a_dataclass_catalogue(fork, tmp_path, capsys):
    path = tmp_path / "fork.json"
    save_manifest(fork, path)
    assert main(["schema", "verify", str(path), "sglang-0.5.23"]) == 2
    assert "dataclass catalogue (no msgpack form)" in capsys.readouterr().err


# -- the report on hand-made catalogues: renamed structs, HTTP-side dataclasses, eras -----------
def _dataclass_era(renames: dict[str, str]) -> Manifest:
    """sglang-0.5.23 as a dataclass catalogue: some structs under older names, no tags,
    token ids as plain `Array`, the HTTP-side GenerateReqInput still in it."""
    import msgspec

    from conformance.schema.manifest import Field, StructSpec

    m = load_manifest("sglang-0.5.23")
    back = {new: old for old, new in renames.items()}
    structs = {}
    for name, spec in m.structs.items():
        fields = [msgspec.structs.replace(f, type=f.type.replace("Array[q]", "Array")) for f in spec.fields]
        structs[back.get(name, name)] = msgspec.structs.replace(
            spec, name=back.get(name, name), tag=None, fields=fields, options={"dataclass": True})
    structs["GenerateReqInput"] = StructSpec(name="GenerateReqInput", module="sglang.srt.managers.io_struct",
                                             fields=[Field(name="text", type="Optional[str]")], role="message",
                                             options={"dataclass": True})
    return msgspec.structs.replace(m, version="0.4.10-dc", structs=structs,
                                   union=[back.get(u, u) for u in m.union] + ["GenerateReqInput"])


RENAMED = {"BatchTokenIDOut": "BatchTokenIDOutput", "BatchStrOut": "BatchStrOutput",
           "TokenizerWorkerRegistration": "TokenizerWorkerRegistrationReq"}


def test_renamed_structs_are_paired_not_dropped_and_added():
    new = load_manifest("sglang-0.5.23")
    assert set(RENAMED.values()) <= set(new.structs)
    report = migration(_dataclass_era(RENAMED), new)
    dropped = {n for names in report.only_source.values() for n in names}
    added = {n for names in report.only_target.values() for n in names}
    assert not dropped & set(RENAMED) and not added & set(RENAMED.values())
    structs = {s.name: s for s in report.structs}
    for old, new_name in RENAMED.items():
        assert structs[f"{old} -> {new_name}"].struct_renamed == f"{old} -> {new_name}"
    text = render_text(report)
    assert ("BatchTokenIDOut -> BatchTokenIDOutput  (renamed struct: a similar name and shared fields, or an alias "
            "line; a new wire tag)") in text
    # dissimilar names stay apart even with the same fields
    assert "StartProfile" not in str(report.structs)


def test_http_side_dataclasses_stay_dataclasses():
    report = migration(_dataclass_era({}), load_manifest("sglang-0.5.23"))
    assert report.http_side == ["GenerateReqInput"]
    assert "GenerateReqInput" not in str(report.only_source)
    assert "HTTP-side, not IPC: stays a dataclass: GenerateReqInput" in render_text(report)


def test_a_missing_typecode_is_not_a_retype():
    report = migration(_dataclass_era({}), load_manifest("sglang-0.5.23"))
    assert not [r for s in report.structs for r in s.retyped if "Array" in r], report.structs
    assert not [s for s in report.structs if s.name == "TokenizedGenerateReqInput"]  # nothing else differs


def test_the_reversed_report_names_each_side_by_its_era():
    old, new = load_manifest("sglang-0.5.23"), _dataclass_era(RENAMED)
    text = render_text(migration(old, new))
    assert text.startswith("migration report sglang-0.5.23 (msgspec structs) -> sglang-0.4.10-dc "
                           "(dataclasses, pickle)\n")
    assert "BatchTokenIDOutput -> BatchTokenIDOut" in text


# -- the migration reports of real dataclass-era releases (wheels from .ci/fetch-sglang-wheels) -----
_RENAMES = ("BatchTokenIDOut -> BatchTokenIDOutput", "BatchStrOut -> BatchStrOutput",
            "BatchEmbeddingOut -> BatchEmbeddingOutput", "LoRAUpdateResult -> LoRAUpdateOutput")


@pytest.mark.parametrize("version", ["0.4.10", "0.5.1"])
def test_the_migration_reports_of_real_releases_pair_their_renames(version):
    from conformance.schema.manifest.source import extract_source
    from conformance.schema.migration import migration, render_text

    folder = os.environ.get("IPC_SGLANG_WHEELS")
    wheels = sorted(Path(folder).glob(f"sglang-{version}-*.whl")) if folder else []
    if not wheels:
        pytest.skip(f"IPC_SGLANG_WHEELS has no sglang {version} wheel (.ci/fetch-sglang-wheels)")
    report = migration(extract_source(wheels[0]), load_manifest("sglang-0.5.23"))
    text = render_text(report)
    paired = {s.struct_renamed for s in report.structs if s.struct_renamed}
    assert paired >= set(_RENAMES), text
    for old in ("BatchTokenIDOut", "BatchStrOut", "BatchEmbeddingOut", "LoRAUpdateResult"):
        assert not any(old in names for names in report.only_source.values()), text
    # a note that the target has no such field is true of the renamed struct's fields no more
    wrong = [n for n in report.no_msgpack_form if n.target is None and n.struct.startswith(
        ("BatchTokenIDOut", "BatchStrOut", "BatchEmbeddingOut", "LoRAUpdateResult"))]
    assert not wrong, [n.line() for n in wrong]
