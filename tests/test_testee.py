"""The testee protocol: framing, the handshake, answers, failures of the testee process,
and the suite's checks failing against deliberately broken testees."""

from __future__ import annotations

import io
import re
import shlex
import struct
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from conformance.adapters import load_adapter
from conformance.compare import differences
from conformance.schema.golden import cases
from conformance.schema.manifest import load_manifest
from conformance.testee import SubprocessAdapter, TesteeError, TesteeRuntimeError, TesteeSkipped, command_argv, protocol
from conformance.testee.adapter import TesteeAnswerError

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
    ({"protocol": 3}, "protocol 3"),
    ({"protocol": 2}, "needs 'tensors'"),  # protocol 2 says how the testee holds tensors
    ({"protocol": 2, "tensors": "gpu"}, "needs 'tensors'"),
    ({"implementation": {"name": "x"}}, r"malformed 'started' frame.*'implementation': .*field 'version'"),
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


def test_both_protocol_versions_are_spoken():
    assert protocol.check_started(GOOD_HELLO)["protocol"] == 1  # a protocol-1 testee still runs
    for kind in protocol.TENSOR_KINDS:
        assert protocol.check_started({**GOOD_HELLO, "protocol": 2, "tensors": kind})["tensors"] == kind


def test_result_answers_are_validated():
    assert protocol.check_result({"id": 3, "result": "payload", "payload": b"x"}, 3)["payload"] == b"x"
    for bad, message in (({"id": 4, "result": "payload", "payload": b""}, "id 4"),
                         ({"id": 3, "result": "ok"}, r"malformed 'result' frame.*'result': Invalid enum value 'ok'"),
                         ({"id": 3, "result": "payload"}, "needs 'payload'"),
                         ({"id": 3, "result": "payload", "payload": b"", "view": b"{}"}, r"'view': .*got 'bytes'")):
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
        [sys.executable, "-m", "conformance.cli", "run", "--impl", impl, *extra,
         "--", "-k", select, "-p", "no:randomly"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    return out.stdout.strip().splitlines()[-1], out.stdout


SELECT = "Golden and (AbortReq or BatchTokenIDOutput)"


def _failed(check_id: str, text: str) -> bool:
    """The plugin's own `FAILED <check id>` line: printed with or without CI set (pytest's short
    summary, which carried the id in brackets, is off under CI)."""
    return re.search(rf"^\s*FAILED {re.escape(check_id)}$", text, re.MULTILINE) is not None


@pytest.mark.slow
def test_good_testee_passes_what_the_in_process_reference_passes():
    good, reference = _run(f"cmd:{TESTEE}", SELECT)[0], _run("reference", SELECT)[0]
    assert good == reference and good.endswith(" passed, 0 failed (0 listed), 0 recommended failed, 0 not tested")
    assert int(good.split()[1]) >= 12, good


@pytest.mark.slow
@pytest.mark.parametrize("mode, failing", [
    ("flip-byte", ["Required.Golden.AbortReq.DecodesVector.minimal",
                   "Recommended.Golden.AbortReq.EncodesVector.typical"]),
    ("drop-field", ["Required.Golden.BatchTokenIDOutput.DecodesVector.typical"]),
])
def test_broken_testees_fail_the_golden_checks(mode, failing):
    last, text = _run(f"cmd:{TESTEE} --break {mode}", SELECT, "--strict")
    assert " 0 failed" not in last, text
    for check_id in failing:
        assert _failed(check_id, text), f"{check_id} did not fail under --break {mode}:\n{text[-3000:]}"


@pytest.mark.slow
def test_broken_receive_paths_fail_the_unwrap_and_security_checks():
    last, text = _run(f"cmd:{TESTEE} --break no-unwrap --break unsafe-receive",
                      "(Unwrap and TokenizedGenerateReqInput) or Security", "--strict")
    for check_id in ("Required.Unwrap.TokenizedGenerateReqInput.NoWrapperLeft.msgpack",
                     "Required.Security.top_level.NoPickleFromUntrustedPeer"):
        assert _failed(check_id, text), f"{check_id} did not fail:\n{text[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("flags, select, failing", [
    ("--break refuse-unknown-map-keys", "MapUnknownKey", ["Required.Accepts.BeamSearchSequence.MapUnknownKey"]),
    # invisible to a re-encode (the runner's reader fills the defaults again): only the view shows it
    ("--break no-map-defaults", "MapDefaultsFilled", ["Required.Accepts.KvHintAction.MapDefaultsFilled"]),
    ("--break tuple-any-length", "Tuple", ["Required.Refuses.TokenizedEmbeddingReqInput.TupleTooShort.mm_inputs.Decode",
                                          "Required.Refuses.TokenizedEmbeddingReqInput.TupleTooLong.mm_inputs.Decode"]),
    ("--break device-to-cpu", "DeviceKept", ["Required.Tensor.cuda_0.DeviceKept", "Required.Tensor.npu_0.DeviceKept"]),
    ("--tensors values --break device-to-cpu", "DeviceKept", ["Required.Tensor.xpu_1.DeviceKept"]),
    ("--break http-factory-required", "OmittedFieldsTakeDefaults",
     ["Required.Http.ParseFunctionCallReq.OmittedFieldsTakeDefaults"]),
    ("--break http-unknown-keys", "RejectsUnknownKey", ["Required.Http.AbortReq.RejectsUnknownKey"]),
])
def test_broken_testees_fail_the_input_checks(flags, select, failing):
    last, text = _run(f"cmd:{TESTEE} {flags}", select)
    for check_id in failing:
        assert _failed(check_id, text), f"{check_id} did not fail under {flags}:\n{text[-3000:]}"


