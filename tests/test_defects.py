"""The suite catches every defect class (docs/defect-classes.md).

Each defective adapter (tests/defective_adapters.py) is the reference with one
defect; the suite runs against it in a fresh process and must report the
matching check as failed (Recommended checks: as a recommended failure).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.errors import UsageError

HERE = Path(__file__).resolve().parent

# defect class (docs/defect-classes.md)[:what] -> (adapter, -k selection, check ids that must fail)
DEFECTS = {
    "http-base64": ("NoBase64", "HttpBase64", [
        "Required.HttpBase64.UpdateWeightsFromTensorReqInput.Decodes",
        "Required.HttpBase64.UpdateWeightsFromTensorReqInput.RejectsMalformed"]),
    "missing-unwrap": ("ForgetsUnwrap", "Unwrap", [
        "Required.Unwrap.TokenizedGenerateReqInput.NoWrapperLeft.msgpack"]),
    "narrow-logprobs": ("NarrowLogprobs", "Logprobs and msgpack", [
        "Required.Logprobs.BatchTokenIDOutput.NestedNone.prompt.msgpack",
        "Required.Logprobs.BatchStrOutput.NestedNone.mixed_batch.msgpack"]),
    "trace-lost": ("DropsTraceUnderMsgpack", "Trace", [
        "Required.Trace.TokenizedGenerateReqInput.ContextSurvivesForwarding.msgpack"]),
    "top-level-primitive": ("NoTopLevelStr", "Primitive", ["Required.Primitive.str.TopLevel.msgpack"]),
    "pickle-sink": ("UnpicklesWireBytes", "Security", [
        "Required.Security.top_level.NoPickleFromUntrustedPeer",
        "Required.Security.field.NoPickleFromUntrustedPeer"]),
    "tensor-fidelity:dtype": ("UpcastsBfloat16", "Tensor", ["Required.Tensor.bfloat16.Exact.msgpack"]),
    "tensor-fidelity:requires-grad": ("KeepsRequiresGradUnderPickle", "Tensor", [
        "Required.Tensor.requires_grad.Exact.pickle", "Required.Tensor.requires_grad.SameOnBothTransports"]),
    "struct-discovery": ("NoLateSubclasses", "LateGrandchild", ["Required.Catalogue.All.LateGrandchildDecodes"]),
    "narrow-rid": ("NarrowRids", "BatchTokenIDOutput and (Catalogue or RoundTrip)", [
        "Required.Catalogue.BatchTokenIDOutput.MatchesManifest",
        "Required.RoundTrip.BatchTokenIDOutput.Identical.msgpack.typical"]),
    "msgpack-changes-values": ("UntypedDecode", "RoundTrip and msgpack", [
        "Required.RoundTrip.ProfileReq.Identical.msgpack.typical",  # an enum arrives as its value
        "Required.RoundTrip.TokenizedGenerateReqInput.Identical.msgpack.typical"]),
    "buffer-reuse": ("UnsafeZeroCopy", "ZeroCopy", ["Required.ZeroCopy.msgpack.BufferReuseSafe"]),
    "field-inserted": ("ReorderedFields", "(FlushCacheReqInput or BatchTokenIDOutput) and "
                          "(Catalogue or Golden)", [
        "Required.Catalogue.FlushCacheReqInput.MatchesManifest",
        "Required.Catalogue.BatchTokenIDOutput.MatchesManifest",
        # old peer's bytes (the golden vectors) decode to garbage or fail
        "Required.Golden.FlushCacheReqInput.DecodesVector.typical",
        "Required.Golden.BatchTokenIDOutput.DecodesVector.typical"]),
}


def _run(adapter: str, selection: str, tmp_path: Path) -> dict[str, str]:
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", f"defective_adapters:{adapter}",
         "--manifest", "sglang-0.5.23", "--expectations", os.devnull, "--report", str(report), "--", "-k", selection],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    outcome = {r["id"]: r["outcome"] for r in json.loads(report.read_text())["results"]}
    assert outcome, f"nothing selected by -k {selection!r}"
    return outcome


@pytest.mark.slow
@pytest.mark.parametrize("defect", list(DEFECTS))
def test_suite_catches_defect(defect, tmp_path):
    adapter, selection, must_fail = DEFECTS[defect]
    outcome = _run(adapter, selection, tmp_path)
    failing = {"failed", "recommended-failed"}
    missed = [c for c in must_fail if outcome.get(c) not in failing]
    assert not missed, f"defect {defect} ({adapter}) not reported by {missed}: " + str(
        {c: outcome.get(c, "not run") for c in missed})


def test_reference_passes_the_same_selections(tmp_path):
    """The same checks pass on the reference: the failures above are the defects'."""
    selection = " or ".join(f"({sel})" for _, sel, _ in DEFECTS.values())
    env_adapter = "ReferenceAdapter"
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", f"reference_tools.adapter:{env_adapter}",
         "--report", str(report), "--", "-k", selection], capture_output=True, text=True, timeout=300)
    results = json.loads(report.read_text())["results"]
    bad = [r["id"] for r in results if r["outcome"] not in ("passed", "skipped")]
    assert not bad, proc.stdout[-2000:]


# -- capabilities: a declared operation that raises fails; an undeclared one skips, named ------
def _records(adapter: str, selection: str, tmp_path: Path, *options: str) -> dict[str, dict]:
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", f"defective_adapters:{adapter}", *options,
         "--expectations", os.devnull, "--report", str(report), "--", "-k", selection],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    records = {r["id"]: r for r in json.loads(report.read_text())["results"]}
    assert records, f"nothing selected by -k {selection!r}"
    return records


@pytest.mark.parametrize("adapter, selection", [
    ("SendNotImplemented", "(Socket and AbortReq) or ZeroCopy"),
    ("ControllerPathNotImplemented", "ReceivePath and Controller and AbortReq")])
def test_not_implemented_inside_a_declared_operation_fails(adapter, selection, tmp_path):
    records = _records(adapter, selection, tmp_path)
    assert {r["outcome"] for r in records.values()} == {"failed"}, records
    assert all("NotImplementedError" in r["message"] and "not written yet" in r["message"] for r in records.values())


def test_an_undeclared_capability_skips_naming_it(tmp_path):
    records = _records("NoSocketNoEngine", "(Socket and AbortReq) or ZeroCopy or (ReceivePath and AbortReq) or E2E "
                       "or OneLinkedTrace", tmp_path, "--e2e")
    assert {r["outcome"] for r in records.values()} == {"skipped"}, records
    for check_id, record in records.items():
        area = check_id.split(".")[1]
        named = {"Socket": "'socket'", "ZeroCopy": "'socket'", "E2E": "'e2e'", "ReceivePath": "'receive_path.",
                 "Trace": "'trace'"}[area]
        assert "does not offer" in record["message"] and named in record["message"], (check_id, record["message"])
    assert len([i for i in records if ".E2E." in i]) == 17
    assert len([i for i in records if i.startswith("Required.Trace.")]) == 6  # hop x transport


def test_a_capability_outside_the_vocabulary_is_refused_when_the_adapter_loads():
    from conformance.adapters import load_adapter

    sys.path.insert(0, str(HERE))
    try:
        with pytest.raises(UsageError, match=r"declares capabilities \['sockets'\] that are not in the vocabulary"):
            load_adapter("defective_adapters:MisspelledCapability")
    finally:
        sys.path.remove(str(HERE))
