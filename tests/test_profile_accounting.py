"""`bench serve --profile-dir` and the accounting of its profiles: each engine process profiled
on its CPU clock, its own time sorted into buckets (the wire format, ZeroMQ, HTTP and the event
loop, the model, the rest of the engine) per request and per message, pickle beside msgpack."""

from __future__ import annotations

import cProfile
import time

import pytest

from conformance.cli import main as cli_main
from reference_impl import codec
from reference_impl.engine.ipc import unwrap_received
from reference_tools.bench import engine_samples
from reference_tools.bench import profile_accounting as pa


def test_the_codec_counts_as_wire_format_and_the_rest_does_not(tmp_path):
    """Real profiles of the engine's send and receive of a step message: nearly all of their own
    time is the wire format under both transports; a busy loop of engine code is not."""
    obj = engine_samples.detokenizer_output(64)
    for transport in ("pickle", "msgpack"):
        codec.decode(codec.encode(obj, transport), transport, allow_pickle=True)  # types resolved: steady state
        profiler = cProfile.Profile(time.thread_time)
        profiler.enable()
        for _ in range(200):
            wire = codec.encode(obj, transport)
            unwrap_received(codec.decode_frames([wire], transport, allow_pickle=True, unwrap_wrappers=False),
                            transport)
        profiler.disable()
        profiler.dump_stats(tmp_path / f"{transport}.prof")
        acc = pa.account(tmp_path / f"{transport}.prof")
        busy = sum(acc.seconds[b] for b in pa.BUCKETS)
        assert acc.seconds[pa.WIRE] > 0.9 * busy, (transport, acc.seconds)
    assert pa.own_bucket(("/x/reference_impl/engine/scheduler.py", 1, "step")) == pa.ENGINE
    assert pa.own_bucket(("/x/site-packages/uvicorn/protocols/http/h11_impl.py", 1, "send")) == pa.HTTP
    assert pa.own_bucket(("/x/site-packages/zmq/sugar/socket.py", 1, "recv_multipart")) == pa.ZMQ
    assert pa.own_bucket(("~", 0, "<method 'poll' of 'select.epoll' objects>")) == pa.WAITING


def test_a_folder_without_profiles_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        pa.main([str(tmp_path / "missing"), str(tmp_path)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1
    assert err == f"profile_accounting: error: {tmp_path / 'missing'}: no <process>.prof files " \
                  "(bench serve --profile-dir writes them)\n"


def test_a_broken_profile_or_collector_file_is_one_line_and_exit_2(tmp_path, capsys):
    """A profile that is not cProfile's, and a collector file that is not JSON: one line naming it."""
    folder = tmp_path / "c1-pickle"
    folder.mkdir()
    (folder / "tokenizer_manager.prof").write_bytes(b"garbage")
    with pytest.raises(SystemExit) as exited:
        pa.main([str(folder), str(folder)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"profile_accounting: error: {folder / 'tokenizer_manager.prof'}: not a cProfile file (")
    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    profiler.disable()
    profiler.dump_stats(folder / "tokenizer_manager.prof")
    (folder / "tokenizer_manager.gc.json").write_text("{")
    with pytest.raises(SystemExit) as exited:
        pa.main([str(folder), str(folder)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1
    collector = folder / "tokenizer_manager.gc.json"
    assert err.startswith(f"profile_accounting: error: {collector}: not the collector's times (")


@pytest.mark.slow
def test_profiles_of_both_transports_are_accounted_per_request_and_per_message(tmp_path, capsys):
    """A tiny served run per transport under --profile-dir: every process leaves a profile, the
    accounting finds the requests served (measured ones and warm-ups) and each process's messages."""
    code = cli_main(["bench", "serve", "--preset", "ipc", "--stream", "--no-pin", "--concurrency", "2",
                     "--num-prompts", "4", "--output-len", "3", "--rounds", "1", "--warmup", "1",
                     "--profile-dir", str(tmp_path), "--quiet"])
    assert code == 0, capsys.readouterr().out
    pickled, packed = tmp_path / "c2-pickle", tmp_path / "c2-msgpack"
    for folder in (pickled, packed):
        processes, requests = pa.accounts(folder)
        assert {"tokenizer_manager", "scheduler_0", "detokenizer"} <= set(processes)
        assert requests == 5  # 4 measured + 1 warm-up
        for name in ("tokenizer_manager", "scheduler_0", "detokenizer"):
            assert processes[name].messages > 0 and processes[name].seconds[pa.WIRE] > 0, (folder, name)
            assert processes[name].collector is not None and processes[name].collector >= 0
    assert pa.main([str(pickled), str(packed), "--format", "markdown"]) == 0
    table = capsys.readouterr().out
    assert "| tokenizer_manager | wire format |" in table and "wire format per message" in table
    assert "| tokenizer_manager | of which the garbage collector" in table