@pytest.mark.slow
def test_a_testee_holding_tensors_as_values_passes_the_device_checks():
    last, text = _run(f"cmd:{TESTEE} --tensors values", "DeviceKept or Refuses.Tensor")
    assert last.endswith(" 0 failed (0 listed), 0 recommended failed, 0 not tested"), text[-3000:]
    assert "Required.Tensor.mps_0.DeviceKept" not in text, text[-3000:]


# -- stray bytes on stdout, capabilities, failure context ---------------------------------------
# A minimal testee in a few lines, for behaviour the reference testee never shows.
_INLINE = """
import os, sys
from conformance.testee import protocol
out = sys.stdout.buffer
hello = {{"type": "started", "protocol": 1, "implementation": {{"name": "inline", "version": "1"}},
         "manifest": {manifest}, "transports": ["msgpack"], "ops": ["decode", "encode"]}}
while (request := protocol.read_frame(sys.stdin.buffer)) is not None:
    if request["type"] == "start":
        protocol.write_frame(out, hello)
    elif request["type"] == "stop":
        protocol.write_frame(out, {{"type": "stopped"}}); break
    else:
        out.write({stray!r}); out.flush()
        protocol.write_frame(out, {{"id": request["id"], "result": "payload", "payload": request.get("payload", b"")}})
"""


def _inline(stray: bytes = b"", manifest: str = '"sglang-0.5.23"') -> list[str]:
    return [sys.executable, "-c", _INLINE.format(stray=stray, manifest=manifest)]


def test_text_printed_before_the_first_frame_is_shown_as_text():
    with pytest.raises(TesteeRuntimeError, match=r"wrote 'debug: starting up(\\n)?' on stdout before its first frame"):
        chatty = "print('debug: starting up', flush=True); import time; time.sleep(30)"
        SubprocessAdapter([sys.executable, "-c", chatty], timeout=10)


def test_text_printed_between_frames_is_shown_as_text():
    adapter = SubprocessAdapter(_inline(stray=b"warning: slow path\n"))
    try:
        with pytest.raises(TesteeRuntimeError, match=r"wrote 'warning: slow path\\n' on stdout after frame 1"):
            adapter.decode(b"\xc0", "msgpack")
    finally:
        adapter.close()


def test_a_huge_binary_length_prefix_names_its_bytes():
    with pytest.raises(protocol.ProtocolError, match=r"length prefix ffffff7f\) before its first frame"):
        protocol.read_frame(io.BytesIO(b"\xff\xff\xff\x7f"), frames_before=0)


def test_the_testee_finds_the_claimed_manifest_where_the_runner_says():
    # The inline testee claims the id read from the file the environment variable points to.
    manifest = ('__import__("json").load(open(os.path.join(os.environ["IPC_CONFORMANCE_MANIFESTS"], '
                '"sglang-0.5.23.json")))["implementation"] + "-0.5.23"')
    adapter = SubprocessAdapter(_inline(manifest=manifest))
    try:
        assert adapter.manifest_id() == "sglang-0.5.23"
    finally:
        adapter.close()


def test_capabilities_come_from_the_handshake(testee):
    assert testee.capabilities == {"unwrap", "receive", "http", "define", "socket"}
    limited = SubprocessAdapter(f"{TESTEE} --ops decode,encode --transports msgpack")
    try:
        assert limited.ops == {"decode", "encode"} and limited.capabilities == frozenset()
        assert limited.transports == ("msgpack",) and limited.supports("msgpack") and not limited.supports("pickle")
        assert not limited.supports("unwrap") and not limited.supports("socket")
        with pytest.raises(TesteeSkipped, match="'unwrap'"):
            limited.unwrap(cases(MANIFEST, ["AbortReq"])[0].value())
    finally:
        limited.close()


