"""The reference decoder under hostile bytes: every hand-made case of reference_tools/fuzz/corpus.py.

Each hostile input is refused with exactly one WireError naming the transport, the struct
(when the input names one) and the field path, saying why - no other exception type, no
hang, bounded time and memory - or, where the input is legitimate, decoded. Runs each case
in a child process: a decoder that crashes the interpreter (it did: quantized tensor
dtypes) fails one case instead of killing the test run.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from reference_tools.fuzz.corpus import Case, cases

pytestmark = pytest.mark.reliability
TEST_TIMEOUT_S = 180

CASE_TIME_S = 2.0  # wall time one decode may take
CASE_MEMORY_BYTES = 64 << 20  # growth of peak resident memory one decode may cause

_RUNNER = r"""
import json, resource, sys, time
from reference_tools.fuzz.corpus import cases
from reference_impl import codec
from reference_impl.errors import WireError
wanted = set(json.loads(sys.argv[1]))
for case in cases():
    if case.name not in wanted:
        continue
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    try:
        value = codec.decode(case.data, "msgpack", allow_pickle=case.trusted)
        result = {"outcome": "ok", "type": type(value).__name__}
    except WireError as exc:
        result = {"outcome": "error", "struct": exc.struct, "path": exc.path, "message": str(exc),
                  "transport": exc.transport, "direction": exc.direction}
    except BaseException as exc:
        result = {"outcome": "other", "type": type(exc).__name__, "message": str(exc)[:500]}
    result["seconds"] = time.perf_counter() - t0
    result["memory"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) * 1024
    print(json.dumps({"name": case.name, **result}), flush=True)
