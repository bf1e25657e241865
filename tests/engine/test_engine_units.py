"""Engine pieces without processes: tokenizer, checkpoint, model, sampling, request validation,
detokenization, tap, time stats on the wire. Fast (seconds)."""

from __future__ import annotations

import base64
import json
import os
import pickletools
import stat
from array import array
from pathlib import Path

import msgspec
import pytest
import torch

from reference_impl import codec, pickle_wrapper
from reference_impl.engine import checkpoint, protocol
from reference_impl.engine.config import EngineConfig, IpcNames, resolve_device
from reference_impl.engine.detokenizer import DecodeState, text_delta
from reference_impl.engine.model import KVCache, parameter_shapes
from reference_impl.engine.sampling import sample
from reference_impl.engine.tap import Tap, find_wrappers, read_tap
from reference_impl.engine.tokenizer import ByteTokenizer
from reference_impl.engine.tracing import PackedReqTimeStats, ReqTimeStats, TimeStatsBatch, Tracing
from reference_impl.engine.weights import serialize_named_tensors
from reference_impl.io_struct import (
    BatchTokenIDOutput,
    FlushCacheReqOutput,
    PickleWrapper,
    SamplingParams,
    TokenizedGenerateReqInput,
)

TOK = ByteTokenizer()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return checkpoint.write_tiny_checkpoint(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def model(model_dir: Path):
    torch.set_num_threads(1)
    return checkpoint.load_model(model_dir)


# -- tokenizer ---------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["", "hello", "héllo wörld ✓", "<|user|> is just text", "\x00\n"])
def test_tokenizer_round_trips_text(text):
    ids = TOK.encode(text)
    assert ids[0] == TOK.bos_token_id and all(t < 256 for t in ids[1:])
    assert TOK.decode(ids) == text


def test_chat_template_uses_special_tokens():
    ids = TOK.apply_chat_template([{"role": "user", "content": "hi"}])
    assert ids == [TOK.bos_token_id, TOK.special_ids["<|user|>"], 104, 105, TOK.end_token_id,
                   TOK.special_ids["<|assistant|>"]]
    assert TOK.decode(ids, skip_special_tokens=False) == "<s><|user|>hi<|end|><|assistant|>"


def test_incremental_detokenization_waits_for_whole_characters():
    state = DecodeState(TOK.incremental_decoder())
    euro = list("€".encode())  # three bytes, three tokens
    assert text_delta(state, TOK, [65, euro[0]], None, True, False) == "A"
    assert text_delta(state, TOK, [euro[1]], None, True, False) == ""
    assert text_delta(state, TOK, [euro[2], 66], None, True, False) == "€B"
    assert text_delta(state, TOK, [67, TOK.eos_token_id], {"type": "stop", "matched": TOK.eos_token_id},
                      True, False) == "C"
    assert state.text == "A€BC"


def test_detokenizer_trims_stop_strings_and_tokens():
    state = DecodeState(TOK.incremental_decoder())
    assert text_delta(state, TOK, list(b"abcSTOPxy"), {"type": "stop", "matched": "STOP"}, True, False) == "abc"
    state = DecodeState(TOK.incremental_decoder())
    assert text_delta(state, TOK, list(b"abcSTOP"), {"type": "stop", "matched": "STOP"}, True, True) == "abcSTOP"
    state = DecodeState(TOK.incremental_decoder())
    assert text_delta(state, TOK, [97, 98, 120], {"type": "stop", "matched": 120}, True, False) == "ab"
    state = DecodeState(TOK.incremental_decoder())
    assert text_delta(state, TOK, [97, 0xFF], {"type": "length", "length": 2}, True, False) == "a\ufffd"


# -- checkpoint ----------------------------------------------------------------------------
def test_tiny_checkpoint_is_deterministic_and_small(tmp_path, model_dir):
    again = checkpoint.write_tiny_checkpoint(tmp_path / "again")
    weights = checkpoint.WEIGHTS_FILE
    assert checkpoint.file_sha256(again / weights) == checkpoint.file_sha256(model_dir / weights)
    assert (model_dir / weights).stat().st_size < 4 << 20
    config = json.loads((model_dir / "config.json").read_text())
    assert config["model_type"] == "llama" and config["architectures"] == ["LlamaForCausalLM"]


def test_default_checkpoint_is_written_once_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IPC_ENGINE_CACHE", str(tmp_path))
    first = checkpoint.ensure_default_checkpoint()
    stamp = (first / checkpoint.WEIGHTS_FILE).stat().st_mtime_ns
    assert checkpoint.ensure_default_checkpoint() == first == tmp_path / checkpoint.TINY_MODEL_NAME
    assert (first / checkpoint.WEIGHTS_FILE).stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [checkpoint.TINY_MODEL_NAME]


def test_parameters_use_hugging_face_names(model):
    names = set(parameter_shapes(model.config))
    assert {"model.embed_tokens.weight", "model.layers.1.self_attn.q_proj.weight",
            "model.layers.0.mlp.down_proj.weight", "model.norm.weight", "lm_head.weight"} <= names
    assert parameter_shapes(model.config) == model.parameter_shapes()


# -- model ---------------------------------------------------------------------------------
def _greedy(model, ids: list[int], n: int, slot: int = 0) -> list[int]:
    cache = KVCache(model.config, 4, 128, torch.device("cpu"), torch.float32)
    hidden = model(torch.tensor([ids]), torch.arange(len(ids))[None], torch.tensor([slot]), cache)
    out = [int(model.logits(hidden[0, -1]).argmax())]
    for pos in range(len(ids), len(ids) + n - 1):
        hidden = model(torch.tensor([[out[-1]]]), torch.tensor([[pos]]), torch.tensor([slot]), cache)
        out.append(int(model.logits(hidden[0, -1]).argmax()))
    return out


def test_kv_cache_decoding_matches_full_recompute(model):
    prompt = TOK.encode("The quick brown fox")
    out = _greedy(model, prompt, 12)
    full = prompt + out[:-1]
    cache = KVCache(model.config, 4, 128, torch.device("cpu"), torch.float32)
    hidden = model(torch.tensor([full]), torch.arange(len(full))[None], torch.tensor([1]), cache)
    assert model.logits(hidden[0, len(prompt) - 1:]).argmax(-1).tolist() == out


def test_fixed_shape_decode_rows_are_independent_bit_for_bit(model):
    """What makes continuous batching exact: a row's logits do not depend on the other rows."""
    cache = KVCache(model.config, 8, 128, torch.device("cpu"), torch.float32)
    prompts = [TOK.encode(p) for p in ("alpha", "beta gamma", "delta")]
    for slot, p in enumerate(prompts):
        model(torch.tensor([p]), torch.arange(len(p))[None], torch.tensor([slot]), cache)

    def step(rows: dict[int, int]) -> torch.Tensor:  # row -> slot; other rows idle on the scratch slot
        ids = torch.full((8, 1), TOK.pad_token_id)
        pos = torch.zeros((8, 1), dtype=torch.long)
        slots = torch.full((8,), cache.scratch_slot)
        for row, slot in rows.items():
            ids[row, 0], pos[row, 0], slots[row] = 65, len(prompts[slot]), slot
        return model.logits(model(ids, pos, slots, cache)[:, 0])

    alone = step({0: 0})[0]
    assert torch.equal(step({5: 0, 0: 1, 2: 2})[5], alone)


def test_sampling():
    logits = torch.tensor([0.0, 3.0, 1.0, 2.9])
    assert sample(logits, SamplingParams(temperature=1.0, top_k=1), None) == 1
    seeded = SamplingParams(temperature=1.0, sampling_seed=7)
    draws = [sample(logits, seeded, torch.Generator().manual_seed(7)) for _ in range(3)]
    assert len(set(draws)) == 1
    assert sample(logits, SamplingParams(temperature=1.0, top_p=0.01), torch.Generator().manual_seed(0)) == 1
    assert sample(logits, SamplingParams(temperature=0.5, top_k=1, logit_bias={"2": 10.0}), None) == 2


# -- request validation --------------------------------------------------------------------
@pytest.mark.parametrize("raw, param", [
    ({"temperature": "0"}, "sampling_params.temperature"),
    ({"temperature": -1}, "sampling_params.temperature"),
    ({"top_k": 0}, "sampling_params.top_k"),
    ({"stop_token_ids": [999]}, "sampling_params.stop_token_ids"),
    ({"regex": "a+"}, "sampling_params.regex"),
    ({"nope": 1}, "sampling_params.nope"),
    ({"logit_bias": {"x": 1.0}}, "sampling_params.logit_bias"),
])
def test_sampling_params_errors_name_the_field(raw, param):
    with pytest.raises(protocol.RequestError) as info:
        protocol.sampling_params_from(raw, TOK.vocab_size)
    assert info.value.param == param and param in info.value.message and info.value.status_code == 400


def test_sampling_params_are_normalized_like_upstream():
    p = protocol.sampling_params_from({"temperature": 0, "stop": "END", "top_k": -1}, TOK.vocab_size)
    assert (p.top_k, p.stop_strs, p.stop_str_max_len, p.is_normalized) == (1, ["END"], 3, True)


def test_update_weights_validation(model):
    shapes = model.parameter_shapes()
    good = serialize_named_tensors({"model.norm.weight": torch.ones(64)})
    obj = protocol.update_weights_request(
        json.dumps({"serialized_named_tensors": [base64.b64encode(good).decode()]}).encode(), shapes)
    assert obj.serialized_named_tensors == [good]
    for body, param in [({"serialized_named_tensors": ["%%"]}, "serialized_named_tensors"),
                        ({"serialized_named_tensors": []}, "serialized_named_tensors"),
                        ({"serialized_named_tensors": [base64.b64encode(good).decode()], "selector": "x"},
                         "selector")]:
        with pytest.raises(protocol.RequestError) as info:
            protocol.update_weights_request(json.dumps(body).encode(), shapes)
        assert info.value.param == param


def test_generate_request_validation():
    req = protocol.parse_body(protocol.GenerateRequest, b'{"text": ["a", "b"], "rid": ["x", "y"]}')
    specs, is_batch = protocol.generate_specs(req, TOK, TOK.vocab_size, 512)
    assert is_batch and [s.rid for s in specs] == ["x", "y"]
    for body, param in [(b'{"input_ids": [[1], [2, 999]]}', "input_ids[1][1]"),
                        (b'{"text": ["a"], "rid": ["x", "y"]}', "rid"),
                        (b'{"text": "a", "logprob_start_len": -5}', "logprob_start_len")]:
        req = protocol.parse_body(protocol.GenerateRequest, body)
        with pytest.raises(protocol.RequestError) as info:
            protocol.generate_specs(req, TOK, TOK.vocab_size, 512)
        assert info.value.param == param


# -- wire details --------------------------------------------------------------------------
def test_time_stats_ride_in_a_pickle_wrapper_and_keep_the_trace_carrier():
    tracing = Tracing("test", None)
    header = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    stats = ReqTimeStats("r1", trace_carrier=dict(header), external_trace_header=header).mark("created")
    req = TokenizedGenerateReqInput(
        rid="r1", input_text="hi", input_ids=array("q", [1, 2]), input_embeds=None, mm_inputs=None,
        token_type_ids=None, sampling_params=SamplingParams(), return_logprob=False, logprob_start_len=-1,
        top_logprobs_num=0, token_ids_logprob=None, stream=False, time_stats=stats)
    raw = codec.decode(codec.encode(req, "msgpack"), "msgpack", allow_pickle=True, unwrap_wrappers=False)
    assert isinstance(raw.time_stats, PickleWrapper) and find_wrappers(raw) == [".time_stats"]
    data = bytes(raw.time_stats.data)
    opened = codec.unwrap(raw, allow_pickle=True)
    assert opened.time_stats == stats and type(opened.time_stats) is ReqTimeStats and find_wrappers(opened) == []
    # One call with one bytes argument, which the receive path (after the allow-list admitted its
    # class once, above) opens without the unpickler.
    assert len(list(pickletools.genops(data))) < 16
    assert pickle_wrapper.call_of_admitted(data) == stats
    with pytest.raises(codec.WireError):  # an untrusted receiver never unpickles it
        codec.decode(codec.encode(req, "msgpack"), "msgpack")
    assert tracing.carrier(None, header) == header


def _step_output(stats: list) -> BatchTokenIDOutput:
    n = len(stats)
    return BatchTokenIDOutput(
        rids=[f"r{i}" for i in range(n)], http_worker_ipcs=None, finished_reasons=[None] * n,
        decoded_texts=[""] * n, decode_ids=[array("q", [i]) for i in range(n)], read_offsets=[0] * n,
        output_ids=None, skip_special_tokens=[True] * n, spaces_between_special_tokens=[True] * n,
        no_stop_trim=[False] * n, prompt_tokens=[1] * n, reasoning_tokens=[0] * n, completion_tokens=[1] * n,
        cached_tokens=[0] * n, input_token_logprobs_val=None, input_token_logprobs_idx=None,
        output_token_logprobs_val=None, output_token_logprobs_idx=None, input_top_logprobs_val=None,
        input_top_logprobs_idx=None, output_top_logprobs_val=None, output_top_logprobs_idx=None,
        input_token_ids_logprobs_val=None, input_token_ids_logprobs_idx=None,
        output_token_ids_logprobs_val=None, output_token_ids_logprobs_idx=None, output_token_entropy_val=None,
        output_token_sampling_mask=None, output_hidden_states=None, routed_experts=None, indexer_topk=None,
        placeholder_tokens_idx=None, placeholder_tokens_val=None, retraction_counts=[0] * n, dp_ranks=[0] * n,
        time_stats=TimeStatsBatch(stats))


@pytest.mark.parametrize("transport", ["msgpack", "pickle"])
def test_a_batch_of_time_stats_travels_as_one_blob_and_opens_to_typed_stats(transport):
    stats = [ReqTimeStats(f"r{i}", {"created": 1.5 + i}, {"traceparent": f"00-{i:032x}-{i:016x}-01"})
             for i in range(40)] + [None]
    out = _step_output(stats)
    data = codec.encode(out, transport)
    assert out.time_stats == stats and type(out.time_stats) is TimeStatsBatch  # the sender's object kept
    got = codec.decode(data, transport, allow_pickle=True)
    assert type(got.time_stats) is TimeStatsBatch and got.time_stats == stats
    assert all(type(s) is ReqTimeStats for s in got.time_stats[:-1])
    if transport == "msgpack":
        raw = codec.decode(data, "msgpack", allow_pickle=True, unwrap_wrappers=False)
        # One global and one bytes argument: the trusted unwrap's opcode walk stays short.
        assert len(list(pickletools.genops(bytes(raw.time_stats.data)))) < 16
        with pytest.raises(codec.WireError, match="PickleWrapper refused"):
            codec.decode(data, "msgpack")


def test_time_stats_batch_refuses_a_blob_that_is_not_time_stats():
    blob = msgspec.msgpack.encode([["rid", {"created": "not a float"}, {}, None]])
    with pytest.raises(msgspec.ValidationError):
        TimeStatsBatch(blob)
    with pytest.raises(msgspec.ValidationError):
        PackedReqTimeStats(msgspec.msgpack.encode(["rid", {"created": "not a float"}, {}, None]))


def test_tap_records_frames_and_leftovers(tmp_path):
    tap = Tap(str(tmp_path), "p")
    wrapped = PickleWrapper(b"x")
    tap.record("p<-q", "msgpack", [b"abc"], {"a": [wrapped]})
    tap.record("p<-q", "pickle", [memoryview(b"def")], 5)
    tap.close()
    records = read_tap(tmp_path)
    assert [r.frames for r in records] == [[b"abc"], [b"def"]]
    assert records[0].leftover_wrappers == ["['a'][0]"] and records[1].leftover_wrappers == []
    with open(tmp_path / "p.tap", "ab") as f:  # a record cut short by a killed process is ignored
        f.write(b"\x00\x00\x01\x00abc")
    assert len(read_tap(tmp_path)) == 2


def test_ipc_directory_is_private_and_short():
    names = IpcNames.create(2)
    try:
        assert stat.S_IMODE(os.stat(names.ipc_dir).st_mode) == 0o700
        assert all(len(ep) - len("ipc://") < 100 for ep in (names.controller, *names.schedulers))
    finally:
        os.rmdir(names.ipc_dir)


def test_cuda_is_used_only_when_torch_sees_it():
    if torch.cuda.is_available():
        assert resolve_device("auto") == "cuda"
    else:
        assert resolve_device("auto") == "cpu"
        with pytest.raises(ValueError, match="cuda"):
            resolve_device("cuda")
    with pytest.raises(ValueError):
        resolve_device("tpu")


def test_server_arguments():
    from reference_impl.server import build_parser, config_from_args

    cfg = config_from_args(build_parser().parse_args(
        ["--dp-size", "2", "--ipc-transport", "pickle", "--device", "cpu", "--debug-skip-unwrap", "controller"]))
    assert (cfg.dp_size, cfg.transport, cfg.device, cfg.debug_skip_unwrap) == (2, "pickle", "cpu", ("controller",))
    assert EngineConfig(transport="msgpack", device="cpu", model_path="/x").resolved().transport == "msgpack"
    with pytest.raises(ValueError):
        EngineConfig(transport="json", model_path="/x").resolved()


def test_wire_checks_report_bad_records():
    """The e2e checks themselves: undecodable bytes, a non-struct message, a leftover wrapper."""
    from reference_impl.engine.tap import TapRecord
    from reference_tools.e2e.checks import leftover_wrapper_failures, wire_failures

    def rec(frames: list, delivered: str = "int", leftovers: tuple = ()) -> TapRecord:
        return TapRecord(process="p", link="p<-q", transport="msgpack", frames=frames, delivered_type=delivered,
                         leftover_wrappers=list(leftovers), time=0.0)

    good = codec.encode(FlushCacheReqOutput(rid="r", success=True, message="ok"), "msgpack")
    assert wire_failures([rec([good], "FlushCacheReqOutput")]) == []
    failures = wire_failures([rec([b"\xc1"]), rec([codec.encode(5, "msgpack")])])
    assert "does not decode" in failures[0] and "not a struct of the catalogue" in failures[1]
    assert leftover_wrapper_failures([rec([good], leftovers=(".time_stats",))]) == [
        "p (p<-q, msgpack): int handed on with a PickleWrapper at .time_stats"]


def test_skip_forward_tokens_are_printable_bytes_and_reproducible():
    from reference_impl.engine.scheduler import Req, skipped_forward_token

    req = Req(rid="r", input_ids=[1, 2, 3], params=SamplingParams(), stream=True, return_logprob=False,
              logprob_start_len=-1, top_logprobs_num=0, token_ids_logprob=None, return_hidden_states=False,
              time_stats=None)
    tokens = []
    for _ in range(50):
        req.output_ids.append(skipped_forward_token(req))
        tokens.append(req.output_ids[-1])
    assert all(32 <= t < 127 for t in tokens) and len(set(tokens)) > 10
    assert TOK.decode(tokens).isprintable()
