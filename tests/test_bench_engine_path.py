"""`bench codec`'s engine-path rows: the engine's step messages (reference_tools/bench/engine_samples.py)
timed through the engine's send and receive functions, beside the bare codec rows. Smoke-sized:
no timing is judged here."""

from __future__ import annotations

from reference_tools.bench import codec_bench as cb
from reference_tools.bench import engine_samples as es


def test_engine_path_rows_beside_the_bare_codec():
    report = cb.run(impl="reference", payload_filter=["engine step"], reps=3, min_time=0.0005, tiny=True)
    names = [p["payload"] for p in report["payloads"]]
    assert names == ["engine step BatchTokenIDOutput x1", "engine step BatchStrOutput x1"]
    for p in report["payloads"]:
        assert set(p["transports"]) == {cb.PICKLE, cb.MSGPACK, es.ENGINE_PICKLE, es.ENGINE_MSGPACK}
        assert p["group"] == "engine-path"
        assert "vs_pickle" in p["ratios"][es.ENGINE_MSGPACK] and "encode_bound" not in p["ratios"][es.ENGINE_MSGPACK]
    targets = [t["target"] for t in report["targets"]]
    assert any("engine msgpack send + receive not slower than engine pickle" in t for t in targets)
    text = cb.render_text(report)
    assert "engine msgpack" in text and "against engine pickle" in text


def test_the_samples_are_what_a_step_sends():
    out = es.scheduler_output(1)
    assert len(out.rids) == 1 and [len(ids) for ids in out.decode_ids] == [1]  # one new token
    (stats,) = out.time_stats
    assert {"created", "prefill_done", "first_token"} <= set(stats.stamps) and stats.trace_carrier
    text = es.detokenizer_output(1)
    assert type(text).__name__ == "BatchStrOutput" and "detokenized" in text.time_stats[0].stamps
    wire = es.engine_send("msgpack")(out)
    assert b"PickleWrapper" in wire  # the time stats travel wrapped
    back = es.engine_receive("msgpack")(wire)
    assert es.same_delivery(back, out) and type(back.time_stats).__name__ == "TimeStatsBatch"


def test_directions_that_differ_are_named():
    def stat(median):
        return {"median": median, "p25": median, "p75": median}

    report = {"payloads": [
        {"payload": "a", "ratios": {cb.MSGPACK: {"vs_pickle": stat(1.5)}, es.ENGINE_MSGPACK: {"vs_pickle": stat(0.9)}}},
        {"payload": "b", "ratios": {cb.MSGPACK: {"vs_pickle": stat(1.5)}, es.ENGINE_MSGPACK: {"vs_pickle": stat(1.2)}}},
    ]}
    (line,) = cb.disagreements(report)
    assert line.startswith("directions differ: a:") and "1.50x" in line and "0.90x" in line


def test_the_piece_accounting_runs():
    times = es.piece_times(n=5, batches=1)
    assert times["send: codec.encode, all of it"] > 0 and "  unwrap (allow-listed unpickler)" in times


def test_piece_accounting_bad_input_is_one_line_and_exit_2(capsys):
    import pytest

    for argv in (["--rows", "0"], ["--impl", "reference", "--no-metrics"]):
        with pytest.raises(SystemExit) as exc:
            es.main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("python -m reference_tools.bench.engine_samples: error:")


def test_piece_accounting_without_sglang_is_one_line_and_exit_2(capsys):
    import importlib.util

    import pytest

    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("SGLang is installed here: the refusal needs an environment without it")
    with pytest.raises(SystemExit) as exc:
        es.main(["--impl", "sglang"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("python -m reference_tools.bench.engine_samples: error: "
                              "--impl sglang: cannot import SGLang")


def test_the_final_samples_are_what_a_request_answered_as_one_json_gets():
    out = es.scheduler_output(3, final=True)
    assert [len(ids) for ids in out.decode_ids] == [es.FINAL_TOKENS] * 3  # every token at once
    assert all(reason == {"type": "length", "length": es.FINAL_TOKENS} for reason in out.finished_reasons)
    text = es.detokenizer_output(3, final=True)
    assert [len(ids) for ids in text.output_ids] == [es.FINAL_TOKENS] * 3 and all(text.output_strs)
    for transport in ("pickle", "msgpack"):
        back = es.engine_receive(transport)(es.engine_send(transport)(text))
        assert es.same_delivery(back, text)
    names = [name for name, _, _ in es.samples((1, 64))]
    assert names[-2:] == ["engine final BatchTokenIDOutput x64", "engine final BatchStrOutput x64"]
