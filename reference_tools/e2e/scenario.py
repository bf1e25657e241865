"""The fixed set of requests every end-to-end run sends, and what it records.

run_scenario() exercises every IPC path the spec names (generate plain / batch /
streaming, every logprob shape, hidden states, embeddings with a tensor on the
wire, OpenAI routes, weight update, flush, abort mid-stream, continuous batching,
bad requests) and returns JSON-like results. ``comparable()`` strips what may
differ between runs (ids, timestamps, latencies, dp rank) so the results of two
servers (pickle vs msgpack, dp 1 vs 2) can be compared for exact equality.
"""

from __future__ import annotations

import base64
import concurrent.futures
import time
from typing import Any

import torch
from safetensors.torch import load_file

from reference_impl.engine.weights import serialize_named_tensors
from reference_tools.e2e.harness import Client, ServerProcess

VOLATILE = {"id", "created", "e2e_latency", "dp_rank"}
TRACE_IDS = {
    "generate": "4bf92f3577b34da6a3ce929d0e0e4736",
    "stream": "5c0a0f3e7d1b4c2a9e8f7d6c5b4a3928",
    "encode": "6d1b2e3f4a5b6c7d8e9f0a1b2c3d4e5f",
}
PARENT_SPAN = "00f067aa0ba902b7"
GREEDY = {"temperature": 0, "ignore_eos": True}
PROMPT = "The quick brown fox"


def traceparent(kind: str) -> dict:
    return {"traceparent": f"00-{TRACE_IDS[kind]}-{PARENT_SPAN}-01"}


def comparable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def comparable_results(results: dict) -> dict:
    """What must be identical between two runs of the scenario (any transport, any dp size)."""
    out = dict(comparable(results))
    out.pop("routed", None)
    out["abort"] = results["abort"]["finish_type"]  # how far it got before the abort is timing
    for key in ("flush_cache", "update_weights", "restore_weights"):
        out[key] = results[key]["success"]  # the message names each scheduler
    return out


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def count_records(server: ServerProcess, process: str) -> int:
    from reference_impl.engine.tap import read_tap

    return sum(1 for r in read_tap(server.tap_dir) if r.process == process)


def pick_stop(text: str) -> str:
    """Two printable ASCII characters from the greedy output (deterministic for a given model)."""
    for i in range(4, len(text) - 1):
        pair = text[i:i + 2]
        if all(32 <= ord(ch) < 127 for ch in pair):
            return pair
    raise AssertionError(f"no printable pair in {text!r}")


