"""EnginePayload checks (SPEC R-PW-7): the state view they compare, and the checks against the
reference and against the reference with each bug of the family planted (mutants
MmDataOnInstance, NestedMapsNotDecoded). The same bugs planted into real SGLang:
tests/interop/test_sglang_engine_payloads.py."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import torch

from conformance.suite.payloads import engine_state, engine_state_differences


class Pointer:
    """Like upstream's ShmPointerMMData: a __getstate__ that leaves its process-local mapping out."""

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype) -> None:
        self.shape, self.dtype, self.mapping = torch.Size(shape), dtype, object()

    def __getstate__(self) -> dict[str, Any]:
        return {"shape": self.shape, "dtype": self.dtype}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.shape, self.dtype, self.mapping = state["shape"], state["dtype"], object()


class Item(msgspec.Struct, dict=True):
    feature: Any = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


def test_state_is_getstate_where_the_class_defines_it():
    sent = Pointer((2, 3), torch.float16)
    assert engine_state_differences(sent, pickle.loads(pickle.dumps(sent))) == []  # the mapping is not state
    marker = Pointer((2, 3), torch.float16)
    marker.dtype = {"__torch_dtype__": "float16"}  # type: ignore[assignment]
    assert engine_state_differences(sent, marker) == [
        "$['$state']['dtype']: expected dtype torch.float16, got dict {'__torch_dtype__': 'float16'}"]


def test_state_of_a_struct_holds_its_instance_dict():
    sent = Item(feature=torch.ones(2))
    sent.grid = torch.tensor([[1, 2, 2]])  # what no transport carries
    wire = msgspec.msgpack.encode(sent, enc_hook=_tensor)
    received = msgspec.msgpack.Decoder(Item, ext_hook=_tensor_ext).decode(wire)
    assert engine_state(received)["$dict"] == {}
    assert engine_state_differences(sent, received) == ["$['$dict']: keys [\"'grid'\"] != []"]
    sent.extra["grid"] = sent.__dict__.pop("grid")
    received = pickle.loads(pickle.dumps(sent))
    assert engine_state_differences(sent, received) == []
    received.extra["grid"] = received.extra["grid"].to(torch.int32)
    assert engine_state_differences(sent, received) == ["$['extra']['grid']: tensor dtype torch.int64 != torch.int32"]


def _tensor(obj: Any) -> Any:
    return msgspec.msgpack.Ext(2, pickle.dumps(obj))


def _tensor_ext(code: int, data: memoryview) -> Any:
    return pickle.loads(data)


# -- the checks against the reference and its mutants ------------------------------------------
CHECK = "Required.EnginePayload.{}.StateKept.{}"
BOTH = ("pickle", "msgpack")


def _run(impl: str, tmp_path: Path) -> tuple[dict[str, str], str]:
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--impl", impl, "--expectations",
                           os.devnull, "--report", str(report), "--", "-k", "EnginePayload"],
                          capture_output=True, text=True, timeout=300)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return {r["id"]: r["outcome"] for r in json.loads(report.read_text())["results"]}, proc.stdout


def test_the_reference_keeps_its_engine_payloads(tmp_path):
    outcome, out = _run("reference", tmp_path)
    names = ("sampling_params", "time_stats", "mm_items", "shm_pointer")
    assert outcome == {CHECK.format(n, t): "passed" for n in names for t in BOTH}, out[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize(("mutant", "failing", "named"), [
    ("MmDataOnInstance", {CHECK.format(n, t) for n in ("mm_items", "shm_pointer") for t in BOTH},
     "['$dict']: keys [\"'image_grid_thw'\", \"'video_grid_info'\"] != []"),
    ("NestedMapsNotDecoded", {CHECK.format(n, "msgpack") for n in ("mm_items", "shm_pointer")},
     "['model_specific_data']['video_grid_info']['thw']: expected Tensor tensor([1, 2, 2]), got Ext"),
])
def test_a_planted_bug_of_the_family_fails_required_checks(mutant, failing, named, tmp_path):
    outcome, out = _run(f"reference_tools.proof.mutants:{mutant}", tmp_path)
    assert {check for check, result in outcome.items() if result == "failed"} == failing, out[-3000:]
    assert named in out
