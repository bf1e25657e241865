"""Every check family's failure message names the step, the input (hex and JSON view), the
field path, the requirement and a replay command, and each part is TRUE: the step blames the
side that is really wrong, the path is the planted field, the hex is the bytes the check
really fed, and the replay command selects that one check (tests/planted_adapters.py plants
one defect per family; the reference testee's --break flip-byte covers the testee's steps)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from inprocess_pytest import run_pytest, warm  # noqa: F401 - warm: the fixture the tests below use

from conformance.schema.golden.view import dumps, to_view
from conformance.session import Session
from conformance.suite import failure

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PLANTED = "planted_adapters:Planted"
FLIP = "cmd:python -m reference_impl.testee --break flip-byte"
TRAILING = "cmd:python -m reference_impl.testee --break trailing-byte"
ENCODE_STEP = "the implementation's encode over msgpack: its bytes already hold another value"
DECODE_STEP = "the implementation's decode of its own encode output over msgpack: the bytes are right"

pytest_plugins = ["pytester"]

#: check id -> (the step's words, the path named, the requirement, the input: "encode" (the
#: planted encoder's bytes of the typical instance), "vector", "case", "json" or None)
EXPECTED = {
    "Required.RoundTrip.AbortReq.Identical.msgpack.typical": (DECODE_STEP, "$.abort_message", "R-MSG-1", "encode"),
    "Required.RoundTrip.FlushCacheReqInput.Identical.msgpack.typical": (ENCODE_STEP, "$.timeout_s", "R-MSG-1",
                                                                        "encode"),
    "Required.RoundTrip.AbortReq.EveryArm.msgpack": (DECODE_STEP, "$.abort_message", "R-MSG-1", None),
    "Required.CrossTransport.AbortReq.SameValue.typical": ("msgpack: " + DECODE_STEP, "$.abort_message", "R-NORM-1",
                                                           None),
    "Required.DoubleHop.FlushCacheReqInput.Stable.msgpack": ("second hop", "$.timeout_s", "R-MSG-9", None),
    "Required.Generated.AbortReq.RoundTrip.msgpack": (DECODE_STEP, "$.abort_message", "R-MSG-", None),
    "Required.Golden.AbortReq.DecodesVector.typical": ("decode of bytes the runner wrote (the golden vector",
                                                       "$.abort_message", "R-VEC-1", "vector"),
    "Required.Bytes.ActiveRanksOutput.MatchesVector.typical": (
        "the implementation's encode over msgpack", "$[1]: bin (5 bytes) where the vector has str",
        "R-VEC-3", "encode"),
    "Required.Refuses.AbortReq.IntForBool.abort_all.Decode": ("decode of bytes the runner wrote over msgpack",
                                                              "AbortReq.abort_all", "R-", "case"),
    "Required.Accepts.AbortReq.wide_ints.Decode": ("decode of bytes the runner wrote (its golden vector, rewritten "
                                                   "in the wide_ints form)", "$.abort_message", "§3", None),
    "Required.HttpBase64.UpdateWeightsFromTensorReqInput.RejectsMalformed": (
        "HTTP JSON validation", "$.serialized_named_tensors", "R-HTTP-2", "json"),
    "Required.Logprobs.BatchTokenIDOutput.NestedNone.stream_chunk.msgpack": (
        ENCODE_STEP, "$.input_token_logprobs_val[0]: expected list [], got NoneType None", "R-NONE-1", None),
    "Required.Tensor.bfloat16.Exact.msgpack": (ENCODE_STEP, "$.pooled_hidden_states[0]: tensor dtype", "R-TEN-",
                                               None),
    "Required.Extremes.FlushCacheReqInput.RoundTrip.msgpack": (ENCODE_STEP, "$.timeout_s", "R-VAL-2", "encode"),
}


def _run(impl: str, ids, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path / f"r{abs(hash((impl, extra)))}.json"
    select = " or ".join(ids)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--impl", impl, "--report", str(report),
                           *extra, "--", "-k", select, "-p", "no:randomly"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    records = {r["id"]: r for r in json.loads(report.read_text())["results"]} if report.exists() else {}
    return proc, records


def _line(message: str, name: str) -> str:
    found = [line.strip()[len(name) + 1:].strip() for line in message.splitlines()
             if line.strip().startswith(name + ":")]
    assert found, f"no '{name}:' line in:\n{message}"
    return found[0]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return _run(PLANTED, EXPECTED, tmp_path_factory.mktemp("planted"), "--hypothesis-profile", "ci")


def _input_bytes(kind: str, check_id: str, ipc: Session) -> bytes:
    from planted_adapters import Planted

    struct = check_id.split(".")[2]
    if kind == "encode":
        value = ipc.instance(struct, "typical")
        if ".Extremes." in check_id:  # the first extreme values the check sends
            from conformance.suite.test_value_extremes import _with_extremes

            value = _with_extremes(ipc, struct, 0)
        return Planted().encode(value, "msgpack")
    if kind == "vector":
        from conformance.suite.vectors import golden_vector

        return golden_vector(ipc, struct, "typical")
    from conformance.suite.test_refuses import _cases

    return _cases(ipc)[check_id.removeprefix("Required.Refuses.").removesuffix(".Decode")].payload


@pytest.mark.slow
@pytest.mark.parametrize("check_id", sorted(EXPECTED))
def test_each_part_of_the_message_is_there_and_true(planted, check_id):
    proc, records = planted
    record = records.get(check_id)
    assert record is not None, f"{check_id} did not run:\n{proc.stdout[-3000:]}"
    assert record["outcome"] == "failed", record
    message = record["message"]
    step, path, requirement, kind = EXPECTED[check_id]
    first = message.splitlines()[0]
    assert step in _line(message, "step"), message
    assert path in first or path in message.split("differences")[-1], message  # the planted field, named
    assert _line(message, "requirement").startswith(f"SPEC {requirement}"), message
    ipc = Session()
    if kind in ("encode", "vector", "case"):
        sent = _input_bytes(kind, check_id, ipc)
        assert _line(message, "input") == failure.hex_of(sent), message
    elif kind == "json":
        assert _line(message, "input").startswith('JSON {"'), message
    if kind in ("encode", "vector") and ".Extremes." not in check_id and ".Bytes." not in check_id:
        shown = _line(message, "view")
        assert shown == failure.view_of(ipc.instance(check_id.split(".")[2], "typical")), message
        assert " ".join(dumps(to_view(ipc.instance(check_id.split(".")[2], "typical"))).split()).startswith(
            shown.removesuffix(" ..."))
    replay = _line(message, "replay")
    words = shlex.split(replay)
    assert words[:4] == ["ipc-conformance", "run", "--impl", PLANTED] and words[-2:] == ["-k", check_id], replay


@pytest.mark.slow
def test_the_step_tells_encode_from_decode(planted):
    """The same family, two planted sides: the decode defect and the encode defect are told apart."""
    _, records = planted
    decode = records["Required.RoundTrip.AbortReq.Identical.msgpack.typical"]["message"]
    encode = records["Required.RoundTrip.FlushCacheReqInput.Identical.msgpack.typical"]["message"]
    assert "decode of its own encode output" in _line(decode, "step")
    assert _line(encode, "step").startswith("the implementation's encode over msgpack") and "decode" not in \
        _line(encode, "step").split(":")[0]


@pytest.mark.slow
def test_the_bytes_rule_named_is_the_one_broken(planted):
    _, records = planted
    message = records["Required.Bytes.ActiveRanksOutput.MatchesVector.typical"]["message"]
    assert "(SPEC §3: a str is str, never bin)" in message.splitlines()[0] and "bytes are bin" not in message


@pytest.mark.slow
def test_a_replay_command_runs_that_one_check_and_reproduces_it(planted, tmp_path):
    _, records = planted
    check_id = "Required.Refuses.AbortReq.IntForBool.abort_all.Decode"
    words = shlex.split(_line(records[check_id]["message"], "replay"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    report = tmp_path / "replay.json"
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", *words[1:words.index("--")], "--report",
                           str(report), *words[words.index("--"):]], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)
    ran = json.loads(report.read_text())["results"]
    assert [r["id"] for r in ran] == [check_id], proc.stdout[-2000:]
    assert ran[0]["message"].splitlines()[0] == records[check_id]["message"].splitlines()[0]


@pytest.mark.slow
@pytest.mark.usefixtures("warm")
def test_every_replay_selects_exactly_its_check(planted, pytester):
    """pytest's -k is a substring match: each replay's selection, evaluated over every check of
    a run, picks its check and no other."""
    from _pytest.mark.expression import Expression

    _, records = planted
    listed = run_pytest(pytester, "--ipc-impl", PLANTED, "--collect-only", "-q", "-p", "no:randomly",
                        str(ROOT / "conformance" / "suite")).stdout.str()
    names = [line.rsplit("::", 1)[-1] for line in listed.splitlines() if "::" in line]
    assert len(names) > 1000
    for check_id, record in records.items():
        selection = shlex.split(_line(record["message"], "replay"))[-1]
        expression = Expression.compile(selection)
        chosen = [n for n in names if expression.evaluate(lambda sub, name=n: sub.lower() in name.lower())]
        assert chosen and all(f"[{check_id}]" in n for n in chosen), (check_id, chosen)


@pytest.mark.slow
def test_testee_steps_say_whose_bytes(tmp_path):
    """A testee whose encoder writes a byte after each message: its own decoder refuses that
    output, and the step says it was its own encode output (not bytes the runner wrote). A
    testee whose re-encode corrupts its last byte accepted valid bytes: the runner cannot read
    its answer, and the message does not say it refused them."""
    roundtrip_id = "Required.RoundTrip.AbortReq.Identical.msgpack.typical"
    accepts_id = "Required.Accepts.AbortReq.short.Decode"
    _, records = _run(TRAILING, [roundtrip_id], tmp_path)
    roundtrip = records[roundtrip_id]["message"]
    assert "TesteeError: testee parse_error: " in roundtrip.splitlines()[0], roundtrip
    assert "step: the testee's decode (and re-encode) of its own encode output" in roundtrip, roundtrip
    assert "reproduce: ipc-conformance testee replay " in roundtrip and "bytes the runner sent" not in roundtrip
    # its encoder wrote the stray byte: the runner's own decode cannot read the bytes either, so the
    # step names the encoder as the suspect, not the decoder that refused them
    assert "cannot read these bytes either" in roundtrip and "the testee's encode is the suspect" in roundtrip
    _, records = _run(FLIP, [accepts_id], tmp_path)
    accepts = records[accepts_id]["message"]
    first = accepts.splitlines()[0]
    assert "the decoder accepted it, but the runner cannot read its answer" in first and "refused" not in first
    assert "the runner's reference decode of the testee's answer" in _line(accepts, "step"), accepts


def test_no_check_runs_as_an_empty_parametrization():
    """Without --peer the Peer check has no case: it is deselected, so pytest's counts and the
    conformance line agree (no 'NOTSET' test counted as skipped)."""
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--", "-k", "Peer or Primitive",
                           "-p", "no:randomly"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    pytest_line, conformance_line = proc.stdout.strip().splitlines()[-3], proc.stdout.strip().splitlines()[-1]
    assert "NOTSET" not in proc.stdout and "skipped" not in pytest_line, proc.stdout[-1500:]
    assert conformance_line.endswith(" 0 failed (0 listed), 0 recommended failed, 0 not tested"), proc.stdout[-1500:]
    assert proc.returncode == 0, proc.stdout[-1500:]
