"""The engine's receive paths as the suite drives them (reference_impl/engine/receive_paths.py), and
proof that the ReceivePath checks fail when a receive path skips the unwrap
(defect class: missing-unwrap)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from array import array
from pathlib import Path

import pytest

from reference_impl.engine.receive_paths import OutputPathRig, ReceivePathError, ReceivePathRig
from reference_impl.engine.tracing import ReqTimeStats
from reference_impl.io_struct import (
    BatchEmbeddingOutput,
    BatchTokenizedGenerateReqInput,
    FlushCacheReqInput,
    PickleWrapper,
    SamplingParams,
    TokenizedGenerateReqInput,
)

HERE = Path(__file__).resolve().parent
ROUTED_WRAPPED = ["TokenizedGenerateReqInput", "TokenizedEmbeddingReqInput", "BatchTokenizedGenerateReqInput",
                  "BatchTokenizedEmbeddingReqInput"]
CONTROL = ["AbortReq", "FlushCacheReqInput", "UpdateWeightsFromTensorReqInput"]
# The way back: outputs that carry time stats, and those that do not.
TO_DETOKENIZER_WRAPPED = ["BatchTokenIDOutput", "BatchEmbeddingOutput"]
TO_TOKENIZER_MANAGER_WRAPPED = ["BatchStrOutput", "BatchEmbeddingOutput"]
TO_TOKENIZER_MANAGER_PLAIN = ["FlushCacheReqOutput", "UpdateWeightsFromTensorReqOutput", "AbortReq"]
ROUTED_SINGLE = ["TokenizedGenerateReqInput", "TokenizedEmbeddingReqInput"]
PATHS = {"Controller": ROUTED_WRAPPED + CONTROL, "Scheduler": ROUTED_WRAPPED + CONTROL,
         "Detokenizer": TO_DETOKENIZER_WRAPPED,
         "TokenizerManager": TO_TOKENIZER_MANAGER_WRAPPED + TO_TOKENIZER_MANAGER_PLAIN,
         "Unroutable": ROUTED_SINGLE}
WRAPPED = {"Controller": ROUTED_WRAPPED, "Scheduler": ROUTED_WRAPPED, "Detokenizer": TO_DETOKENIZER_WRAPPED,
           "TokenizerManager": TO_TOKENIZER_MANAGER_WRAPPED}


def _req(rid: str, rank=None) -> TokenizedGenerateReqInput:
    return TokenizedGenerateReqInput(
        rid=rid, input_text="hi", input_ids=array("q", [256, 72]), input_embeds=None, mm_inputs=None,
        token_type_ids=None, sampling_params=SamplingParams(), return_logprob=False, logprob_start_len=-1,
        top_logprobs_num=0, token_ids_logprob=None, stream=False, routed_dp_rank=rank,
        time_stats=ReqTimeStats(rid=rid).mark("created"))


@pytest.mark.parametrize("transport", ["pickle", "msgpack"])
def test_controller_routes_a_batch_whole_to_the_rank_its_requests_name(transport):
    with ReceivePathRig(transport) as rig:
        batch = BatchTokenizedGenerateReqInput(rids=["a", "b"], batch=[_req("a", 1), _req("b", 1)])
        got = rig.through_controller(batch)
        assert [r.rid for r in got.batch] == ["a", "b"]
        assert all(isinstance(r.time_stats, ReqTimeStats) for r in got.batch)


def test_controller_refuses_a_batch_naming_two_ranks_with_an_abort_per_request():
    with ReceivePathRig("msgpack") as rig:
        batch = BatchTokenizedGenerateReqInput(rids=["a", "b"], batch=[_req("a", 0), _req("b", 1)])
        with pytest.raises(ReceivePathError, match="different routed_dp_ranks"):
            rig.through_controller(batch)


def test_broadcast_reaches_every_rank_unwrapped():
    with ReceivePathRig("msgpack", dp_size=3) as rig:
        ranks = rig.through_scheduler(_req("x"))
        assert len(ranks) == 3 and all(isinstance(r.time_stats, ReqTimeStats) for r in ranks)
        assert rig.through_scheduler(FlushCacheReqInput(rid="f")) == [FlushCacheReqInput(rid="f")] * 3


def test_skipped_unwrap_hands_on_the_wrapper():
    with ReceivePathRig("msgpack", debug_skip_unwrap=("scheduler_0",)) as rig:
        first, second = rig.through_scheduler(_req("x"))
        assert isinstance(first.time_stats, PickleWrapper) and isinstance(second.time_stats, ReqTimeStats)


def _suite(adapter: str, tmp_path: Path) -> dict[str, str]:
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", adapter, "--expectations", os.devnull,
         "--report", str(report), "--", "-k", "ReceivePath"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return {r["id"]: r["outcome"] for r in json.loads(report.read_text())["results"]}


def _ids(path: str, structs: list[str], transport: str) -> set[str]:
    return {f"Required.ReceivePath.{s}.{path}.{transport}" for s in structs}


@pytest.mark.parametrize("adapter, path", [("receive_path_adapters:ControllerSkipsUnwrap", "Controller"),
                                           ("receive_path_adapters:SchedulerSkipsUnwrap", "Scheduler"),
                                           ("receive_path_adapters:DetokenizerSkipsUnwrap", "Detokenizer"),
                                           ("receive_path_adapters:TokenizerManagerSkipsUnwrap", "TokenizerManager")])
def test_receive_path_checks_fail_when_a_receive_path_skips_the_unwrap(adapter, path, tmp_path):
    outcome = _suite(adapter, tmp_path)
    failed = {check for check, result in outcome.items() if result == "failed"}
    # Exactly the messages that carry time stats, under msgpack (pickle never wraps), on that path.
    assert failed == _ids(path, WRAPPED[path], "msgpack")
    assert len(outcome) == 2 * sum(map(len, PATHS.values())) and set(outcome.values()) == {"passed", "failed"}


def test_unroutable_checks_fail_when_the_controller_drops_what_it_cannot_route(tmp_path):
    outcome = _suite("receive_path_adapters:ControllerDropsUnroutable", tmp_path)
    failed = {check for check, result in outcome.items() if result == "failed"}
    assert failed == _ids("Unroutable", ROUTED_SINGLE, "msgpack") | _ids("Unroutable", ROUTED_SINGLE, "pickle")


def test_receive_path_checks_pass_on_the_reference(tmp_path):
    outcome = _suite("reference", tmp_path)
    assert outcome.keys() == {check for path, structs in PATHS.items() for transport in ("msgpack", "pickle")
                              for check in _ids(path, structs, transport)}
    assert set(outcome.values()) == {"passed"}


def test_output_paths_unwrap_and_a_skipped_unwrap_hands_on_the_wrapper():
    def output() -> BatchEmbeddingOutput:
        return BatchEmbeddingOutput(
            rids=["a"], http_worker_ipcs=None, finished_reasons=[None], embeddings=[[1.0]], prompt_tokens=[1],
            cached_tokens=[0], placeholder_tokens_idx=None, placeholder_tokens_val=None, retraction_counts=[0],
            cached_tokens_details=None, time_stats=[ReqTimeStats("a")], pooled_hidden_states=None)

    with OutputPathRig("msgpack") as rig:
        assert rig.through_detokenizer(output()).time_stats == [ReqTimeStats("a")]
        assert rig.through_tokenizer_manager(output()).time_stats == [ReqTimeStats("a")]
    with OutputPathRig("msgpack", debug_skip_unwrap=("tokenizer_manager",)) as rig:
        assert rig.through_detokenizer(output()).time_stats == [ReqTimeStats("a")]
        assert isinstance(rig.through_tokenizer_manager(output()).time_stats, PickleWrapper)


# -- the suite's opt-in E2E checks (conformance/suite/test_e2e.py) ------------------------------
def _suite_e2e(adapter: str, tmp_path: Path) -> dict[str, dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", adapter, "--transport", "msgpack", "--e2e",
         "--expectations", os.devnull, "--report", str(report), "--", "-k", "E2E"],
        capture_output=True, text=True, env=env, timeout=400,
    )
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return {r["id"]: r for r in json.loads(report.read_text())["results"]}


@pytest.mark.e2e
def test_suite_e2e_checks_pass_on_the_reference_and_catch_a_controller_that_skips_the_unwrap(tmp_path):
    good = _suite_e2e("reference", tmp_path / "good")
    assert {i: r["outcome"] for i, r in good.items() if r["outcome"] != "passed"} == {
        "Required.E2E.All.SameResponsesAcrossTransports": "skipped"}  # one transport asked for
    assert len(good) == 9
    bad = _suite_e2e("receive_path_adapters:ControllerSkipsUnwrap", tmp_path / "bad")
    leftover = bad["Required.E2E.msgpack.NoWrapperPastReceive"]
    assert leftover["outcome"] == "failed"
    assert "controller (controller<-tokenizer_manager, msgpack)" in leftover["message"]
    assert bad["Required.E2E.msgpack.ServesScenario"]["outcome"] == "failed"
    assert bad["Required.E2E.msgpack.ShutsDownCleanly"]["outcome"] == "passed"


def test_e2e_checks_are_opt_in():
    """Without --e2e they are deselected: nothing starts, the default run stays fast."""
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--", "-k", "E2E"],
                          capture_output=True, text=True, timeout=300)
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "conformance: no checks selected (nothing ran; exit status 5)", proc.stdout[-2000:]
    assert proc.returncode == 5
    assert "deselected" in proc.stdout, proc.stdout[-2000:]
