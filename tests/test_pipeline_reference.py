"""The reference engine through the pipeline oracle (Required.Pipeline.*, SPEC R-PIPE-*): the
unmodified engine passes every Pipeline check, and bugs planted into its own source, in every
one of its processes (reference_tools/proof/engine_mutants.py), fail them.

Each run starts the engine's real server and processes (``--model stub``) per transport and
topology, so these tests take minutes on 2 cores: marked slow. The fast ones check the pieces:
the stub's record, the switch's spellings, the load-balance methods, the plants' edits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conformance import pipeline
from conformance.records import Outcome, load_results
from reference_tools.proof import engine_mutants
from reference_tools.proof.mutants import MUTANTS, _EnginePlant


def _run(tmp_path: Path, impl: str, transport: str = "both") -> dict[str, Outcome]:
    """ipc-conformance run -- -k Pipeline, in a process of its own; each check's outcome."""
    report = tmp_path / f"{impl.rpartition(':')[2]}.json"
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--impl", impl, "--transport", transport,
                           "--report", str(report), "--", "-k", "Pipeline", "-p", "no:cacheprovider"],
                          capture_output=True, text=True, timeout=1200)
    assert report.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    results = load_results(report).results
    _MESSAGES.update((r.id, r.message) for r in results if r.message)
    return {r.id: r.outcome for r in results}


_MESSAGES: dict[str, str] = {}


def test_every_plant_applies_to_the_engine_source():
    for mutant in engine_mutants.MUTANTS.values():
        assert engine_mutants.applies(mutant), f"{mutant.name}: the edit no longer applies to {mutant.module}"
    plants = {m.plant for m in MUTANTS if issubclass(m, _EnginePlant)}
    assert plants == set(engine_mutants.MUTANTS), "a plant without its mutant, or a mutant without its plant"


def test_the_switch_takes_sglangs_spellings(monkeypatch):
    from reference_impl import codec

    monkeypatch.delenv("IPC_TRANSPORT", raising=False)
    for value, transport in (("1", "pickle"), ("true", "pickle"), ("TRUE", "pickle"), ("0", "msgpack"),
                             ("false", "msgpack"), ("", "msgpack")):
        monkeypatch.setenv("SGLANG_USE_PICKLE_IPC", value)
        assert codec.default_transport() == transport, value
    monkeypatch.setenv("SGLANG_USE_PICKLE_IPC", "maybe")
    with pytest.raises(ValueError, match="SGLANG_USE_PICKLE_IPC='maybe'"):
        codec.default_transport()


def test_a_bad_switch_value_is_one_line_and_exit_2():
    env = {k: v for k, v in os.environ.items() if k != "IPC_TRANSPORT"} | {"SGLANG_USE_PICKLE_IPC": "maybe"}
    proc = subprocess.run([sys.executable, "-m", "reference_impl.server", "--model", "stub", "--device", "cpu"],
                          capture_output=True, text=True, timeout=120, env=env)
    errors = [line for line in proc.stderr.splitlines() if "error:" in line.lower()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(errors) == 1 and "SGLANG_USE_PICKLE_IPC='maybe': use 1/true (pickle) or 0/false (msgpack)" in errors[0]


def test_the_stub_records_what_it_produced(tmp_path):
    from reference_impl.engine.checkpoint import tiny_config
    from reference_impl.engine.stub_model import StubModel, read_produced

    stub = StubModel(tiny_config(), tmp_path / "scheduler_0.produced")
    inputs, first = stub.prefill("r", [72, 105], True)
    second = stub.step("r", [72, 105], 1, True)
    stub.close()
    assert inputs.token(0, 105) == -0.5 and first.hidden and second.logprobs.token(0, second.token) == float("-inf")
    made = read_produced(tmp_path)["r"]
    assert made["tokens"] == [first.token, second.token]
    assert made["output_logprobs"] == [-0.25, "-inf"]
    assert made["hidden_states"] == first.hidden + second.hidden and len(made["hidden_states"]) == 3
    assert made["customized"] == [[0, first.token % 8], [1, second.token % 8]]


class _Req:
    def __init__(self, tokens: int) -> None:
        from reference_impl.io_struct import SamplingParams

        self.input_ids, self.sampling_params, self.routed_dp_rank = [1] * tokens, SamplingParams(max_new_tokens=0), None
        self.rid, self.time_stats = "r", None


@pytest.mark.parametrize("method, sizes, ranks", [
    ("round_robin", (5, 1, 1, 1), [0, 1, 0, 1]),
    ("total_requests", (5, 1, 1, 1), [0, 1, 0, 1]),
    ("total_tokens", (5, 1, 1, 1), [0, 1, 1, 1]),
])
def test_the_load_balance_methods(tmp_path, method: str, sizes: tuple[int, ...], ranks: list[int]):
    from reference_impl.engine.config import EngineConfig, IpcNames
    from reference_impl.engine.controller import DataParallelController

    config = EngineConfig(dp_size=2, transport="msgpack", load_balance_method=method, model_path=str(tmp_path))
    controller = DataParallelController(config, IpcNames.create(2))
    chosen: list[int] = []
    for rank, worker in enumerate(controller.workers):  # what the method chose, not sent anywhere
        worker.send = lambda obj, rank=rank: chosen.append(rank)  # type: ignore[method-assign]
    try:
        for size in sizes:
            controller.route(_Req(size))
    finally:
        controller.close()
    assert chosen == ranks


@pytest.mark.slow
def test_the_reference_passes_every_pipeline_check(tmp_path):
    outcomes = _run(tmp_path, "reference")
    several_workers = {t.name for t in pipeline.TOPOLOGIES if t.tokenizer_workers > 1}  # none in the reference
    expected = {check: Outcome.SKIPPED if check.split(".")[2] in several_workers else Outcome.PASSED
                for check in outcomes}
    assert outcomes and outcomes == expected, "\n".join(f"{k}: {v.value}: {_MESSAGES.get(k, '')[:1500]}"
                                                         for k, v in outcomes.items() if v != expected[k])


@pytest.mark.slow
@pytest.mark.parametrize("mutant, must_fail", [
    ("TransportSwitchTruthy", ("Required.Pipeline.dp1.SelectedTransportOnEverySocket.msgpack",
                               "Required.Pipeline.dp2-round_robin.SelectedTransportOnEverySocket.msgpack")),
    ("DetokenizerDropsCustomizedInfo", ("Required.Pipeline.dp1.ConservesWhatWasSent.msgpack",
                                        "Required.Pipeline.dp2-total_tokens.ConservesWhatWasSent.msgpack")),
    ("EverySendTwice", ("Required.Pipeline.dp1.DeliveredExactlyOnce.msgpack",)),
])
def test_planted_engine_bugs_fail_the_pipeline_checks(tmp_path, mutant: str, must_fail: tuple[str, ...]):
    outcomes: dict[str, Any] = _run(tmp_path, f"reference_tools.proof.mutants:{mutant}", "msgpack")
    missed = [check for check in must_fail if outcomes.get(check) != Outcome.FAILED]
    assert not missed, f"{mutant}: these checks did not fail: {missed} ({outcomes})"