def test_a_refusal_names_step_request_and_a_working_reproducer(testee, tmp_path, monkeypatch):
    from conformance.testee.replay import replay

    monkeypatch.setenv("IPC_TESTEE_REPLAY_DIR", str(tmp_path))
    with pytest.raises(TesteeError) as caught:
        testee.decode(b"\x93\xa8AbortReq\x01\x02", "msgpack")
    first, *context = str(caught.value).splitlines()
    assert first.startswith("testee parse_error: ") and "AbortReq" in first
    assert context[0] == "  step: the testee's decode (and re-encode) of bytes the runner sent"
    assert context[1] == ("  request: decode struct=AbortReq transport=msgpack payload=12 bytes "
                          "93 a8 41 62 6f 72 74 52 65 71 01 02")
    command = context[2].removeprefix("  reproduce: ")
    assert command.startswith("ipc-conformance testee replay ")
    frame = Path(shlex.split(command)[3])
    assert frame.parent == tmp_path
    lines: list[str] = []
    assert replay(frame, shlex.split(command)[5], lines.append) == 1  # the same refusal, outside the suite
    assert lines[2] == "result:  parse_error" and "AbortReq" in lines[3]


def test_bytes_the_reference_cannot_decode_fail_the_check_naming_the_runner_step():
    adapter = SubprocessAdapter(f"{TESTEE} --break flip-byte")
    try:
        good = cases(MANIFEST, ["AbortReq"])[0].msgpack  # ends in nil: flipped to 0xc1, never msgpack
        with pytest.raises(TesteeAnswerError) as caught:
            adapter.decode(good, "msgpack")
        assert not isinstance(caught.value, ValueError)  # not a refusal: a check expecting one still fails
        assert "step: the runner's reference decode of the testee's answer to 'decode'" in str(caught.value)
    finally:
        adapter.close()


@pytest.mark.slow
def test_a_testee_with_only_decode_and_encode_skips_what_needs_more_before_any_work():
    select = "Unwrap or Trace or Security or HttpBase64 or LateGrandchild or (Socket and AbortReq)"
    out = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--impl", f"cmd:{TESTEE} --ops decode,encode",
                          "--", "-k", select, "-p", "no:randomly", "-rs"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    last, text = out.stdout.strip().splitlines()[-1], out.stdout
    assert last.startswith("conformance: 0 passed, 0 failed (0 listed), 0 recommended failed, "), text[-3000:]
    assert "not tested: " in text and " not offered: " in text, text[-3000:]  # each capability named in the count
    for op in ("unwrap", "receive", "http", "define", "socket"):
        assert f"does not offer '{op}'" in text, f"no skip names {op!r}:\n{text[-3000:]}"


def test_checks_that_need_a_missing_op_skip_before_sending_anything():
    """The check bodies themselves, called with a testee that lists only decode and encode:
    each skips naming the op, and the testee has seen no request but the handshake."""
    import types as _types

    from conformance.suite import test_catalogue, test_http_base64, test_security, test_sockets, test_unwrap

    limited = SubprocessAdapter(f"{TESTEE} --ops decode,encode")
    ipc = _types.SimpleNamespace(adapter=limited, manifest=MANIFEST, classes=limited.classes(),
                                 instance=lambda struct, variant: cases(MANIFEST, [struct])[0].value())
    calls = [
        ("unwrap", lambda: test_unwrap.test_receive_path_unwraps(ipc, "TokenizedGenerateReqInput", "msgpack")),
        ("unwrap", lambda: test_unwrap.test_trace_context_survives_forwarding(
            ipc, "TokenizedGenerateReqInput", "msgpack")),
        ("receive", lambda: test_security.test_no_pickle_from_untrusted_peer(ipc, "field", Path("/nonexistent"))),
        ("http", lambda: test_http_base64.test_http_base64_decodes(ipc, "UpdateWeightsFromTensorReqInput")),
        ("define", lambda: test_catalogue.test_late_grandchild_decodes(ipc, "id")),
        ("socket", lambda: test_sockets.test_message_over_socket(ipc, "AbortReq", "msgpack", None)),
    ]
    try:
        for op, call in calls:
            with pytest.raises(pytest.skip.Exception, match=f"does not offer '{op}'"):
                call()
        assert limited._next_id == 0, "a check sent requests before finding out it must skip"
    finally:
        limited.close()


def test_reproducers_replay_the_last_requests(testee, tmp_path, monkeypatch):
    from conformance.testee.replay import replay

    monkeypatch.setenv("IPC_TESTEE_REPLAY_DIR", str(tmp_path))
    testee.recent.clear()
    testee.decode(testee.encode(7, "msgpack"), "msgpack")
    lines = testee.reproducers().splitlines()[1:]
    assert [line.split()[:2] for line in lines[::2]] == [["request:", "encode"], ["request:", "decode"]]
    command = shlex.split(lines[3].removeprefix("  reproduce: "))
    out: list[str] = []
    assert replay(Path(command[3]), command[5], out.append) == 0
    assert out[-1] == "reference decode of the payload: 7"


