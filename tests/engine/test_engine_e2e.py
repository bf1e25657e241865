"""End-to-end conformance checks against the real reference engine, under both transports.

Each run (see conftest.RUNS) is one server: HTTP -> tokenizer manager -> controller
-> scheduler(s) -> detokenizer -> back, all over ZeroMQ. The checks read the
responses, every IPC message the tap recorded, and the exported spans.
Select with ``pytest -m e2e``; they need about a minute or two on 2 CPU cores.
"""

from __future__ import annotations

import math
import re

import pytest

from reference_impl.engine.tokenizer import ByteTokenizer
from reference_tools.e2e.checks import (
    leftover_wrapper_failures,
    link_failures,
    max_batch,
    processes_in_trace,
    tensors_on_wire,
    time_stats_failures,
    trace_failures,
    wire_failures,
    wrapped_on_wire,
)
from reference_tools.e2e.scenario import PARENT_SPAN, TRACE_IDS, comparable, comparable_results

pytestmark = pytest.mark.e2e

MAIN_RUNS = ["msgpack-dp1", "pickle-dp1", "msgpack-dp2", "pickle-dp2"]
REFERENCE_RUN = "msgpack-dp1"
PROCESSES = ("tokenizer_manager", "controller", "detokenizer")


@pytest.fixture(params=MAIN_RUNS)
def run(request: pytest.FixtureRequest, engine_run):
    return engine_run(request.param)


def _schedulers(run) -> list[str]:
    return [f"scheduler_{r}" for r in range(run.dp_size)]


# -- processes, transport, lifecycle -------------------------------------------------------
def test_every_process_logs_its_transport(run):
    for process in (*PROCESSES, *_schedulers(run)):
        assert f"[{process}]" in run.log and f"IPC transport: {run.transport}" in run.log, process
        said = re.findall(rf"\[{process}\] .*IPC transport: (\w+)", run.log)
        assert said and set(said) == {run.transport}, (process, said)
    assert run.info["transport"] == run.transport
    assert run.info["dp_size"] == run.dp_size and run.info["device"] == "cpu"
    assert set(run.info["pids"]) == {"controller", "detokenizer", *_schedulers(run)}


def test_signal_shuts_down_cleanly(run):
    assert run.shutdown == {"exit_code": 0, "hung": False, "orphans": {}, "ipc_dir_left": False}


# -- every IPC message ---------------------------------------------------------------------
def test_every_ipc_message_is_a_catalogue_struct_and_round_trips(run):
    assert len(run.records) > 50
    assert wire_failures(run.records) == []


def test_no_pickle_wrapper_survives_a_receive_path(run):
    assert leftover_wrapper_failures(run.records) == []


def test_time_stats_travel_in_pickle_wrappers_under_msgpack(run):
    assert time_stats_failures(run.records) == []
    wrapped = wrapped_on_wire(run.records)
    if run.transport == "pickle":
        assert not wrapped
        return
    for link in ("controller<-tokenizer_manager", "detokenizer<-schedulers", "tokenizer_manager<-engine",
                 *(f"{s}<-controller" for s in _schedulers(run))):
        assert wrapped[link] > 0, f"no PickleWrapper seen on {link}: {dict(wrapped)}"


def test_every_link_carries_its_messages(run):
    assert link_failures(run.records, run.dp_size) == []


def test_tensors_cross_the_ipc_path(run):
    assert tensors_on_wire(run.records) >= 2  # pooled hidden states: scheduler -> detokenizer -> tokenizer manager


def test_logprob_shapes_on_the_wire(run):
    """Streaming chunks after the first carry [[]] input logprobs; batches mix None and lists."""
    from reference_tools.e2e.checks import decode_raw

    shapes = set()
    for rec in run.records:
        obj = decode_raw(rec)
        if type(obj).__name__ != "BatchTokenIDOutput" or obj.input_token_logprobs_val is None:
            continue
        for v in obj.input_token_logprobs_val:
            shapes.add("none" if v is None else "empty" if v == [] else
                       "leading-none" if v[0] is None else "floats")
    assert shapes >= {"none", "empty", "leading-none", "floats"}, shapes


# -- tracing -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(TRACE_IDS))
def test_one_linked_trace_across_all_processes(run, kind):
    chain = ("tokenizer_manager.request", "controller.dispatch", "scheduler.embed", "detokenizer.pass_embedding",
             "tokenizer_manager.response") if kind == "encode" else None
    failures = trace_failures(run.spans, TRACE_IDS[kind], PARENT_SPAN, *([chain] if chain else []))
    assert failures == []
    procs = processes_in_trace(run.spans, TRACE_IDS[kind])
    assert procs >= set(PROCESSES) and procs & set(_schedulers(run)), procs


