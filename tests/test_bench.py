"""Benchmarks: smoke runs of `ipc-conformance bench codec|serve` on tiny sizes (well-formed
JSON, tables, PNG), the statistics helpers, and the codec fast paths the benchmark drove -
each must give exactly the bytes / values / errors of the plain path. No timing assertions."""

from __future__ import annotations

import array
import http.server
import json
import math
import os
import random
import shutil
import threading
import time

import msgspec
import numpy as np
import pytest
import torch

from conformance.cli import main as cli_main
from reference_impl import _codec_catalogue, _codec_fast, _codec_limits, codec, ext
from reference_impl import io_struct as S  # noqa: N812 - S for the structs module reads like the test_codec tests it mirrors
from reference_impl.errors import WireError
from reference_tools.bench import codec_bench as cb
from reference_tools.bench import serve_bench as sb
from reference_tools.bench.cli import parse_size
from reference_tools.bench.timing import Stat, bootstrap_ratio, interleaved, paired_ratios, percentile


# -- statistics -----------------------------------------------------------------------------
def test_stat_median_and_quartiles():
    s = Stat.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.median, s.p25, s.p75, s.min, s.n) == (3.0, 2.0, 4.0, 1.0, 5)
    assert Stat.of([]).n == 0 and math.isnan(Stat.of([]).median)
    assert percentile([1, 2, 3, 4], 50) == 2.5


def test_paired_ratios_and_interleaving_run_every_case_every_rep():
    calls = {"a": 0, "b": 0}

    def case(name):
        def fn():
            calls[name] += 1
        return fn

    samples = interleaved({"a": case("a"), "b": case("b")}, reps=4, batches={"a": 3, "b": 2}, clock="wall")
    assert [len(v) for v in samples.values()] == [4, 4]
    assert calls == {"a": 4 * 3, "b": 4 * 2}
    assert paired_ratios([2.0, 4.0], [1.0, 2.0]) == [2.0, 2.0]


@pytest.mark.parametrize("text, expected", [("64MiB", 64 << 20), ("1 KiB", 1024), ("1048576", 1 << 20),
                                            ("2g", 2 << 30)])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


def test_targets_are_statements_with_the_shortfall():
    stat = {"median": 1.6, "p25": 1.5, "p75": 1.7}
    missed = cb._target("x", stat, 2.0, higher=True)
    assert not missed["met"] and "1.25x short" in missed["note"]
    assert cb._target("y", {"median": 1.2, "p25": 1.1, "p75": 1.3}, 1.5, higher=False)["met"]


# -- bench codec ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def codec_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    report = cb.run(impl="reference", tiny=True, reps=3, min_time=0.0005)
    return report, out


def test_codec_report_shape(codec_run):
    report, _ = codec_run
    assert report["kind"] == "codec" and report["meta"]["cpus"]
    names = [p["payload"] for p in report["payloads"]]
    assert any("BatchTokenIDOutput" in n for n in names) and any("tensor" in n for n in names)
    for p in report["payloads"]:
        rows = p["transports"]
        assert {"pickle", "msgpack"} <= set(rows)
        for name, row in rows.items():
            assert row["wire_bytes"] > 0
            if name != "memcpy":
                for op in ("encode", "decode", "roundtrip"):
                    assert row[op]["n"] >= 1 and row[op]["median"] > 0
        assert p["ratios"]["msgpack"]["vs_pickle"]["median"] > 0
        if p["group"] == "tensor":
            assert {"msgpack+oob", "memcpy"} <= set(rows)
            assert p["ratios"]["msgpack+oob"]["memcpys"]["median"] > 0
    assert any("of its encode bound" in t["target"] for t in report["targets"])
    assert any("engine" in t["target"] and "not slower than pickle" in t["target"] for t in report["targets"])
    batch = next(p for p in report["payloads"] if p["group"] == "batch")
    ci = batch["ratios"]["msgpack"]["vs_pickle_ci"]
    # A measured ratio: its shape is tested here, its value is the benchmark's to report.
    assert ci["lo"] <= ci["center"] <= ci["hi"] and batch["ratios"]["msgpack"]["encode_bound"] > 0


