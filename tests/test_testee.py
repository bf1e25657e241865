"""The testee protocol: framing, the handshake, answers, failures of the testee process,
and the suite's checks failing against deliberately broken testees."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from conformance.adapters import load_adapter
from conformance.compare import differences
from conformance.golden import cases
from conformance.manifest import load_manifest
from conformance.testee import SubprocessAdapter, TesteeError, TesteeRuntimeError, TesteeSkipped, command_argv
from conformance.testee import protocol

ROOT = Path(__file__).resolve().parents[1]
TESTEE = "python -m reference_impl.testee"
MANIFEST = load_manifest("sglang-0.5.23")


# -- framing --------------------------------------------------------------------------
def test_frames_are_little_endian_length_then_msgpack_map():
    frame = protocol.pack({"type": "start", "protocol": 1})
    body = msgspec.msgpack.encode({"type": "start", "protocol": 1})
    assert frame == struct.pack("<I", len(body)) + body
    stream = io.BytesIO(frame + frame)
    assert protocol.read_frame(stream) == {"type": "start", "protocol": 1}
    assert protocol.read_frame(stream) == {"type": "start", "protocol": 1}
    assert protocol.read_frame(stream) is None  # clean end of stream


@pytest.mark.parametrize("data, message", [
    (b"\x05\x00", "inside a length prefix"),
    (b"\x05\x00\x00\x00\x81", "ended after 1 of 5"),
    (struct.pack("<I", 1) + b"\xc1", "not msgpack"),
    (struct.pack("<I", 1) + b"\x01", "not a map"),
    (struct.pack("<I", 3) + b"\x81\x80\x00", "not msgpack"),  # a map as a map key (TypeError in old msgspec)
    (struct.pack("<I", 3) + b"\xa2\xff\xfe", "not msgpack"),  # not UTF-8 (UnicodeDecodeError in old msgspec)
])
def test_bad_frames_are_protocol_errors(data, message):
    with pytest.raises(protocol.ProtocolError, match=message):
        protocol.read_frame(io.BytesIO(data))


GOOD_HELLO = {"type": "started", "protocol": 1, "implementation": {"name": "x", "version": "1"},
              "manifest": "sglang-0.5.23", "transports": ["msgpack"], "ops": ["decode", "encode"]}


@pytest.mark.parametrize("change, message", [
    ({"type": "hello"}, "expected a 'started'"),
    ({"protocol": 2}, "protocol 2"),
    ({"implementation": {"name": "x"}}, "implementation"),
    ({"manifest": None}, "manifest"),
    ({"transports": ["json"]}, "transports"),
    ({"ops": ["decode"]}, "ops"),
    ({"transports": ["msgpack", ["pickle"]]}, "transports"),  # unhashable items: still a ProtocolError
    ({"ops": ["decode", "encode", {"x": 1}]}, "ops"),
    ({"ops": "decode,encode"}, "ops"),
])
def test_handshake_answer_is_validated(change, message):
    protocol.check_started(GOOD_HELLO)
    with pytest.raises(protocol.ProtocolError, match=message):
        protocol.check_started({**GOOD_HELLO, **change})


def test_result_answers_are_validated():
    assert protocol.check_result({"id": 3, "result": "payload", "payload": b"x"}, 3)["payload"] == b"x"
    for bad, message in (({"id": 4, "result": "payload", "payload": b""}, "id 4"),
                         ({"id": 3, "result": "ok"}, "not one of"),
                         ({"id": 3, "result": "payload"}, "needs 'payload'")):
        with pytest.raises(protocol.ProtocolError, match=message):
            protocol.check_result(bad, 3)


def test_bare_python_means_this_interpreter():
    assert command_argv("python -m x")[0] in (sys.executable, "python")
    assert command_argv(["/bin/echo", "a b"]) == ["/bin/echo", "a b"]


# -- the reference testee through the adapter ---------------------------------------------
@pytest.fixture(scope="module")
def testee():
    adapter = load_adapter(f"cmd:{TESTEE}")
    yield adapter
    adapter.close()


def test_handshake_claims_the_reference_manifest(testee):
    assert isinstance(testee, SubprocessAdapter)
    assert testee.manifest_id() == "sglang-0.5.23" and testee.label.startswith("reference-testee-")
    assert set(testee.transports) == {"pickle", "msgpack"} and {"decode", "encode", "http"} <= testee.ops
    assert testee.live_manifest() is testee.manifest
    assert {t.__name__ for t in testee.message_types()} >= {"AbortReq", "BatchTokenIDOutput", "KvMetrics"}


@pytest.mark.parametrize("struct_name", ["BatchTokenIDOutput", "TokenizedGenerateReqInput", "KvMetrics"])
def test_testee_bytes_equal_the_golden_vectors(testee, struct_name):
    for case in cases(MANIFEST, [struct_name]):
        assert testee.encode(case.value(), "msgpack") == case.msgpack
        assert not differences(case.value(), testee.decode(case.msgpack, "msgpack"))
        assert not differences(case.value(), testee.decode(testee.encode(case.value(), "pickle"), "pickle"))


def test_top_level_primitives(testee):
    for value in (-(2**63), -0.0, True, b"\x00\xff", None, "héllo"):
        assert not differences(value, testee.decode(testee.encode(value, "msgpack"), "msgpack"))


def test_refusals_map_to_parse_and_serialize_errors(testee):
    with pytest.raises(TesteeError, match="parse_error"):
        testee.decode(b"\x93\xa8NotATag\x01\x02", "msgpack")
    with pytest.raises(TesteeError, match="parse_error: .*unknown struct"):
        testee._request("encode", transport="msgpack", struct=None, view='{"$struct": "Nope"}')
    with pytest.raises(TesteeSkipped):
        testee._request("encode", transport="json", struct=None, view="1")
    with pytest.raises(TesteeSkipped, match="unknown request type"):
        testee.ops = testee.ops | {"dance"}
        try:
            testee._request("dance")
        finally:
            testee.ops = testee.ops - {"dance"}


def test_http_errors_name_the_field(testee):
    with pytest.raises(TesteeError, match="serialized_named_tensors"):
        testee.validate_http("UpdateWeightsFromTensorReqInput", '{"serialized_named_tensors": ["not base64!"]}')


def test_values_without_a_json_view_are_skipped_not_failed(testee):
    with pytest.raises(TesteeSkipped, match="no JSON view"):
        testee.encode(object(), "msgpack")


# -- a testee that misbehaves -----------------------------------------------------------------
def test_a_crashing_testee_fails_the_request_and_is_restarted():
    adapter = SubprocessAdapter(f"{TESTEE} --break crash")
    try:
        value = cases(MANIFEST, ["AbortReq"])[1].value()
        with pytest.raises(TesteeRuntimeError, match="exit status 3"):
            adapter.decode(adapter.encode(value, "msgpack"), "msgpack")
        assert adapter.encode(value, "msgpack")  # a fresh start answers again
        assert adapter.restarts == 1
    finally:
        adapter.close()


@pytest.mark.parametrize("body", [b"\xc1", b"\x93\x01\x02\x03", b"\xa2\xff\xfe"],
                         ids=["not-msgpack", "not-a-map", "bad-utf8"])
def test_the_reference_testee_answers_an_unreadable_request_and_goes_on(body):
    requests = (struct.pack("<I", len(body)) + body
                + protocol.pack({"type": "start", "protocol": 1}) + protocol.pack({"type": "stop"}))
    proc = subprocess.run([sys.executable, "-m", "reference_impl.testee"], input=requests,
                          capture_output=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    stream = io.BytesIO(proc.stdout)
    answer = protocol.read_frame(stream)
    assert answer["id"] is None and answer["result"] == "parse_error", answer
    assert protocol.check_started(protocol.read_frame(stream))
    assert protocol.read_frame(stream) == {"type": "stopped"}


def test_a_testee_that_breaks_framing_is_a_runtime_error():
    adapter = SubprocessAdapter(f"{TESTEE} --break bad-frame")
    try:
        with pytest.raises(TesteeRuntimeError, match="ended after"):
            adapter.decode(adapter.encode(7, "msgpack"), "msgpack")
    finally:
        adapter.close()


def test_a_silent_or_chatty_process_fails_the_handshake():
    with pytest.raises(TesteeRuntimeError, match="no answer"):
        SubprocessAdapter([sys.executable, "-c", "import time; time.sleep(30)"], timeout=1)
    with pytest.raises(TesteeRuntimeError, match="start handshake"):
        SubprocessAdapter([sys.executable, "-c", "print('hello, I am not a testee')"], timeout=5)
    with pytest.raises(TesteeRuntimeError, match="cannot start"):
        SubprocessAdapter(["/nonexistent/testee"])


# -- the suite against broken testees (each new check seen failing) ---------------------------
def _run(impl: str, select: str, *extra: str) -> tuple[str, str]:
    out = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", impl, *extra, "--", "-k", select, "-p", "no:randomly"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    return out.stdout.strip().splitlines()[-1], out.stdout


SELECT = "Golden and (AbortReq or BatchTokenIDOutput)"


@pytest.mark.slow
def test_good_testee_passes_what_the_in_process_reference_passes():
    assert _run(f"cmd:{TESTEE}", SELECT)[0] == _run("reference", SELECT)[0] == "conformance: 12 passed, 0 failed, 0 skipped"


@pytest.mark.slow
@pytest.mark.parametrize("mode, failing", [
    ("flip-byte", ["Required.Golden.AbortReq.DecodesVector.minimal", "Recommended.Golden.AbortReq.EncodesVector.typical"]),
    ("drop-field", ["Required.Golden.BatchTokenIDOutput.DecodesVector.typical"]),
])
def test_broken_testees_fail_the_golden_checks(mode, failing):
    last, text = _run(f"cmd:{TESTEE} --break {mode}", SELECT, "--strict")
    assert " 0 failed" not in last, text
    for check_id in failing:
        assert f"[{check_id}]" in text, f"{check_id} did not fail under --break {mode}:\n{text[-3000:]}"


@pytest.mark.slow
def test_broken_receive_paths_fail_the_unwrap_and_security_checks():
    last, text = _run(f"cmd:{TESTEE} --break no-unwrap --break unsafe-receive",
                      "(Unwrap and TokenizedGenerateReqInput) or Security", "--strict")
    for check_id in ("Required.Unwrap.TokenizedGenerateReqInput.NoWrapperLeft.msgpack",
                     "Required.Security.top_level.NoPickleFromUntrustedPeer"):
        assert f"[{check_id}]" in text, f"{check_id} did not fail:\n{text[-3000:]}"