# -- responses -----------------------------------------------------------------------------
@pytest.mark.parametrize("other", [r for r in MAIN_RUNS if r != REFERENCE_RUN])
def test_responses_identical_across_transports_and_dp_sizes(engine_run, other):
    expected = comparable_results(engine_run(REFERENCE_RUN).results)
    actual = comparable_results(engine_run(other).results)
    differing = sorted(k for k in expected if expected[k] != actual.get(k))
    assert differing == [], {k: (expected[k], actual.get(k)) for k in differing[:2]}


def test_generation(run):
    r = run.results
    plain = r["plain"]
    assert plain["meta_info"]["finish_reason"] == {"type": "length", "length": 24}
    assert len(plain["output_ids"]) == 24 == plain["meta_info"]["completion_tokens"]
    assert plain["text"] == ByteTokenizer().decode(plain["output_ids"])
    assert r["generate_after_bad"]["output_ids"] == plain["output_ids"]
    assert [len(b["output_ids"]) for b in r["batch"]] == [5, 5, 5]
    # stop string: finishes at its first occurrence, trimmed from the text
    stop = r["stop_string"]["meta_info"]["finish_reason"]
    assert stop["type"] == "stop" and isinstance(stop["matched"], str)
    assert r["stop_string"]["text"] == plain["text"][: plain["text"].index(stop["matched"])]
    # stop token: finishes on it, and it is not in the text
    tok = r["stop_token"]
    k = plain["output_ids"].index(plain["output_ids"][4])
    assert tok["meta_info"]["finish_reason"] == {"type": "stop", "matched": plain["output_ids"][4]}
    assert tok["output_ids"] == plain["output_ids"][: k + 1]
    assert tok["text"] == ByteTokenizer().decode(plain["output_ids"][:k])
    assert len(r["seeded_sampling"]["output_ids"]) == 16


def test_streaming(run):
    chunks = run.results["stream"]
    assert len(chunks) == 10
    for before, after in zip(chunks, chunks[1:]):
        assert after["text"].startswith(before["text"]) and before["meta_info"]["finish_reason"] is None
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 10}
    assert chunks[-1]["output_ids"] == run.results["plain"]["output_ids"][:10]


def test_logprobs(run):
    full = run.results["logprobs_full"]
    meta = full["meta_info"]
    n_in, n_out = meta["prompt_tokens"], meta["completion_tokens"]
    assert meta["input_token_logprobs"][0] == [None, 256, "<s>"]
    assert len(meta["input_token_logprobs"]) == n_in and len(meta["output_token_logprobs"]) == n_out == 6
    assert all(isinstance(v, float) and v <= 0 for v, _, _ in meta["input_token_logprobs"][1:])
    assert meta["input_top_logprobs"][0] is None and all(len(t) == 3 for t in meta["input_top_logprobs"][1:])
    assert meta["input_token_ids_logprobs"][0] is None
    assert [t[1] for t in meta["input_token_ids_logprobs"][1]] == [65, 97, 257]
    assert [t[1] for t in meta["output_token_logprobs"]] == full["output_ids"]
    for chosen, top in zip(meta["output_token_logprobs"], meta["output_top_logprobs"]):
        assert top[0][:2] == chosen[:2]  # greedy: the chosen token is the top-1, same logprob
    probs = [math.exp(v) for v, _, _ in meta["output_top_logprobs"][0]]
    assert probs == sorted(probs, reverse=True) and sum(probs) <= 1.0 + 1e-6
    assert run.results["logprobs_output_only"]["meta_info"]["input_token_logprobs"] == []
    stream = run.results["logprobs_stream"]
    assert all(len(c["meta_info"]["input_token_logprobs"]) == c["meta_info"]["prompt_tokens"] - 3 for c in stream)
    assert [len(c["meta_info"]["output_token_logprobs"]) for c in stream] == [1, 2, 3, 4, 5]


def test_hidden_states_and_embeddings(run):
    hs = run.results["hidden_states"]
    meta = hs["meta_info"]
    assert len(meta["hidden_states"]) == meta["prompt_tokens"] + meta["completion_tokens"] - 1
    assert all(len(v) == run.info["model_config"]["hidden_size"] for v in meta["hidden_states"])
    enc = run.results["encode"]
    assert len(enc["embedding"]) == run.info["model_config"]["hidden_size"]
    assert abs(sum(x * x for x in enc["embedding"]) - 1.0) < 1e-5
    assert len(enc["pooled_hidden_state"]) == len(enc["embedding"])
    assert enc["meta_info"]["pooled_hidden_state_dtype"] == "float32"
    assert [len(e["embedding"]) for e in run.results["encode_batch"]] == [len(enc["embedding"])] * 2
    v1 = run.results["v1_embeddings"]
    assert [d["index"] for d in v1["data"]] == [0, 1] and v1["usage"]["prompt_tokens"] == 8


