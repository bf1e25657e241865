"""`bench codec`'s SGLang engine-path rows (run in `tox -e upstream`): SGLang's own step message,
built by its output processor, through the functions its processes call (reference_tools/bench/
engine_samples.py). Smoke-sized: no timing is judged here."""

from __future__ import annotations

import pickle

import msgspec
import pytest

from reference_tools.bench import codec_bench as cb
from reference_tools.bench import engine_samples as es

pytest.importorskip("sglang.srt.managers.io_struct", reason="needs SGLang: tox -e upstream")
pytestmark = pytest.mark.sglang


def _io():
    import sglang.srt.managers.io_struct as io

    return io


def _stamps(stats):
    return [(s.has_timing_data or s.enable_metrics, s.queue_duration_s) for s in stats]


def test_sglang_sample_is_what_its_step_sends():
    from sglang.srt.observability.req_time_stats import SchedulerReqTimeStats

    out = es.sglang_scheduler_output(3)
    assert type(out) is _io().BatchTokenIDOutput and len(out.rids) == 3
    assert [len(ids) for ids in out.decode_ids] == [1, 1, 1] and [len(ids) for ids in out.output_ids] == [1, 1, 1]
    assert out.dp_ranks == [0, 0, 0] and out.customized_info is None
    # pickle mode's to_payload: the requests' own time stats, unwrapped
    assert [type(s) for s in out.time_stats] == [SchedulerReqTimeStats] * 3
    assert all(s.prefill_finished_time > 0 for s in out.time_stats)
    # without --enable-metrics SGLang's time stats travel as empty states: a smaller pickle
    quiet = es.sglang_scheduler_output(3, metrics=False).time_stats
    assert len(pickle.dumps(quiet)) < len(pickle.dumps(out.time_stats))


@pytest.mark.parametrize("transport", ["pickle", "msgpack"])
def test_sglang_engine_path_round_trips_through_its_own_functions(transport):
    io = _io()
    out = es.sglang_scheduler_output(2)
    stats, switch = out.time_stats, io._USE_PICKLE_IPC
    wire = es.engine_send_sglang(transport)(out)
    assert out.time_stats is stats and io._USE_PICKLE_IPC == switch  # the sample and the switch restored
    if transport == "msgpack":
        first_hop = io.msgpack_decode(wire)  # what its detokenizer receives: the time stats still wrapped
        assert type(first_hop.time_stats) is io.PickleWrapper
    back = es.engine_receive_sglang(transport)(wire)
    assert io._USE_PICKLE_IPC == switch
    plain = {k: v for k, v in msgspec.structs.asdict(out).items() if k != "time_stats"}
    assert {k: v for k, v in msgspec.structs.asdict(back).items() if k != "time_stats"} == plain
    assert [type(s) for s in back.time_stats] == [type(s) for s in stats]
    assert _stamps(back.time_stats) == [(True, 0.0)] * 2  # the stamps travelled (has_timing_data set)


def test_sglang_reads_the_reference_engines_step_message():
    wire = es.engine_send("msgpack")(es.scheduler_output(2))
    back = _io().msgpack_decode(wire)
    assert type(back).__name__ == "BatchTokenIDOutput" and back.rids == ["req-00000000", "req-00000001"]


def test_both_engine_paths_side_by_side():
    report = cb.run(impl="reference,sglang", payload_filter=["engine step"], reps=3, min_time=0.0005, tiny=True)
    rows = {p["payload"]: p for p in report["payloads"]}
    token = rows["engine step BatchTokenIDOutput x1"]
    assert set(token["transports"]) == {cb.PICKLE, cb.MSGPACK, es.ENGINE_PICKLE, es.ENGINE_MSGPACK,
                                        es.SGLANG_ENGINE_PICKLE, es.SGLANG_ENGINE_MSGPACK}
    assert "vs_pickle" in token["ratios"][es.SGLANG_ENGINE_MSGPACK]  # against SGLang's own engine pickle
    assert "vs_sglang" in token["ratios"][es.ENGINE_MSGPACK] and "vs_sglang" in token["ratios"][es.ENGINE_PICKLE]
    assert cb.UPSTREAM not in token["transports"]  # the bare upstream row takes no engine-path sample
    assert not set(rows["engine step BatchStrOutput x1"]["transports"]) & set(es.SGLANG_ENGINE_TRANSPORTS)
    assert any("not slower than SGLang's own (sglang engine msgpack)" in t["target"] for t in report["targets"])
    assert "sglang engine msgpack" in cb.render_text(report)


def test_sglang_piece_accounting_runs():
    times = es.sglang_piece_times(n=5, batches=1)
    assert times["msgpack send: wrap + msgpack_encode, all of it"] > 0
    assert "  unwrap_from_pickle of the time stats" in times