def run_scenario(server: ServerProcess) -> dict[str, Any]:
    c = Client(server.url)
    served = server.info["served_model_name"]
    out: dict[str, Any] = {}
    try:
        gen = lambda body, **kw: c.ok("/generate", body, **kw)

        # -- generation ---------------------------------------------------------------
        out["plain"] = gen({"text": PROMPT, "sampling_params": {**GREEDY, "max_new_tokens": 24}},
                           headers=traceparent("generate"))
        plain = out["plain"]
        out["input_ids"] = gen({"input_ids": [256, 72, 105, 33], "sampling_params": {**GREEDY, "max_new_tokens": 8}})
        out["batch"] = gen({"text": ["a", "bb", "ccc"], "sampling_params": {**GREEDY, "max_new_tokens": 5}})
        stop_str = pick_stop(plain["text"])
        out["stop_string"] = gen({"text": PROMPT, "sampling_params": {**GREEDY, "max_new_tokens": 24,
                                                                      "stop": [stop_str]}})
        out["stop_token"] = gen({"text": PROMPT, "sampling_params": {**GREEDY, "max_new_tokens": 24,
                                                                     "stop_token_ids": [plain["output_ids"][4]]}})
        out["seeded_sampling"] = gen({"text": PROMPT, "sampling_params": {
            "temperature": 0.8, "top_p": 0.9, "top_k": 40, "min_p": 0.01, "sampling_seed": 1234,
            "max_new_tokens": 16, "ignore_eos": True, "frequency_penalty": 0.2, "repetition_penalty": 1.1}})
        out["stream"] = list(c.stream("/generate", {"text": PROMPT, "stream": True,
                                                    "sampling_params": {**GREEDY, "max_new_tokens": 10}},
                                      headers=traceparent("stream")))

        # -- logprobs: every shape (None first prompt token, [[]] later chunks, mixed batches)
        out["logprobs_full"] = gen({"text": PROMPT, "return_logprob": True, "logprob_start_len": 0,
                                    "top_logprobs_num": 3, "token_ids_logprob": [65, 97, 257],
                                    "return_text_in_logprobs": True,
                                    "sampling_params": {**GREEDY, "max_new_tokens": 6}})
        out["logprobs_output_only"] = gen({"text": PROMPT, "return_logprob": True,
                                           "sampling_params": {**GREEDY, "max_new_tokens": 6}})
        out["logprobs_stream"] = list(c.stream("/generate", {
            "text": PROMPT, "stream": True, "return_logprob": True, "logprob_start_len": 3, "top_logprobs_num": 2,
            "sampling_params": {**GREEDY, "max_new_tokens": 5}}))
        out["logprobs_batch"] = gen({"text": ["x", "yy"], "return_logprob": True, "logprob_start_len": 0,
                                     "top_logprobs_num": 1, "sampling_params": {**GREEDY, "max_new_tokens": 3}})
        out["hidden_states"] = gen({"text": "hi", "return_hidden_states": True,
                                    "sampling_params": {**GREEDY, "max_new_tokens": 3}})

        # -- embeddings (pooled hidden state: a torch tensor on the IPC path) ---------
        out["encode"] = c.ok("/encode", {"text": PROMPT, "return_pooled_hidden_states": True},
                             headers=traceparent("encode"))
        out["encode_batch"] = c.ok("/encode", {"input_ids": [[256, 65], [256, 66, 67]]})
        out["v1_embeddings"] = c.ok("/v1/embeddings", {"model": served, "input": ["one", "two"]})
        out["v1_embeddings_b64"] = c.ok("/v1/embeddings", {"model": served, "input": "one",
                                                           "encoding_format": "base64"})

        # -- OpenAI-compatible ----------------------------------------------------------
        out["v1_completions"] = c.ok("/v1/completions", {"model": served, "prompt": PROMPT, "max_tokens": 8,
                                                         "temperature": 0, "logprobs": 2, "ignore_eos": True})
        out["v1_completions_stream"] = list(c.stream("/v1/completions", {
            "model": served, "prompt": [256, 72, 105], "max_tokens": 5, "temperature": 0, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}}))
        chat = {"model": served, "messages": [{"role": "system", "content": "be brief"},
                                              {"role": "user", "content": "Hi there"}],
                "max_tokens": 8, "temperature": 0, "logprobs": True, "top_logprobs": 2}
        out["v1_chat"] = c.ok("/v1/chat/completions", chat)
        out["v1_chat_stream"] = list(c.stream("/v1/chat/completions", {**chat, "stream": True}))
        out["v1_models"] = c.get("/v1/models").json()

        # -- weight update: outputs change, and come back when the weights do ----------
        state = load_file(f"{server.info['model_path']}/model.safetensors")
        head = state["lm_head.weight"]
        changed = 0.5 * head + 0.5 * torch.roll(head, 1, 0)
        out["update_weights"] = c.ok("/update_weights_from_tensor", {
            "serialized_named_tensors": [b64(serialize_named_tensors({"lm_head.weight": changed}))],
            "weight_version": "perturbed"})
        out["after_update"] = gen({"text": PROMPT, "sampling_params": {**GREEDY, "max_new_tokens": 24}})
        out["restore_weights"] = c.ok("/update_weights_from_tensor", {
            "serialized_named_tensors": [b64(serialize_named_tensors({"lm_head.weight": head}))],
            "weight_version": "restored"})
        out["after_restore"] = gen({"text": PROMPT, "sampling_params": {**GREEDY, "max_new_tokens": 24}})
        out["flush_cache"] = c.ok("/flush_cache")

        # -- abort mid-stream -----------------------------------------------------------
        chunks = []
        for event in c.stream("/generate", {"text": "abort me", "rid": "abort-me", "stream": True,
                                            "sampling_params": {**GREEDY, "max_new_tokens": 480}}):
            chunks.append(event)
            if len(chunks) == 3:
                assert c.ok("/abort_request", {"rid": "abort-me"}) == {}
        last = chunks[-1]["meta_info"]
        out["abort"] = {"finish_type": last["finish_reason"]["type"], "chunks": len(chunks),
                        "completion_tokens": last["completion_tokens"]}

        # -- continuous batching: concurrent streams == each request alone, bit for bit --
        prompts = [f"{i}: {PROMPT[:i + 3]}" for i in range(6)]

        def body(i: int) -> dict:
            # Every other request without logprobs, and each rank gets both kinds: batches mix None and lists.
            return {"text": prompts[i], "stream": True, "return_logprob": i % 2 == 0, "top_logprobs_num": 2,
                    "routed_dp_rank": (i // 2) % server.dp_size, "sampling_params": {**GREEDY, "max_new_tokens": 48}}

        def alone(i: int) -> dict:
            client = Client(server.url)
            try:
                return list(client.stream("/generate", body(i)))[-1]
            finally:
                client.close()

        solo = [alone(i) for i in range(len(prompts))]
        with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
            together = list(pool.map(alone, range(len(prompts))))
        out["batching"] = {"solo": solo, "together": together}

        # -- bad requests: 4xx naming the field; nothing reaches the controller ---------
        before = count_records(server, "controller")
        out["bad_requests"] = bad_requests(c, served, state)
        time.sleep(0.3)
        out["bad_requests_reached_controller"] = count_records(server, "controller") - before
        out["health_after_bad"] = c.get("/health").status_code
        out["generate_after_bad"] = gen({"text": PROMPT, "sampling_params": {**GREEDY, "max_new_tokens": 24}})
        if server.dp_size > 1:
            out["routed"] = [gen({"text": "r", "routed_dp_rank": r, "sampling_params": {**GREEDY, "max_new_tokens": 2}})
                             ["meta_info"]["dp_rank"] for r in range(server.dp_size)]
    finally:
        c.close()
    return out


def bad_requests(c: Client, served: str, state: dict) -> list[dict]:
    head = state["lm_head.weight"]
    cases: list[tuple[str, str, Any]] = [
        ("/generate", "sampling wrong type", {"text": "hi", "sampling_params": {"temperature": "hot"}}),
        ("/generate", "wrong type bool", {"text": "hi", "stream": "yes"}),
        ("/generate", "unknown field", {"text": "hi", "bogus": 1}),
        ("/generate", "unknown sampling field", {"text": "hi", "sampling_params": {"temprature": 0}}),
        ("/generate", "token out of range", {"input_ids": [1, 99999]}),
        ("/generate", "bad top_p", {"text": "hi", "sampling_params": {"top_p": 0}}),
        ("/generate", "too long", {"text": "hi", "sampling_params": {"max_new_tokens": 100000}}),
        ("/generate", "both inputs", {"text": "hi", "input_ids": [1]}),
        ("/generate", "not json", b"{not json"),
        ("/update_weights_from_tensor", "invalid base64", {"serialized_named_tensors": ["@@@"]}),
        ("/update_weights_from_tensor", "not safetensors", {"serialized_named_tensors": [b64(b"hello")]}),
        ("/update_weights_from_tensor", "unknown tensor",
         {"serialized_named_tensors": [b64(serialize_named_tensors({"nope": head}))]}),
        ("/update_weights_from_tensor", "wrong shape",
         {"serialized_named_tensors": [b64(serialize_named_tensors({"lm_head.weight": head[:3]}))]}),
        ("/update_weights_from_tensor", "weights wrong type", {"serialized_named_tensors": 5}),
        ("/update_weights_from_tensor", "wrong flag type",
         {"serialized_named_tensors": [b64(serialize_named_tensors({"lm_head.weight": head}))], "flush_cache": "no"}),
        ("/update_weights_from_tensor", "unsupported load_format",
         {"serialized_named_tensors": [b64(serialize_named_tensors({"lm_head.weight": head}))],
          "load_format": "pickle"}),
        ("/v1/completions", "unknown model", {"model": "nope", "prompt": "x"}),
        ("/v1/completions", "completions wrong type", {"model": served, "prompt": "x", "max_tokens": "many"}),
        ("/v1/chat/completions", "no messages", {"model": served, "messages": []}),
        ("/v1/chat/completions", "bad role", {"model": served, "messages": [{"role": "robot", "content": "x"}]}),
        ("/v1/embeddings", "embeddings wrong type", {"model": served, "input": 5}),
        ("/encode", "empty", {"input_ids": []}),
        ("/abort_request", "nothing to abort", {}),
    ]
    results = []
    for path, name, body in cases:
        r = c.post(path, raw=body) if isinstance(body, bytes) else c.post(path, body)
        try:
            payload = r.json()
        except ValueError:
            payload = {"raw": r.text}
        results.append({"path": path, "case": name, "status": r.status_code, "param": payload.get("param"),
                        "message": payload.get("message")})
    return results
