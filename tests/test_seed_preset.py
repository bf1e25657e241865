"""`bench serve --preset seed`: the seed's shape (1024 in / 200 out, concurrency 1 and 1024) on
CPU with a copy of the tiny checkpoint whose config allows 2048 positions, and its bad inputs,
each one line and exit 2. No server is started here."""

from __future__ import annotations

import argparse
import json

import pytest

from reference_tools.bench import serve_bench as sb
from reference_tools.bench.cli import main as cli_main


def _settings(*argv: str) -> sb.Settings:
    parser = argparse.ArgumentParser()
    sb.add_arguments(parser)
    return sb.settings_from_args(parser.parse_args(list(argv)))


@pytest.fixture
def wrk_installed(monkeypatch):
    monkeypatch.setattr(sb, "find_wrk", lambda: "/usr/bin/wrk")


@pytest.fixture
def two_engine_cores(monkeypatch):
    monkeypatch.setattr(sb.os, "sched_getaffinity", lambda pid: {0, 1, 2})


def test_the_seed_shape(wrk_installed):
    s = _settings("--preset", "seed")
    assert (s.input_len, s.output_len, s.concurrency) == (1024, 200, [1, 1024])
    assert s.streams == [False, True] and s.pin and s.skip_forward and s.dp_size == 1
    assert s.model is None and s.model_positions == 2048
    assert sb.server_context(s) == 1224  # served with context input + output, as the built-in model is
    assert sb.client_for(s, stream=False) == "wrk" and sb.client_for(s, stream=True, concurrency=1) == "python"
    # At c=1024 a Python client reading 200 chunks per request, not the engine, bounded the streams.
    assert sb.client_for(s, stream=True, concurrency=1024) == "wrk"
    gpu = sb.PRESETS["gpu"]
    assert (gpu["input_len"], gpu["output_len"], gpu["concurrency"]) == (1024, 200, [1, 1024])


def test_every_round_is_long_enough_to_decide(wrk_installed):
    """A JSON round of 2048 requests at c=1024 took about 4 s, and the same tree moved 0.87x-1.12x
    between sittings at that length: rounds now last 10 s or more (JSON answers come back 8-15x as
    fast as streams, so their levels send 8x the requests)."""
    s = _settings("--preset", "seed")
    assert s.num_prompts == [640, 2048] and s.json_prompts_factor == 8
    assert _settings("--preset", "seed", "--concurrency", "1024", "--num-prompts", "2048").json_prompts_factor == 1
    # One level of the preset runs as it does in the whole preset (it had 2.3-s JSON rounds).
    one = _settings("--preset", "seed", "--concurrency", "1024")
    assert one.num_prompts == [2048] and one.json_prompts_factor == 8
    other = _settings("--preset", "seed", "--concurrency", "256")
    assert other.num_prompts == [512] and other.json_prompts_factor == 8


def _engine_bound_level(round_s: list[float]) -> dict:
    ci = {"center": 1.05, "lo": 1.01, "hi": 1.09, "n": 2, "level": 0.95, "verdict": "msgpack faster"}
    side = {"round_s": round_s, "shares": {"client": 0.3, "engine": 0.95}}
    return {"concurrency": 1024, "stream": False, "client": "wrk", "bottleneck": "engine",
            "transports": {"pickle": side, "msgpack": side}, "ratios": {"output_throughput": ci}}


def test_a_verdict_from_short_rounds_says_they_are_short():
    from reference_tools.bench.serve_render import decisions

    (short,) = decisions({"levels": [_engine_bound_level([4.2, 3.9])]})
    assert "msgpack faster" in short and "rounds as short as 3.9 s" in short and "--num-prompts" in short
    (long,) = decisions({"levels": [_engine_bound_level([16.0, 15.5])]})
    assert "msgpack faster" in long and "short" not in long
    older = _engine_bound_level([])  # a report saved before rounds were recorded
    assert "short" not in decisions({"levels": [older]})[0]


def test_the_dp_size_2_variant_where_the_cores_allow(wrk_installed, two_engine_cores):
    s = _settings("--preset", "seed", "--dp-size", "2")
    assert s.dp_size == 2 and sb.engine_cores(s) == (1, 2)


def test_the_long_context_copy(tmp_path):
    path = sb.long_context_checkpoint(2048, root=str(tmp_path))
    assert sb.model_positions(path) == 2048 and path.endswith("-ctx2048")
    tiny = tmp_path / "tiny-llama-bytes-v1"
    config = json.loads((tiny / "config.json").read_text())
    assert config["max_position_embeddings"] == 512  # the built-in checkpoint itself is untouched
    assert (tiny / "model.safetensors").read_bytes() == (tmp_path / path / "model.safetensors").read_bytes()
    assert sb.long_context_checkpoint(2048, root=str(tmp_path)) == path  # made once
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-llama-bytes-v1", "tiny-llama-bytes-v1-ctx2048"]


def test_the_copy_serves_the_seed_shape(tmp_path):
    """The engine loads the copy (same weights, 2048 positions) and runs the seed's context."""
    import torch

    from reference_impl.engine.checkpoint import load_model
    from reference_impl.engine.model import ModelConfig

    path = sb.long_context_checkpoint(2048, root=str(tmp_path))
    assert ModelConfig.load(path).max_position_embeddings == 2048
    model = load_model(path)
    assert model is not None and torch.is_tensor(next(model.parameters()))


def _one_line_exit_2(capsys, argv: list[str], starts: str) -> str:
    assert cli_main(["bench", "serve", *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"ipc-conformance bench serve: error: {starts}"), err
    return err


def test_a_model_whose_context_is_too_small(capsys, tmp_path, wrk_installed):
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 512}))
    err = _one_line_exit_2(capsys, ["--preset", "seed", "--model", str(tmp_path)], f"--model {tmp_path}")
    assert "512 positions" in err and "input 1024 + output 200" in err
    err = _one_line_exit_2(capsys, ["--preset", "seed", "--input-len", "2000"], "the seed preset's copy")
    assert "2048-token context" in err


def test_dp_size_above_the_cores(capsys, monkeypatch, wrk_installed):
    monkeypatch.setattr(sb.os, "sched_getaffinity", lambda pid: {0, 1})
    err = _one_line_exit_2(capsys, ["--preset", "seed", "--dp-size", "2"], "--dp-size 2 is more than the 1 core")
    assert "--dp-size 1" in err


def test_missing_wrk(capsys, monkeypatch):
    monkeypatch.setattr(sb, "find_wrk", lambda: None)
    err = _one_line_exit_2(capsys, ["--preset", "seed"], "the seed preset sends its JSON answers, and its streams "
                                                         "from concurrency 256, through wrk")
    assert "apt-get install" in err
    _one_line_exit_2(capsys, ["--preset", "seed", "--stream"], "the seed preset sends")  # c=1024 streams need it
    assert _settings("--preset", "seed", "--stream", "--concurrency", "1").streams == [True]  # c=1 streams do not