"""


@pytest.fixture(scope="module")
def outcomes() -> dict[str, dict]:
    """Every case, decoded in child processes (one batch; a case that kills its child is rerun
    alone so it cannot hide the others)."""
    names = [c.name for c in cases()]
    results: dict[str, dict] = {}
    pending = list(names)
    while pending:
        proc = subprocess.run([sys.executable, "-c", _RUNNER, json.dumps(pending)], capture_output=True, text=True,
                              timeout=120)
        for line in proc.stdout.splitlines():
            record = json.loads(line)
            results[record["name"]] = record
        pending = [n for n in pending if n not in results]
        if pending and proc.returncode != 0:  # the first pending case killed the interpreter
            results[pending[0]] = {"outcome": "crashed", "returncode": proc.returncode,
                                   "stderr": proc.stderr[-500:]}
            pending = pending[1:]
        elif pending:
            raise AssertionError(f"cases not run: {pending}\n{proc.stderr[-2000:]}")
    return results


def _verdict(case: Case, got: dict) -> list[str]:
    problems = []
    if got["outcome"] in ("crashed", "other"):
        return [f"{got['outcome']}: {got.get('type', '')} {got.get('message', got.get('stderr', ''))}"]
    if case.outcome == "ok":
        if got["outcome"] != "ok":
            problems.append(f"refused: {got.get('message')}")
        elif case.decodes_to and got["type"] != case.decodes_to:
            problems.append(f"decoded to {got['type']}, not {case.decodes_to}")
    else:
        if got["outcome"] != "error":
            return [f"decoded (to {got.get('type')}) instead of being refused"]
        named = got["transport"] == "msgpack" and got["direction"] == "decode"
        if not named or not got["message"].startswith("msgpack decode"):
            problems.append(f"the error does not name the transport: {got['message']}")
        if got["struct"] != case.struct:
            problems.append(f"struct {got['struct']!r}, expected {case.struct!r}: {got['message']}")
        if case.path is not None and case.path not in got["path"]:
            problems.append(f"path {got['path']!r} does not contain {case.path!r}: {got['message']}")
        if case.says.lower() not in got["message"].lower():
            problems.append(f"the message does not say {case.says!r}: {got['message']}")
    if got["seconds"] > CASE_TIME_S:
        problems.append(f"took {got['seconds']:.2f} s")
    if got["memory"] > CASE_MEMORY_BYTES:
        problems.append(f"grew peak memory by {got['memory'] / 2**20:.0f} MiB")
    return problems


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.name)
def test_hostile_input(case: Case, outcomes: dict[str, dict]):
    problems = _verdict(case, outcomes[case.name])
    assert problems == [], f"{case.name}: " + "; ".join(problems)


def test_zzz_report(outcomes: dict[str, dict]):
    """Not a check: the slowest case and the largest memory growth (pytest -s shows them)."""
    slowest = max(outcomes.items(), key=lambda kv: kv[1].get("seconds", 0))
    biggest = max(outcomes.items(), key=lambda kv: kv[1].get("memory", 0))
    print(f"\n[hostile] {len(outcomes)} cases; slowest {slowest[0]!r} {slowest[1].get('seconds', 0) * 1000:.1f} ms; "
          f"largest peak-memory growth {biggest[0]!r} {biggest[1].get('memory', 0) / 2**20:.1f} MiB")


# -- the configurable limits ----------------------------------------------------------------
def test_max_message_bytes_per_call_and_for_multipart():
    from reference_impl import codec
    from reference_impl.errors import WireError
    from reference_tools.fuzz.corpus import golden

    data = golden("AbortReq.typical")
    assert codec.decode(data, max_bytes=len(data)) is not None
    with pytest.raises(WireError, match=rf"message of {len(data)} bytes is over the limit of {len(data) - 1} bytes"):
        codec.decode(data, max_bytes=len(data) - 1)
    assert codec.decode(data, max_bytes=0) is not None  # 0: no limit
    import torch

    from reference_impl.io_struct import BatchEmbeddingOutput

    msg = BatchEmbeddingOutput(rids=["r"], finished_reasons=[None], embeddings=[[0.0]], prompt_tokens=[1],
                               cached_tokens=[0], placeholder_tokens_idx=None, placeholder_tokens_val=None,
                               pooled_hidden_states=[torch.zeros(1024)])
    frames = codec.encode_frames(msg, threshold=64)
    total = sum(len(f) for f in frames)
    assert len(frames) == 2 and len(frames[0]) < 4096 < total
    with pytest.raises(WireError, match="over the limit of 4096 bytes"):
        codec.decode_frames(frames, max_bytes=4096)  # the frames count together


def test_max_nesting_per_call_names_struct_and_field():
    from reference_impl import codec
    from reference_impl.errors import WireError
    from reference_tools.fuzz.corpus import in_any_raw

    deep = in_any_raw(b"\x91" * 60 + b"\xc0")
    assert codec.decode(deep, max_nesting=70) is not None
    with pytest.raises(WireError, match="nesting deeper than 50 levels") as info:
        codec.decode(deep, max_nesting=50)
    assert info.value.struct == "DumperControlReqInput" and info.value.path.startswith(".body['k'][0]")


@pytest.mark.parametrize("env, data_kind, refused", [
    ({"IPC_MAX_MESSAGE_BYTES": "16"}, "typical", "over the limit of 16 bytes"),
    ({"IPC_MAX_MESSAGE_BYTES": "0"}, "typical", None),
    ({"IPC_MAX_NESTING": "20"}, "deep", "nesting deeper than 20 levels"),
    ({}, "deep", None),  # default: only the decoder's own recursion guard (about 1000 levels)
])
def test_limits_from_the_environment(env, data_kind, refused):
    import os

    code = r"""
import sys
from reference_tools.fuzz.corpus import golden, in_any_raw
from reference_impl import codec
data = golden("AbortReq.typical") if sys.argv[1] == "typical" else in_any_raw(b"\x91" * 60 + b"\xc0")
try:
    codec.decode(data)
    print("decoded")
except codec.WireError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", code, data_kind], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env}).stdout.strip()
    if refused is None:
        assert out == "decoded"
    else:
        assert refused in out, out