def test_openai_routes(run):
    r = run.results
    comp = r["v1_completions"]
    assert comp["object"] == "text_completion" and comp["choices"][0]["finish_reason"] == "length"
    assert comp["choices"][0]["text"] == r["plain"]["text"][: len(comp["choices"][0]["text"])]
    assert len(comp["choices"][0]["logprobs"]["tokens"]) == 8
    stream = r["v1_completions_stream"]
    assert stream[-1]["usage"]["completion_tokens"] == 5 and stream[-2]["choices"][0]["finish_reason"] == "length"
    chat = r["v1_chat"]
    text = chat["choices"][0]["message"]["content"]
    assert chat["object"] == "chat.completion" and len(chat["choices"][0]["logprobs"]["content"]) > 0
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in r["v1_chat_stream"] if c["choices"])
    assert streamed == text
    assert r["v1_models"]["data"][0]["id"] == run.info["served_model_name"]


def test_weight_update_reaches_every_scheduler(run):
    r = run.results
    assert r["update_weights"]["success"] and r["restore_weights"]["success"]
    assert r["update_weights"]["message"].count("updated 1 tensors") == run.dp_size
    assert r["after_update"]["output_ids"] != r["plain"]["output_ids"]
    assert r["after_update"]["meta_info"]["weight_version"] == "perturbed"
    assert comparable(r["after_restore"]) == comparable({**r["plain"], "meta_info": {
        **r["plain"]["meta_info"], "weight_version": "restored"}})
    assert r["flush_cache"]["success"]


def test_abort_mid_stream(run):
    abort = run.results["abort"]
    assert abort["finish_type"] == "abort" and abort["completion_tokens"] < 480


def test_continuous_batching_is_exact(run):
    batching = run.results["batching"]
    assert comparable(batching["together"]) == comparable(batching["solo"])
    assert max_batch(run.records) >= 2  # the concurrent requests really shared decode steps


EXPECTED_BAD = {
    "sampling wrong type": (400, "sampling_params.temperature"), "wrong type bool": (400, "stream"),
    "unknown field": (400, "bogus"), "unknown sampling field": (400, "sampling_params.temprature"),
    "token out of range": (400, "input_ids[1]"), "bad top_p": (400, "sampling_params.top_p"),
    "too long": (400, "sampling_params.max_new_tokens"), "both inputs": (400, "text"), "not json": (400, None),
    "invalid base64": (400, "serialized_named_tensors"), "not safetensors": (400, "serialized_named_tensors"),
    "unknown tensor": (400, "serialized_named_tensors"), "wrong shape": (400, "serialized_named_tensors"),
    "wrong flag type": (400, "flush_cache"), "unsupported load_format": (400, "load_format"),
    "unknown model": (404, "model"), "no messages": (400, "messages"), "bad role": (400, "messages[0].role"),
    "embeddings wrong type": (400, "input"), "empty": (400, "input_ids"), "nothing to abort": (400, "rid"),
    "weights wrong type": (400, "serialized_named_tensors"), "completions wrong type": (400, "max_tokens"),
}


def test_bad_requests_are_4xx_naming_the_field_and_never_reach_a_scheduler(run):
    seen = {}
    for case in run.results["bad_requests"]:
        seen[case["case"]] = (case["status"], case["param"])
        assert case["message"], case
        if case["param"]:
            assert case["param"] in case["message"], case
    assert seen == EXPECTED_BAD
    assert run.results["bad_requests_reached_controller"] == 0
    assert run.results["health_after_bad"] == 200


def test_routed_dp_rank(engine_run):
    for name in ("msgpack-dp2", "pickle-dp2"):
        assert engine_run(name).results["routed"] == [0, 1]


# -- failure handling ----------------------------------------------------------------------
def test_dead_scheduler_fails_requests_fast_and_reports_unhealthy(engine_run):
    run = engine_run("msgpack-dp2")
    assert run.results  # the scenario finished before the kill
    fault = run.fault
    assert fault["stream_finished"] and fault["seconds_to_error"] < 5, fault
    last = fault["last_event"]
    assert last is not None and "error" in last and last["error"]["code"] == 503, fault
    assert "scheduler_1" in last["error"]["message"]
    assert fault["health"]["status"] == 503 and fault["health"]["body"]["dead"], fault["health"]
    assert fault["new_request"]["status"] == 503 and "died" in fault["new_request"]["body"]["message"]
    assert fault["flush"]["status"] == 503 and fault["flush"]["seconds"] < 2
    assert run.shutdown["orphans"] == {} and not run.shutdown["ipc_dir_left"]


def test_check_catches_a_controller_that_skips_the_unwrap(engine_run):
    """The upstream bug, re-introduced through the launch flag: the leftover-wrapper check fails and
    names the controller; the request fails instead of hanging."""
    broken = engine_run("msgpack-dp1-controller-skips-unwrap")
    failures = leftover_wrapper_failures(broken.records)
    assert failures and all(f.startswith("controller (controller<-tokenizer_manager, msgpack)") for f in failures)
    assert any(".time_stats" in f for f in failures)
    gen = broken.results["generate"]
    assert gen["status"] == 500 and "controller" in gen["body"]["message"], gen
    assert "DEBUG HOOK ACTIVE" in broken.log
    assert broken.shutdown["orphans"] == {} and not broken.shutdown["ipc_dir_left"]