def test_a_saved_frame_that_is_no_request_is_refused_naming_the_member(tmp_path):
    """testee replay reads a saved frame through the request structs (conformance/testee/frames.py)."""
    from conformance.errors import UsageError
    from conformance.testee.replay import replay

    path = tmp_path / "decode.frame"
    path.write_bytes(protocol.pack({"type": "decode", "transport": "json", "payload": b"\x01"}))
    with pytest.raises(UsageError, match=r"is not a saved request frame: .*'transport'"):
        replay(path, f"cmd:{TESTEE}", print)


def test_the_answer_to_stop_is_checked_as_a_frame():
    assert protocol.check_stopped({"type": "stopped"}) == {"type": "stopped"}
    for wrong in ({"type": "result"}, []):
        with pytest.raises(protocol.ProtocolError, match="'stopped'"):
            protocol.check_stopped(wrong)


def test_a_testee_that_cannot_pickle_skips_objects_to_wrap_and_forwards_wrappers():
    limited = SubprocessAdapter(f"{TESTEE} --transports msgpack")
    try:
        value = cases(MANIFEST, ["TokenizedGenerateReqInput"])[1].value()  # typical: wrappers as wrappers
        assert type(value.time_stats).__name__ == "PickleWrapper"
        assert limited.encode(value, "msgpack") == cases(MANIFEST, ["TokenizedGenerateReqInput"])[1].msgpack
        value.time_stats = {"created": 1.5}
        with pytest.raises(TesteeSkipped, match=r"TokenizedGenerateReqInput\.time_stats: an object to wrap"):
            limited.encode(value, "msgpack")
    finally:
        limited.close()


def test_smoke_names_a_replay_command_for_each_failure():
    from conformance.testee.smoke import smoke

    lines: list[str] = []
    assert smoke(f"cmd:{TESTEE}", out=lines.append) == 0 and lines[-1].endswith(" 0 failed")
    lines.clear()
    assert smoke(f"cmd:{TESTEE} --break flip-byte", out=lines.append) == 1
    failed = [i for i, line in enumerate(lines) if line.startswith("FAIL")]
    assert failed and all(any(line.strip().startswith("reproduce: ipc-conformance testee replay ")
                              for line in lines[i + 1:i + 4]) for i in failed), "\n".join(lines)


# -- protocol 2: the decoded value's own view ---------------------------------------------------
def _vector(name: str) -> bytes:
    from conformance.schema.golden import vector_paths

    return vector_paths("sglang-0.5.23")[name, "typical"].read_bytes()


def test_a_protocol_1_testee_skips_the_checks_that_need_the_view():
    adapter = SubprocessAdapter(_inline())
    try:
        assert adapter.protocol == 1 and adapter.tensor_kind is None
        with pytest.raises(TesteeSkipped, match="protocol 1"):
            adapter.decoded_view(_vector("AbortReq"), "msgpack")
    finally:
        adapter.close()


def test_a_protocol_2_decode_without_its_view_fails():
    inline = [sys.executable, "-c", _INLINE.format(stray=b"", manifest='"sglang-0.5.23"').replace(
        '"protocol": 1,', '"protocol": 2, "tensors": "values",')]
    adapter = SubprocessAdapter(inline)
    try:
        assert adapter.protocol == 2 and adapter.tensor_kind == "values"
        with pytest.raises(TesteeAnswerError, match="carries no 'view'"):
            adapter.decoded_view(_vector("AbortReq"), "msgpack")
    finally:
        adapter.close()


def test_the_reference_testee_reports_the_decoded_value_itself():
    from conformance.schema.golden.view import to_view
    from reference_impl import codec

    data = _vector("BeamSearchOutput")
    adapter = SubprocessAdapter(TESTEE)
    try:
        assert adapter.protocol == 2 and adapter.tensor_kind == "runtime"
        assert adapter.decoded_view(data, "msgpack") == to_view(codec.decode(data, "msgpack"))
    finally:
        adapter.close()


def test_a_new_check_forgets_the_requests_of_the_one_before(testee, tmp_path, monkeypatch):
    """A failure names the requests of its own check only: the plugin calls start_check() before
    each check, and the requests and answers of the check before are gone."""
    monkeypatch.setenv("IPC_TESTEE_REPLAY_DIR", str(tmp_path))
    value = testee.classes()["AbortReq"](rid="before")
    testee.decode(testee.encode(value, "msgpack"), "msgpack")
    assert "request: decode struct=AbortReq" in testee.reproducers()
    testee.start_check()
    assert testee.reproducers() == ""
    data = testee.encode(value, "msgpack")  # its own bytes again: named as such in this check too
    assert testee._input_step("decode", data, "msgpack").startswith("the testee's decode (and re-encode) of its own")
