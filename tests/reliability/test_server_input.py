"""Bad HTTP input, client disconnects, and where the server's sockets listen.

One server (msgpack, IPC tap on, request bodies limited to 1 MiB) for the module:

* every bad body - invalid JSON, wrong types, invalid base64, unknown fields, values the
  engine cannot use (NaN, Infinity, ints beyond 64 bits, out-of-range ranks...), oversized
  bodies (declared or chunked), nesting bombs - is a 4xx JSON error whose message names the
  field, none of them reaches the controller, and the server keeps serving;
* a client that disconnects mid-stream (or while waiting for a non-streaming answer) has its
  request aborted in the scheduler: the scheduler's last output for it says "abort", long
  before its token budget, and nothing more is computed for it;
* the ZeroMQ sockets are unix sockets in a private (0700, owner-only) directory; the only TCP
  listener is the HTTP port on loopback.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import stat
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from .server import Server

pytestmark = pytest.mark.reliability
TEST_TIMEOUT_S = 120
MAX_BODY = 1 << 20
LONG = 480


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model_cache):
    s = Server(tmp_path_factory.mktemp("input"), tap=True, extra_args=("--max-request-bytes", str(MAX_BODY)))
    s.start(model_cache)
    try:
        yield s
    finally:
        report = s.stop()
        assert report == {"exit_code": 0, "hung": False, "orphans": {}, "ipc_dir_left": False}, report


def _tap(server: Server, process: str) -> list:
    from reference_impl.engine.tap import read_tap

    return [r for r in read_tap(server.tap_dir) if r.process == process]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


SAMPLING_FLOAT_CASES = [("temperature", "NaN"), ("temperature", "Infinity"), ("top_p", "NaN"),
                        ("frequency_penalty", "-Infinity"), ("presence_penalty", "1e308"),
                        ("repetition_penalty", "1e308")]


def bad_bodies(served: str) -> list[tuple[str, str, Any, int, str]]:
    """(route, case, body (dict or raw bytes), expected status, the field the message must name)."""
    gen = "/generate"
    cases: list[tuple[str, str, Any, int, str]] = [
        (gen, "invalid JSON", b'{"text": "hi",', 400, "body"),
        (gen, "not UTF-8", b'{"text": "\xff\xfe"}', 400, "body"),
        (gen, "JSON nesting bomb", b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "body"),
        (gen, "body is a list", [1, 2], 400, "body"),
        (gen, "unknown field", {"text": "hi", "bogus": 1}, 400, "bogus"),
        (gen, "unknown sampling field", {"text": "hi", "sampling_params": {"temprature": 0}}, 400,
         "sampling_params.temprature"),
        (gen, "wrong type", {"text": "hi", "sampling_params": {"max_new_tokens": "4"}}, 400,
         "sampling_params.max_new_tokens"),
        (gen, "wrong type in a list", {"input_ids": [1, "2"]}, 400, "input_ids[1]"),
        (gen, "rid list for one request", {"text": "hi", "rid": ["a", "b"]}, 400, "rid"),
        (gen, "duplicate batch rids", {"text": ["a", "b"], "rid": ["x", "x"]}, 400, "rid"),
        (gen, "sampling_seed beyond 64 bits", {"text": "hi", "sampling_params": {"sampling_seed": 2 ** 70}}, 400,
         "sampling_params.sampling_seed"),
        (gen, "min_new_tokens beyond 64 bits", {"text": "hi", "sampling_params": {"min_new_tokens": 2 ** 70}}, 400,
         "sampling_params.min_new_tokens"),
        (gen, "logprob_start_len beyond 64 bits", {"text": "hi", "return_logprob": True,
                                                    "logprob_start_len": 2 ** 70}, 400, "logprob_start_len"),
        (gen, "token id beyond 64 bits", {"input_ids": [1, 2 ** 70]}, 400, "input_ids[1]"),
        (gen, "routed_dp_rank out of range", {"text": "hi", "routed_dp_rank": 5}, 400, "routed_dp_rank"),
        (gen, "negative routed_dp_rank", {"text": "hi", "routed_dp_rank": -1}, 400, "routed_dp_rank"),
        (gen, "top_logprobs_num beyond the vocabulary", {"text": "hi", "return_logprob": True,
                                                          "top_logprobs_num": 100_000}, 400, "top_logprobs_num"),
        (gen, "logit_bias overflowing the softmax", {"text": "hi", "sampling_params": {"logit_bias": {"1": 1e308}}},
         400, "sampling_params.logit_bias"),
        ("/encode", "wrong type", {"input_ids": "1 2 3"}, 400, "input_ids"),
        ("/encode", "routed_dp_rank out of range", {"text": "x", "routed_dp_rank": 3}, 400, "routed_dp_rank"),
        ("/update_weights_from_tensor", "invalid base64", {"serialized_named_tensors": ["@@@"]}, 400,
         "serialized_named_tensors"),
        ("/update_weights_from_tensor", "a pickle, not safetensors",
         {"serialized_named_tensors": [_b64(_evil_pickle())]}, 400, "serialized_named_tensors"),
        ("/update_weights_from_tensor", "unknown field", {"serialized_named_tensors": [], "x": 1}, 400, "x"),
        ("/v1/completions", "wrong type", {"model": served, "prompt": "x", "max_tokens": "many"}, 400, "max_tokens"),
        ("/v1/completions", "NaN temperature", b'{"model": "%s", "prompt": "x", "temperature": NaN}' % served.encode(),
         400, "temperature"),
        ("/v1/completions", "seed beyond 64 bits", {"model": served, "prompt": "x", "seed": 2 ** 70}, 400, "seed"),
        ("/v1/chat/completions", "bad role", {"model": served, "messages": [{"role": "robot", "content": "x"}]},
         400, "messages[0].role"),
        ("/v1/embeddings", "wrong type", {"model": served, "input": 5}, 400, "input"),
        ("/abort_request", "wrong type", {"rid": 5}, 400, "rid"),
    ]
    for name, value in SAMPLING_FLOAT_CASES:
        raw = b'{"text": "hi", "sampling_params": {"%s": %s}}' % (name.encode(), value.encode())
        cases.append((gen, f"{name} = {value}", raw, 400, f"sampling_params.{name}"))
    return cases


def _evil_pickle() -> bytes:
    from reference_tools.fuzz.corpus import _evil_pickle as evil

    return evil()


def test_bad_input_is_4xx_naming_the_field_and_never_reaches_the_engine(server: Server):
    served = server.info["served_model_name"]
    before = len(_tap(server, "controller"))
    wrong = []
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for route, case, body, status, field in bad_bodies(served):
            if isinstance(body, bytes):
                r = c.post(route, content=body, headers={"content-type": "application/json"})
            else:
                r = c.post(route, json=body)
            try:
                payload = r.json()
            except ValueError:
                payload = {"message": r.text[:200], "param": None}
            if (r.status_code != status or field not in str(payload.get("message"))
                    or (field != "body" and payload.get("param") != field)):
                wrong.append(f"{route} {case}: {r.status_code} {payload}")
        assert wrong == [], "\n".join(wrong)
        time.sleep(0.5)
        assert len(_tap(server, "controller")) == before, "a bad request reached the controller"
        ok = c.post("/generate", json={"text": "still here",  # ignore_eos: a sampled EOS is no failure
                                            "sampling_params": {"max_new_tokens": 3, "ignore_eos": True}})
        assert ok.status_code == 200 and len(ok.json()["output_ids"]) == 3
    assert server.health().status_code == 200


def test_oversized_bodies_are_413_and_the_server_keeps_serving(server: Server):
    big = json.dumps({"text": "a" * (MAX_BODY + 10)}).encode()
    t0 = time.monotonic()
    r = httpx.post(server.url + "/generate", content=big, headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 413 and r.json()["param"] == "body", r.text
    assert "body" in r.json()["message"]

    # No Content-Length: a chunked body is cut off once it passes the limit, not read to the end.
    def chunks():
        for _ in range(64):  # 64 x 64 KiB = 4 MiB offered
            yield b"a" * 65536

    with httpx.Client(timeout=30) as c:
        r = c.post(server.url + "/generate", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["param"] == "body", r.text
    assert time.monotonic() - t0 < 10
    ok = httpx.post(server.url + "/generate", json={"text": "x", "sampling_params": {"max_new_tokens": 2}}, timeout=30)
    assert ok.status_code == 200
    assert server.health().status_code == 200


def _scheduler_outputs(server: Server, rid: str) -> list[tuple[float, dict, int]]:
    """(time, finished_reason, completion_tokens) of every scheduler output the detokenizer got for rid."""
    from reference_impl import codec

    out = []
    for rec in _tap(server, "detokenizer"):
        if rec.delivered_type != "BatchTokenIDOutput":
            continue
        msg = codec.decode(rec.frames[0], rec.transport, allow_pickle=True)
        for i, r in enumerate(msg.rids):
            if r == rid:
                out.append((rec.time, msg.finished_reasons[i], msg.completion_tokens[i]))
    return out


def _reached_scheduler(server: Server, rid: str) -> bool:
    from reference_impl import codec

    for rec in _tap(server, "scheduler_0"):
        if rec.delivered_type == "TokenizedGenerateReqInput":
            if codec.decode(rec.frames[0], rec.transport, allow_pickle=True).rid == rid:
                return True
    return False


def _check_aborted_in_scheduler(server: Server, rid: str, gone_at: float) -> dict:
    deadline = time.time() + 5
    outputs = _scheduler_outputs(server, rid)
    while time.time() < deadline and not (outputs and outputs[-1][1] is not None):
        time.sleep(0.1)
        outputs = _scheduler_outputs(server, rid)
    assert outputs, f"the scheduler never produced anything for {rid}"
    when, reason, tokens = outputs[-1]
    assert reason is not None and reason["type"] == "abort", f"{rid}: last scheduler output {reason}, {tokens} tokens"
    assert tokens < LONG // 2, f"{rid}: {tokens} tokens computed before the abort"
    count = len(outputs)
    time.sleep(1.0)
    assert len(_scheduler_outputs(server, rid)) == count, f"{rid}: the scheduler kept computing after the abort"
    return {"abort_after_s": round(when - gone_at, 2), "tokens_computed": tokens}


def test_client_disconnect_mid_stream_aborts_in_the_scheduler(server: Server):
    rid = "disconnect-stream"
    body = {"text": "long story", "rid": rid, "stream": True,
            "sampling_params": {"max_new_tokens": LONG, "ignore_eos": True, "temperature": 0}}
    with httpx.Client(base_url=server.url, timeout=30) as c:
        with c.stream("POST", "/generate", json=body) as r:
            assert r.status_code == 200
            events = 0
            for line in r.iter_lines():
                events += line.startswith("data: ")
                if events >= 3:
                    break
        gone_at = time.time()  # leaving the block closes the connection mid-stream
    numbers = _check_aborted_in_scheduler(server, rid, gone_at)
    assert numbers["abort_after_s"] < 2, numbers
    assert server.server_info()["in_flight"] == {"requests": 0, "control": 0}


def test_client_disconnect_while_waiting_for_a_full_answer_aborts_in_the_scheduler(server: Server):
    rid = "disconnect-plain"
    body = json.dumps({"text": "long story", "rid": rid,
                       "sampling_params": {"max_new_tokens": LONG, "ignore_eos": True, "temperature": 0}}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        deadline = time.time() + 10
        while time.time() < deadline and not _reached_scheduler(server, rid):
            time.sleep(0.02)  # a non-streaming request has no output before it ends: watch its arrival
        assert _reached_scheduler(server, rid)
    gone_at = time.time()  # leaving the block closed the connection
    numbers = _check_aborted_in_scheduler(server, rid, gone_at)
    assert numbers["abort_after_s"] < 2, numbers
    assert server.server_info()["in_flight"] == {"requests": 0, "control": 0}


def _listening_tcp(pids: list[int]) -> list[tuple[str, int]]:
    """(address, port) of every listening TCP socket owned by one of pids."""
    inodes = set()
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        for fd in fd_dir.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = []
    for table, family in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if state == "0A" and inode in inodes:  # LISTEN
                addr_hex, port_hex = local.split(":")
                if family == 4:
                    addr = socket.inet_ntop(socket.AF_INET, bytes.fromhex(addr_hex)[::-1])
                else:
                    raw = bytes.fromhex(addr_hex)
                    addr = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
                found.append((addr, int(port_hex, 16)))
    return found


def test_zmq_sockets_are_private_unix_sockets_and_only_http_listens_on_loopback(server: Server):
    ipc_dir = Path(server.info["ipc_dir"])
    st = ipc_dir.stat()
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid(), oct(st.st_mode)
    entries = sorted(ipc_dir.iterdir())
    assert {p.name for p in entries} == {"tokenizer_manager", "controller", "detokenizer", "scheduler_0"}
    assert all(stat.S_ISSOCK(p.lstat().st_mode) for p in entries)
    listeners = _listening_tcp(list(server.pids.values()))
    assert listeners == [("127.0.0.1", server.port)], listeners
