"""The EnginePayload checks catch two real bugs planted into SGLang 0.5.23 (run in `tox -e upstream`).

Unmodified SGLang passes every ``Required.EnginePayload.*`` check but the one its expected-failure
list names (msgpack cannot encode a CUDA IPC proxy: a real 0.5.23 defect); with the shared-memory
pointer's state decoder no longer recursing into maps (tests/interop/sglang_planted_payloads.py
``ShmStateDecoderShallow``) the pointer check fails under msgpack, naming the dtype and shape
left as marker maps; with the multimodal item's setter writing processor data into the instance
``__dict__`` (``MmItemSetterToDict``) the item checks fail under both transports, naming the lost
keys. Each run is the suite in a process of its own (the bug is planted process-wide).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sglang.srt.managers.io_struct", reason="needs SGLang: tox -e upstream")
pytestmark = pytest.mark.sglang

HERE = Path(__file__).resolve().parent
CHECK = "Required.EnginePayload.{}.StateKept.{}"


def _run(impl: str, tmp_path: Path, *options: str) -> tuple[dict[str, str], str]:
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--impl", impl, *options,
                           "--report", str(report), "--", "-k", "EnginePayload"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(report.read_text())["results"]
    return {r["id"]: r["outcome"] for r in results}, proc.stdout


def test_unmodified_sglang_keeps_engine_payload_state(tmp_path):
    """Every engine payload passes but one known upstream defect, listed in
    conformance/expectations/sglang-0.5.23.txt: msgpack cannot send a CUDA IPC proxy (ext 5)."""
    outcome, out = _run("sglang", tmp_path)
    names = ("sampling_params", "mm_items", "shm_pointer", "cuda_ipc_proxy", "session_params", "lora_refs")
    expected = {CHECK.format(n, t): "passed" for n in names for t in ("pickle", "msgpack")}
    expected[CHECK.format("cuda_ipc_proxy", "msgpack")] = "xfailed"
    assert outcome == expected, out[-3000:]


@pytest.mark.parametrize(("planted", "failing", "named"), [
    ("ShmStateDecoderShallow", {CHECK.format("shm_pointer", "msgpack")},
     "['$state']['dtype']: expected dtype torch.float32, got dict {'__torch_dtype__': 'float32'}"),
    ("MmItemSetterToDict", {CHECK.format(n, t) for n in ("mm_items", "shm_pointer", "cuda_ipc_proxy")
                            for t in ("pickle", "msgpack")},
     "['$dict']: keys [\"'image_grid_thw'\", \"'video_grid_info'\"] != []"),
])
def test_planted_bug_fails_required_engine_payload_checks(planted, failing, named, tmp_path):
    outcome, out = _run(f"sglang_planted_payloads:{planted}", tmp_path, "--expectations", os.devnull)
    failing = failing | {CHECK.format("cuda_ipc_proxy", "msgpack")}  # the known upstream defect, unlisted here
    assert {check for check, result in outcome.items() if result == "failed"} == failing, out[-3000:]
    assert all(check.startswith("Required.") for check in failing)
    assert named in out
