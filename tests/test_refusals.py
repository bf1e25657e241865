"""Refusal vectors (golden/<manifest>/refusals.json) and the Required.Refuses checks.

The corpus is valid for every bundled manifest (each case is refused by a decoder that
follows the spec, and well formed); the checks fail implementations that accept, or crash
on, what they must refuse, in process and over the testee protocol.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import torch

from conformance.paths import golden_dir
from conformance.schema.golden import refusals
from conformance.schema.golden.catalogue import catalogue_for
from conformance.schema.golden.store import vector_paths
from conformance.schema.golden.view import from_view
from conformance.schema.manifest import load_manifest, wire_manifests
from reference_impl import codec, io_struct
from reference_impl.errors import WireError
from reference_tools.adapter import ReferenceAdapter

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TESTEE = f"{sys.executable} -m reference_impl.testee"


def _corpus(manifest_id: str) -> list[refusals.Refusal]:
    return refusals.load((golden_dir() / manifest_id / refusals.FILE).read_text())


@pytest.mark.parametrize("manifest_id", wire_manifests())
def test_every_case_is_well_formed(manifest_id):
    doc = json.loads((golden_dir() / manifest_id / refusals.FILE).read_text())
    assert doc["format"] == refusals.FORMAT and doc["manifest"] == manifest_id
    ids = [c["id"] for c in doc["cases"]]
    assert len(ids) == len(set(ids)) and 100 <= len(ids) <= 400
    for case in doc["cases"]:
        assert case["kind"] in ("decode", "encode") and case["transport"] == "msgpack"
        assert case["category"] == {"decode": "parse_error", "encode": "serialize_error"}[case["kind"]]
        assert case["requirement"].startswith("R-") and case["why"]
        assert ("payload" in case) == (case["kind"] == "decode") and ("view" in case) == (case["kind"] == "encode")
    families = {c["family"] for c in doc["cases"]}
    assert {"wrong-type", "missing-required", "tag", "trailing-bytes", "truncated", "utf8", "enum-value",
            "extension", "encode"} <= families


@pytest.mark.parametrize("manifest_id", wire_manifests())
def test_a_decoder_that_follows_the_spec_refuses_every_case(manifest_id):
    """The manifest's own codec (the reference's for its manifest, generated structs with the
    reference extension hooks for older ones) refuses each case: the corpus asks nothing the
    spec does not require."""
    manifest = load_manifest(manifest_id)
    cat = catalogue_for(manifest)
    accepted = []
    for case in _corpus(manifest_id):
        try:
            if case.kind == "decode":
                got: Any = cat.decode(case.payload)
            else:
                got = cat.encode(from_view(case.view, cat.classes))
        except (WireError, msgspec.MsgspecError, OverflowError, UnicodeError):
            continue
        accepted.append(f"{case.id}: {got!r:.200}")
    assert not accepted, "\n".join(accepted)


def test_the_corpus_is_derived_from_the_golden_vectors():
    """Truncations are prefixes of the committed typical vector; a wrong-type case differs from
    it in the one field it names."""
    cases = {c.id: c for c in _corpus(io_struct.MANIFEST_ID)}
    truncated = [c for c in cases.values() if c.family == "truncated"]
    vectors = vector_paths(io_struct.MANIFEST_ID)
    assert len(truncated) >= 20
    for case in truncated:
        vector = vectors[(case.struct, "typical")].read_bytes()
        assert vector.startswith(case.payload) and len(case.payload) < len(vector)
    case = cases["AbortReq.WrongType.abort_all"]
    vector = msgspec.msgpack.decode(vectors[("AbortReq", "typical")].read_bytes())
    edited = msgspec.msgpack.decode(case.payload)
    assert [i for i, (a, b) in enumerate(zip(vector, edited)) if a != b] == [3]  # tag, rid, http_worker_ipc, abort_all


def test_the_reference_encoder_refuses_quantized_tensors():
    q = torch.quantize_per_tensor(torch.tensor([1.0, 2.0]), 0.1, 0, torch.qint8)
    msg = io_struct.BatchEmbeddingOutput(rids=["r"], http_worker_ipcs=None, finished_reasons=[None], embeddings=[[0.5]],
                                         prompt_tokens=[1], cached_tokens=[0], placeholder_tokens_idx=[None],
                                         placeholder_tokens_val=[None], pooled_hidden_states=[q])
    with pytest.raises(WireError, match=r"BatchEmbeddingOutput\.pooled_hidden_states\[0\]: cannot send a quantized"):
        codec.encode(msg, "msgpack")


# -- the checks against implementations that break the refusal rules (planted violations) -----
class AcceptsAll(ReferenceAdapter):
    """Decodes without validation: any msgpack comes back as the untyped value."""

    def decode(self, data: bytes, transport: str) -> Any:
        return msgspec.msgpack.decode(data) if transport == "msgpack" else super().decode(data, transport)


class RaisesUndeclared(ReferenceAdapter):
    """Refuses, but with an exception it does not declare (as a crash would surface)."""

    def decode(self, data: bytes, transport: str) -> Any:
        try:
            return super().decode(data, transport)
        except WireError as exc:
            raise KeyError(str(exc)) from None


class DiesOnQuantized(ReferenceAdapter):
    """Dies of SIGSEGV on a quantized tensor dtype, as torch does reading one built from bytes."""

    def decode(self, data: bytes, transport: str) -> Any:
        if b"qint8" in data:
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().decode(data, transport)


def _run(tmp_path: Path, impl: str, select: str = "Refuses") -> tuple[str, dict[str, dict]]:
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", impl, "--transport", "msgpack",
         "--expectations", os.devnull, "--report", str(report), "--", "-k", select, "-p", "no:randomly"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600,
    )
    assert report.exists(), out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1], {r["id"]: r for r in json.loads(report.read_text())["results"]}


def _failed(results: dict[str, dict]) -> dict[str, str]:
    return {i: r["message"] for i, r in results.items() if r["outcome"] == "failed"}


def test_an_implementation_that_accepts_everything_fails_the_refusal_checks(tmp_path):
    last, results = _run(tmp_path, "test_refusals:AcceptsAll")
    failed = _failed(results)
    assert len(failed) >= 60, last
    message = failed["Required.Refuses.AbortReq.WrongType.abort_all.Decode"]
    assert "accepted input it MUST refuse (R-MSG-5" in message and "decoded it to ['AbortReq'" in message
    assert "Required.Refuses.Tensor.QuantizedDtype.Decode" in failed
    assert not any(i.endswith(".Encode") for i in failed)  # its encoder is the reference's


def test_an_undeclared_exception_is_a_crash_not_a_refusal(tmp_path):
    last, results = _run(tmp_path, "test_refusals:RaisesUndeclared", "Refuses and Decode")
    failed = _failed(results)
    assert len(failed) == len(results) > 100, last
    assert all("crashed instead of refusing" in m and "KeyError" in m for m in failed.values())


def test_input_that_kills_the_process_fails_its_check_and_the_run_goes_on(tmp_path):
    last, results = _run(tmp_path, "test_refusals:DiesOnQuantized", "Refuses and Tensor")
    failed = _failed(results)
    assert list(failed) == ["Required.Refuses.Tensor.QuantizedDtype.Decode"], last
    assert "crashed instead of refusing" in failed["Required.Refuses.Tensor.QuantizedDtype.Decode"]
    assert "the process died (signal SIGSEGV)" in failed["Required.Refuses.Tensor.QuantizedDtype.Decode"]
    assert sum(r["outcome"] == "passed" for r in results.values()) >= 15


@pytest.mark.slow
def test_the_reference_testee_refuses_every_case_and_accept_all_does_not(tmp_path):
    last, _ = _run(tmp_path, f"cmd:{TESTEE}")
    assert last.endswith(" 0 failed (0 listed), 0 recommended failed, 0 not tested"), last
    assert not last.startswith("conformance: 0 passed"), last
    last, results = _run(tmp_path, f"cmd:{TESTEE} --break accept-all")
    failed = _failed(results)
    assert len(failed) >= 60, last
    assert "testee answered a payload instead of parse_error" in failed["Required.Refuses.Message.UnknownTag.Decode"]
    # what even an accept-all decoder refuses: bytes that are not one msgpack object
    assert results["Required.Refuses.AbortReq.TrailingBytes.Decode"]["outcome"] == "passed"