def test_codec_report_renders_and_serializes(codec_run, tmp_path):
    report, _ = codec_run
    text = cb.render_text(report)
    assert "round trip" in text and "vs pickle" in text and "targets:" in text
    md = cb.render_markdown(report)
    assert md.startswith("| payload | transport |")
    path = tmp_path / "r.json"
    cb.write_json(report, str(path))
    again = json.loads(path.read_text())
    assert again["payloads"][0]["payload"] == report["payloads"][0]["payload"]


def test_codec_plot_is_a_png(codec_run, tmp_path):
    pytest.importorskip("matplotlib")
    from reference_tools.bench.plot import plot_codec

    report, _ = codec_run
    path = tmp_path / "codec.png"
    plot_codec(report, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_codec_command(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert cli_main(["bench", "codec", "--impl", "reference", "--tiny", "--reps", "3", "--min-time", "0.0005",
                     "--payload", "tensor", "--json", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "tensor float32 1 KiB" in out and "memcpy" in out and "BatchTokenIDOutput" not in out
    assert [p["payload"] for p in json.loads(path.read_text())["payloads"]] == ["tensor float32 1 KiB"]


def test_payloads_build_for_any_class_mapping():
    from reference_tools.bench.payloads import default_payloads

    classes = {name: getattr(S, name) for name in dir(S) if isinstance(getattr(S, name), type)}
    for p in default_payloads(max_tensor_bytes=1 << 20):
        msg = p.build(classes)
        assert codec.decode(codec.encode(msg, "msgpack"), "msgpack", allow_pickle=True) is not None


# -- bench serve ----------------------------------------------------------------------------
def test_serve_settings_presets_and_validation(tmp_path):
    parser = __import__("argparse").ArgumentParser()
    sb.add_arguments(parser)
    cpu = sb.settings_from_args(parser.parse_args([]))
    assert cpu.concurrency == [1, 256] and cpu.device == "cpu"
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="no config.json"):
        sb.settings_from_args(parser.parse_args(["--preset", "gpu", "--model", str(tmp_path / "none")]))
    gpu = parser.parse_args(["--preset", "gpu", "--model", str(tmp_path)])
    s = sb.settings_from_args(gpu)
    assert (s.concurrency[-1], s.num_prompts[-1], s.input_len, s.output_len) == (1024, 4096, 1024, 200)
    with pytest.raises(ValueError, match="--model"):
        sb.settings_from_args(parser.parse_args(["--preset", "gpu"]))
    with pytest.raises(ValueError, match="512-token context"):
        sb.settings_from_args(parser.parse_args(["--input-len", "600"]))
    s = sb.settings_from_args(parser.parse_args(["--concurrency", "2,4"]))
    assert s.num_prompts == [8, 8] and s.max_running_requests is None  # each level's concurrency


def test_serve_summary_metrics():
    results = [sb.RequestResult(ok=True, prompt_len=10, output_len=4, ttft=0.01, latency=0.05, itl=[0.01] * 3),
               sb.RequestResult(ok=False, prompt_len=10, error="boom")]
    m = sb.summarize(results, duration=2.0)
    assert (m["completed"], m["failed"], m["errors"]) == (1, 1, ["boom"])
    assert m["request_throughput"] == 0.5 and m["output_throughput"] == 2.0 and m["input_throughput"] == 5.0
    assert m["ttft_ms"]["median"] == pytest.approx(10.0) and m["itl_ms"]["p99"] == pytest.approx(10.0)


def test_bench_serve_command_both_transports(tmp_path, capsys):
    """Starts two tiny servers (a few seconds each) and drives a handful of requests."""
    path = tmp_path / "serve.json"
    code = cli_main(["bench", "serve", "--concurrency", "2", "--num-prompts", "4", "--input-len", "8",
                     "--output-len", "3", "--rounds", "2", "--warmup", "1", "--json", str(path), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "tiny Llama-style checkpoint" in out and "msgpack/pickle @2" in out
    report = json.loads(path.read_text())
    assert report["ok"] and [lv["concurrency"] for lv in report["levels"]] == [2]
    for lv in report["levels"]:
        assert set(lv["transports"]) == {"pickle", "msgpack"}
        for m in lv["transports"].values():
            assert m["failed"] == 0 and m["completed"] == 2 * lv["num_prompts"]  # pooled over the rounds
            assert m["output_throughput"] > 0 and m["ttft_ms"]["p99"] >= m["ttft_ms"]["median"] > 0
            assert len(m["request_throughput_rounds"]) == 2
            assert {"scheduler_0", "detokenizer", "tokenizer_manager"} <= set(m["cpu_ms_per_request"])
        ci = lv["ratios"]["request_throughput"]
        assert ci["lo"] <= ci["center"] <= ci["hi"] and ci["n"] == 2
        assert ci["verdict"] in ("msgpack faster", "msgpack slower", "not distinguishable")
    # A verdict only where the engine bounded the throughput; either way the bottleneck is named.
    assert "bootstrap interval over 2 rounds" in out or "no transport verdict" in out
    assert "bottleneck" in out and "CPU share: load generator" in out
    for lv in report["levels"]:
        assert lv["bottleneck"] in ("client", "engine", "engine (cores shared)", "engine (latency)", "unclear")
        for m in lv["transports"].values():
            shares = m["shares"]
            assert shares["client"] > 0 and shares["engine"] > 0 and "scheduler_0" in shares["processes"]


def test_bench_serve_without_streaming(tmp_path, capsys):
    """--no-stream: each request gets one JSON answer; tokens are counted from it, no TTFT or ITL."""
    path = tmp_path / "serve.json"
    code = cli_main(["bench", "serve", "--preset", "ipc", "--no-stream", "--transport", "msgpack",
                     "--concurrency", "2", "--num-prompts", "4", "--output-len", "3", "--rounds", "1",
                     "--warmup", "1", "--json", str(path), "--quiet"])
    assert code == 0, capsys.readouterr().out
    (level,) = json.loads(path.read_text())["levels"]
    got = level["transports"]["msgpack"]
    assert got["failed"] == 0 and got["completed"] == 4 and got["output_throughput"] > 0
    assert math.isnan(got["ttft_ms"]["median"]) and got["e2e_ms"]["median"] > 0


def _wrk_level(tmp_path, capsys, mode: str, transport: str) -> tuple[str, dict, dict]:
    """One wrk round of 12 requests at concurrency 4 (ipc preset): the output, the report, the level."""
    path = tmp_path / "serve.json"
    code = cli_main(["bench", "serve", "--preset", "ipc", mode, "--client", "wrk", "--transport", transport,
                     "--concurrency", "4", "--num-prompts", "12", "--output-len", "5", "--rounds", "1",
                     "--warmup", "2", "--json", str(path), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    report = json.loads(path.read_text())
    (level,) = report["levels"]
    got = level["transports"][transport]
    assert level["client"] == "wrk" and got["client"] == "wrk"
    assert got["failed"] == 0 and got["completed"] == 12 and got["output_throughput"] > 0
    return out, report, level


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk (the native load generator) is not installed")
def test_bench_serve_with_wrk_pinned(tmp_path, capsys):
    """The native load generator on its own core: JSON answers counted by wrk's Lua script."""
    out, report, level = _wrk_level(tmp_path, capsys, "--no-stream", "msgpack")
    path = tmp_path / "serve.json"
    got = level["transports"]["msgpack"]
    assert got["e2e_ms"]["median"] > 0 and math.isnan(got["ttft_ms"]["median"])
    assert "TTFT" not in out and "ITL" not in out  # rows wrk cannot measure are left out
    placement = report["meta"]["placement"]
    if len(os.sched_getaffinity(0)) > 1:
        assert placement["pinned"] and "pinned: load generator on core" in out
    # A saved report renders again (bottlenecks decided by the current rules); a bad file: exit 2.
    from reference_tools.bench import serve_render

    assert serve_render.main([str(path), "--format", "markdown"]) == 0
    again = capsys.readouterr().out
    assert "| bottleneck |" in again and "concurrency 4 (json, wrk): bottleneck" in again
    assert serve_render.main([str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk (the native load generator) is not installed")
def test_bench_serve_streams_through_wrk(tmp_path, capsys):
    """Streams through wrk (the presets' choice from concurrency 256): a stream counts when its
    last event holds every token asked for."""
    out, _, level = _wrk_level(tmp_path, capsys, "--stream", "pickle")
    assert level["stream"] and "concurrency 4 (stream, wrk)" in out


def test_wrk_counts_wrong_answers_as_failed():
    """The Lua script's check is real: an answer with fewer tokens than asked for is a failure,
    a right one counts, and nothing listening is an error, not a hang."""
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed")
    import http.server
    import threading

    from reference_tools.bench.wrk_client import lua_script, run_wrk

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b'{"text":"ab","meta_info":{"completion_tokens":2}}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        right = run_wrk(url, [[1, 2]], 2, 2, 6, False, timeout_s=20)
        wrong = run_wrk(url, [[1, 2]], 3, 2, 6, False, timeout_s=20)
    finally:
        server.shutdown()
    assert (right.ok, right.bad, right.error) == (6, 0, "") and right.duration > 0
    assert (wrong.ok, wrong.bad) == (0, 6) and "without 3 tokens" in wrong.error
    with pytest.raises(ValueError, match="terminator"):
        lua_script(["]==]"], 1, 3, "/x")


def test_client_wrk_without_wrk_is_a_clean_error(monkeypatch, capsys):
    monkeypatch.setattr(sb, "find_wrk", lambda: None)
    assert cli_main(["bench", "serve", "--client", "wrk"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ipc-conformance bench serve: error: --client wrk: wrk is not installed"), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    parser = __import__("argparse").ArgumentParser()
    sb.add_arguments(parser)
    s = sb.settings_from_args(parser.parse_args(["--preset", "ipc"]))
    assert sb.client_for(s, stream=False) == "python"  # auto: the fallback when wrk is missing


def test_placement_and_bottleneck_rules():
    from reference_tools.bench import cpu_share as cs

    p = cs.plan_placement(True, [0, 1, 2, 3])
    assert (p.client, p.engine, p.pinned) == ((0,), (1, 2, 3), True) and "cores 1,2,3" in p.note
    assert not cs.plan_placement(True, [5]).pinned and "only core 5" in cs.plan_placement(True, [5]).note
    assert not cs.plan_placement(False, [0, 1]).pinned
    assert cs.bottleneck(0.95, 0.4) == "client"
    assert cs.bottleneck(0.1, 0.9) == "engine"
    assert cs.bottleneck(0.05, 0.3) == "engine (latency)"
    assert cs.bottleneck(0.4, 0.3) == "unclear" and cs.bottleneck(None, 0.9) == "unclear"
    # The engine's cores full while other processes hold part of them: still the engine's side.
    assert cs.bottleneck(0.3, 0.36, 0.98) == "engine (cores shared)" and cs.bottleneck(0.3, 0.36, 0.5) == "unclear"
    assert cs.level_bottleneck([{"client_of_its_cores": 0.1, "engine_of_its_cores": 0.9, "engine_cores_busy": 1.0},
                                {"client_of_its_cores": 0.1, "engine_of_its_cores": 0.7}]) == "engine"
    assert cs.engine_bound("engine (latency)") and not cs.engine_bound("client")
    now = cs.core_times()
    assert now and all(total >= busy for busy, total in now.values())
    assert cs.busy_share(now, now, list(now)) is None  # no time passed
    assert cs.process_cpu_seconds(os.getpid()) > 0


def test_bootstrap_verdicts_and_rounds_needed():
    faster = bootstrap_ratio([1.2, 1.25, 1.18, 1.22, 1.21])
    assert faster.verdict == "msgpack faster" and 1.0 < faster.lo <= faster.center <= faster.hi
    assert bootstrap_ratio([0.8, 0.82, 0.79, 0.81]).verdict == "msgpack slower"
    # Latencies: lower is faster.
    assert bootstrap_ratio([0.8, 0.82, 0.79, 0.81], higher_is_faster=False).verdict == "msgpack faster"
    wide = bootstrap_ratio([0.9, 1.2, 1.0, 1.15])
    assert wide.verdict == "not distinguishable" and wide.lo < 1.0 < wide.hi
    assert wide.rounds_needed > wide.n
    assert bootstrap_ratio([1.1]).verdict.startswith("not distinguishable")


def test_ipc_preset_serves_without_the_forward_pass():
    parser = __import__("argparse").ArgumentParser()
    sb.add_arguments(parser)
    s = sb.settings_from_args(parser.parse_args(["--preset", "ipc"]))
    assert s.skip_forward and s.concurrency == [1, 256, 1024] and len(s.num_prompts) == 3
    assert s.streams == [False, True] and s.pin and s.client == "auto" and s.json_prompts_factor > 1
    only = sb.settings_from_args(parser.parse_args(["--preset", "ipc", "--no-stream", "--num-prompts", "2,2,2"]))
    assert only.streams == [False] and only.json_prompts_factor == 1  # counts as given
    assert sb.settings_from_args(parser.parse_args(["--preset", "ipc", "--stream", "--no-pin"])).streams == [True]
    assert sb.client_for(s, stream=True) == "python"
    assert sb.client_for(s, stream=True, concurrency=1024) == ("wrk" if sb.find_wrk() else "python")
    server_cmd = sb.Server.__init__.__code__.co_consts  # the flag is passed on to every server
    assert "--skip-forward" in server_cmd


# -- codec fast paths: same bytes, same values, same errors ----------------------------------
def _plain_encode(obj):
    """The per-element path: every array / tensor through ext.enc_hook, opaque fields wrapped."""
    return msgspec.msgpack.Encoder(enc_hook=ext.enc_hook).encode(codec.wrap_fields(obj))


def _plain_decode(data):
    return _codec_catalogue.catalogue.decoder.decode(data)


def _batch(decode_ids, output_ids=None, n=None):
    n = len(decode_ids) if n is None else n
    return S.BatchTokenIDOutput(
        rids=[f"r{i}" for i in range(n)], finished_reasons=[None] * n, decoded_texts=["x"] * n,
        decode_ids=decode_ids, read_offsets=[0] * n, output_ids=output_ids, skip_special_tokens=[True] * n,
        spaces_between_special_tokens=[True] * n, no_stop_trim=[False] * n, prompt_tokens=[1] * n,
        reasoning_tokens=[0] * n, completion_tokens=[1] * n, cached_tokens=[0] * n,
        input_token_logprobs_val=None, input_token_logprobs_idx=None, output_token_logprobs_val=None,
        output_token_logprobs_idx=None, input_top_logprobs_val=None, input_top_logprobs_idx=None,
        output_top_logprobs_val=None, output_top_logprobs_idx=None, input_token_ids_logprobs_val=None,
        input_token_ids_logprobs_idx=None, output_token_ids_logprobs_val=None, output_token_ids_logprobs_idx=None,
        output_token_entropy_val=None, output_token_sampling_mask=None, output_hidden_states=None,
        routed_experts=None, indexer_topk=None, placeholder_tokens_idx=None, placeholder_tokens_val=None)


def _arrays(typecode, count, rnd, max_len=40):
    out = []
    for _ in range(count):
        n = rnd.choice([0, 1, 2, 3, 4, 7, 8, 16, 31, max_len])
        if typecode in "fd":
            out.append(array.array(typecode, [rnd.random() for _ in range(n)]))
        elif typecode in "uw":
            out.append(array.array(typecode, "abc" * n))
        else:
            out.append(array.array(typecode, [rnd.randint(0, 100) for _ in range(n)]))
    return out


@pytest.mark.parametrize("typecode", [tc for tc in array.typecodes])
@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 64, 300])
def test_batched_array_lists_encode_and_decode_like_the_plain_path(typecode, count):
    rnd = random.Random(count)
    msg = _batch(_arrays(typecode, count, rnd), output_ids=_arrays(typecode, count, rnd))
    data = codec.encode(msg, "msgpack")
    assert data == _plain_encode(msg)
    got = codec.decode(data, "msgpack")
    want = _plain_decode(data)
    assert type(got) is type(want) is S.BatchTokenIDOutput
    assert got == want
    assert all(type(a) is array.array and a.typecode == typecode for a in got.decode_ids)


def test_long_array_lists_use_the_large_ext_headers():
    ids = [array.array("q", range(n)) for n in (0, 1, 2, 31, 32, 33, 8190, 8191, 9000)] * 2
    msg = _batch(ids)
    data = codec.encode(msg, "msgpack")
    assert data == _plain_encode(msg) and codec.decode(data, "msgpack") == _plain_decode(data)


@pytest.mark.parametrize("values", [
    "mixed typecodes", "subclass", "not arrays", "none inside",
])
def test_unusual_array_lists_take_the_plain_path(values):
    class Sub(array.array):
        pass

    base = [array.array("q", [i]) for i in range(12)]
    if values == "mixed typecodes":
        base[3] = array.array("i", [3])
    elif values == "subclass":
        base[3] = Sub("q", [3])
    elif values == "not arrays":
        base[3] = [3]
    else:
        base[3] = None
    msg = _batch(base)
    try:
        plain = _plain_encode(msg)
    except Exception:  # noqa: BLE001 - the reference must refuse it too, naming the field
        with pytest.raises(WireError, match="decode_ids"):
            codec.encode(msg, "msgpack")
        return
    assert codec.encode(msg, "msgpack") == plain


def _with_ext(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) == 1
    return data.replace(old, new)


@pytest.mark.parametrize("change", ["code", "metadata", "length", "typecode"])
@pytest.mark.parametrize("rows, width", [(40, 2), (400, 40)], ids=["short arrays", "long arrays"])
def test_odd_array_ext_in_a_large_batch_decodes_like_the_plain_path(change, rows, width):
    # Short and long arrays: the fast decoder checks their headers in two different ways.
    ids = [array.array("q", range(i, i + width)) for i in range(rows)]
    odd = array.array("q", range(123456789, 123456789 + width))
    ids[5] = odd
    data = codec.encode(_batch(ids), "msgpack")
    assert len(data) >= _codec_limits.FAST_DECODE_MIN  # the fast decoder sees it first
    payload = ext.buffer_header("q") + odd.tobytes()
    marker = ext.ext_header(ext.EXT_ARRAY, len(payload)) + payload
    if change == "code":  # an ext code the reference does not know: stays an Ext, fails validation
        bad = _with_ext(data, marker, ext.ext_header(9, len(payload)) + payload)
    elif change == "metadata":  # the typecode as str8 instead of fixstr: still a valid array
        meta = b"\xd9\x01q"
        body = len(meta).to_bytes(4, "big") + meta + payload[6:]
        bad = _with_ext(data, marker, ext.ext_header(ext.EXT_ARRAY, len(body)) + body)
    elif change == "length":  # not a whole number of int64s
        body = payload[:-1]
        bad = _with_ext(data, marker, ext.ext_header(ext.EXT_ARRAY, len(body)) + body)
    else:  # typecode 'i': the bytes reinterpreted as int32s
        body = ext.buffer_header("i") + payload[6:]
        bad = _with_ext(data, marker, ext.ext_header(ext.EXT_ARRAY, len(body)) + body)
    try:
        want = ("ok", _plain_path(bad))
    except WireError as exc:
        want = ("error", str(exc))
    try:
        got = ("ok", codec.decode(bad, "msgpack"))
    except WireError as exc:
        got = ("error", str(exc))
    assert got == want


def _plain_path(data):
    """codec.decode with the fast decoder switched off."""
    saved = _codec_catalogue.catalogue.fast
    _codec_catalogue.catalogue.fast = ()
    try:
        return codec.decode(data, "msgpack")
    finally:
        _codec_catalogue.catalogue.fast = saved


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.uint8,
                                   torch.bool, torch.complex64, torch.float8_e4m3fn])
@pytest.mark.parametrize("shape", [(1 << 16,), (300, 1024), (3, 5, 7000)])
def test_large_tensors_are_spliced_with_identical_bytes(dtype, shape):
    gen = torch.Generator().manual_seed(1)
    t = (torch.randn(*shape, generator=gen) * 5).to(dtype) if dtype is not torch.complex64 else \
        torch.randn(*shape, dtype=dtype, generator=gen)
    msg = S.BatchEmbeddingOutput(rids=["a", "b"], finished_reasons=[None, None], embeddings=[0.0, 1.0],
                                 prompt_tokens=[1, 2], cached_tokens=[0, 0], placeholder_tokens_idx=None,
                                 placeholder_tokens_val=None, pooled_hidden_states=[t, t[:1].clone()])
    data = codec.encode(msg, "msgpack")
    assert data == _plain_encode(msg)
    back = codec.decode(data, "msgpack")
    assert back.pooled_hidden_states[0].dtype == dtype and back.pooled_hidden_states[0].shape == t.shape
    assert back.pooled_hidden_states[0].view(torch.uint8).equal(t.contiguous().view(torch.uint8))


def test_large_ndarray_and_non_contiguous_tensor_are_spliced_with_identical_bytes():
    arr = np.arange(1 << 17, dtype=np.float32).reshape(256, 512)[:, ::2]
    t = torch.arange(1 << 18, dtype=torch.float32).reshape(512, 512).t()
    msg = S.GetInternalStateReqOutput(internal_state={"a": arr, "t": t})
    assert codec.encode(msg, "msgpack") == _plain_encode(msg)


def test_splice_marker_collision_falls_back_to_the_plain_path(monkeypatch):
    t = torch.zeros(1 << 17)
    mark = _codec_fast.SPLICE_MARK + (0).to_bytes(4, "big")
    msg = S.BatchEmbeddingOutput(rids=[mark.hex()], finished_reasons=[None], embeddings=[0.0], prompt_tokens=[1],
                                 cached_tokens=[0], placeholder_tokens_idx=None, placeholder_tokens_val=None,
                                 pooled_hidden_states=[t])
    # a bytes field carrying the exact placeholder: the spliced output would be ambiguous
    tricky = S.GetInternalStateReqOutput(internal_state={"x": bytes((0xD8, 2)) + mark, "t": t})
    for m in (msg, tricky):
        assert codec.encode(m, "msgpack") == _plain_encode(m)


def test_small_message_fast_path_keeps_the_errors():
    good = codec.encode(_batch([array.array("q", [1])]), "msgpack")
    with pytest.raises(WireError, match="msgpack decode"):
        codec.decode(good[:-3], "msgpack")
    with pytest.raises(WireError, match="msgpack decode"):
        codec.decode(b"", "msgpack")
    assert codec.decode(msgspec.msgpack.encode("text"), "msgpack") == "text"


@pytest.mark.parametrize("struct", ["BatchTokenIDOutput", "BatchStrOutput"])
def test_large_batches_take_the_twin_decoder(struct, monkeypatch):
    from reference_tools.bench.payloads import batch_str_output, batch_token_id_output

    build = batch_token_id_output if struct == "BatchTokenIDOutput" else batch_str_output
    msg = build(64, True)(S)
    data = codec.encode(msg, "msgpack")
    calls = []
    real = codec._fast_decode
    monkeypatch.setattr(codec, "_fast_decode", lambda *a: calls.append(a[2]) or real(*a))
    got = codec.decode(data, "msgpack")
    assert calls == [type(msg)] and type(got) is type(msg)
    assert got == _plain_path(data) == msg


@pytest.mark.parametrize("nbytes", [0, 1024, (1 << 18) - 4, 1 << 18, (1 << 20) - 4, 1 << 20, 3 << 20])
def test_frames_are_those_of_the_collector_path(nbytes):
    """encode_frames' one-frame shortcut gives what the frame collector gives."""
    t = torch.arange(max(1, nbytes // 4), dtype=torch.float32)
    msg = S.BatchEmbeddingOutput(rids=["a"], finished_reasons=[None], embeddings=[0.0], prompt_tokens=[1],
                                 cached_tokens=[0], placeholder_tokens_idx=None, placeholder_tokens_val=None,
                                 pooled_hidden_states=[t, t[:3].clone()])
    collector = _codec_fast.FrameCollector(_codec_limits.OOB_THRESHOLD)
    want = [msgspec.msgpack.Encoder(enc_hook=collector).encode(msg), *collector.frames]
    got = codec.encode_frames(msg, "msgpack")
    assert [bytes(f) for f in got] == [bytes(f) for f in want]
    assert torch.equal(codec.decode_frames(got, "msgpack").pooled_hidden_states[0], t)


def test_bench_codec_unknown_implementation_is_a_clean_error(capsys):
    assert cli_main(["bench", "codec", "--impl", "nope", "--tiny", "--quiet"]) == 2
    assert "unknown implementation" in capsys.readouterr().err


def test_bench_codec_payload_that_names_nothing_is_a_clean_error(capsys):
    assert cli_main(["bench", "codec", "--impl", "reference", "--payload", "no such payload", "--quiet"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "'no such payload' names no payload" in line and "BatchTokenIDOutput x1024" in line


def test_a_server_that_exits_at_start_says_why():
    """A started server logs to a file (not a pipe nobody reads during the rounds); when it exits
    before it is ready, the error carries the end of that log."""
    parser = __import__("argparse").ArgumentParser()
    sb.add_arguments(parser)
    s = sb.settings_from_args(parser.parse_args(["--server-arg=--no-such-flag"]))
    server = sb.Server("msgpack", sb._free_port(), s, batch=1)
    try:
        with pytest.raises(RuntimeError, match="unrecognized arguments: --no-such-flag"):
            server.wait_ready(60)
    finally:
        server.stop()
    assert server.log.closed


class _BusyThenIdle:
    """A real HTTP server answering /get_server_info: the first poll late, then `in_flight` from
    `answers` in turn (the last one repeated)."""

    def __init__(self, answers: list[int], first_delay_s: float) -> None:
        self.polls = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.polls += 1
                if outer.polls == 1:
                    time.sleep(first_delay_s)
                body = json.dumps({"in_flight": {"requests": answers[min(outer.polls, len(answers)) - 1]}})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_wait_idle_waits_for_a_server_too_busy_to_answer_at_once():
    """A server that does not answer a poll in time is busy, not idle: the next round would start
    beside its leftover requests (and a profiled server was stopped with a thousand of them)."""
    busy = _BusyThenIdle([5, 2, 0], first_delay_s=0.6)
    try:
        assert sb.wait_idle(busy.url, timeout=10, poll_timeout=0.2)
        assert busy.polls >= 3  # the late poll, then 2 in flight, then idle
    finally:
        busy.close()
    never = _BusyThenIdle([1], first_delay_s=0.0)
    try:
        assert not sb.wait_idle(never.url, timeout=0.5, poll_timeout=0.2)
    finally:
        never.close()
    assert sb.wait_idle("http://127.0.0.1:9", timeout=1)  # nothing listening: nothing to wait for
