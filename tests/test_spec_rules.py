"""The spec-rule checks (conformance/suite/test_spec_rules.py) pass for the reference, in process
and as a testee, and fail for an implementation with the planted violation each one is for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SELECT = "Omission or FloatWidening or ByteOrder or TensorDtype"
CHECKS = {
    "Required.Omission.BeamSearchSequence.NegativeZeroWritten",
    *(f"Required.FloatWidening.{case}.KeepsBits"
      for case in ("signalling_nan", "negative_nan_payload", "negative_zero", "infinity", "one_third")),
    "Required.ByteOrder.BatchStrOutput.BigEndianKept.encode",
    "Required.ByteOrder.BatchStrOutput.BigEndianKept.decode",
}
#: SPEC R-TEN-1's table; the dtypes the spec named before the table was complete
DTYPES = {"bool", "int8", "uint8", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
          "float8_e8m0fnu",
          "float4_e2m1fn_x2", "bits8", "bits1x8", "bits2x4", "bits4x2", *(f"int{n}" for n in range(1, 8)),
          *(f"uint{n}" for n in range(1, 8)), "float16", "bfloat16", "int16", "uint16", "bits16", "float32", "int32",
          "uint32", "complex32", "float64", "int64", "uint64", "complex64", "complex128"}
OLD_LIST = {"float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool",
            "float8_e4m3fn", "float8_e5m2", "complex64"}
CHECKS |= {f"Required.TensorDtype.{dtype}.Travels" for dtype in DTYPES}


def _outcomes(impl: str, tmp_path: Path) -> dict[str, str]:
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", impl, "--manifest", "sglang-0.5.23",
         "--expectations", os.devnull, "--report", str(report), "--", "-k", SELECT, "-p", "no:randomly"],
        capture_output=True, text=True, env=env, timeout=300, cwd=HERE.parent,
    )
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return {r["id"]: r["outcome"] for r in json.loads(report.read_text())["results"]}


@pytest.mark.parametrize("impl", ["reference", "cmd:python -m reference_impl.testee"])
def test_the_reference_passes_every_spec_rule_check(impl, tmp_path):
    outcome = _outcomes(impl, tmp_path)
    assert set(outcome) == CHECKS and set(outcome.values()) == {"passed"}, outcome


@pytest.mark.parametrize("adapter, failing", [
    ("OmitsEqualDefaults", {"Required.Omission.BeamSearchSequence.NegativeZeroWritten"}),
    ("CanonicalNaN", {"Required.FloatWidening.signalling_nan.KeepsBits",
                      "Required.FloatWidening.negative_nan_payload.KeepsBits"}),
    ("NativeByteOrder", {"Required.ByteOrder.BatchStrOutput.BigEndianKept.encode",
                         "Required.ByteOrder.BatchStrOutput.BigEndianKept.decode"}),
    ("OldDtypeList", {f"Required.TensorDtype.{dtype}.Travels" for dtype in DTYPES - OLD_LIST}),
])
def test_each_planted_violation_fails_exactly_its_check(adapter, failing, tmp_path):
    outcome = _outcomes(f"spec_rule_adapters:{adapter}", tmp_path)
    assert {c for c, o in outcome.items() if o == "failed"} == failing, outcome
