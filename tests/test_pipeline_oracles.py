"""The pipeline oracles (conformance/pipeline.py) on run records: a clean pair of runs passes
every oracle, and each kind of defect a real pipeline shows fails the oracle named after it."""

from __future__ import annotations

import copy

import pytest

from conformance import pipeline
from conformance.pipeline import PipelineRun, Topology

SINGLE = Topology("dp1")
SPREAD = Topology("dp2-round_robin", dp_size=2, switch="word")


def _answer(rid: str, tokens: list[int], experts: list[list[int]]) -> dict:
    return {"status": 200, "body": {"text": "x", "output_ids": tokens,
                                    "meta_info": {"id": rid, "expert_ids": experts, "e2e_latency": 0.1}}}


def clean_run(topology: Topology = SINGLE, transport: str = "msgpack") -> PipelineRun:
    """A run in which every step of the scenario was answered with what the stub produced."""
    run = PipelineRun(transport=transport, topology=topology, selected=transport)
    for rid in pipeline.expected_rids(topology):
        tokens = [97 + len(rid) % 26, 98]
        experts = [[0, 1], [1, 2]]
        run.produced[rid] = {"tokens": tokens, "customized": experts, "hidden_states": [], "output_logprobs": []}
        run.received.append({"rank": 0, "type": "TokenizedGenerateReqInput", "rid": rid,
                             "form": {"$struct": "TokenizedGenerateReqInput", "rid": rid, "input_ids": [1, 2],
                                      "time_stats": {"$type": "APIServerReqTimeStats"}}})
        run.responses[rid] = _answer(rid, tokens, experts)
    for step in pipeline.scenario(topology):
        for rank in range(topology.dp_size) if "control" in step else ():
            run.received.append({"rank": rank, "type": step["control"], "rid": None, "form": {}})
        if step.get("sent_bytes"):
            run.received.append({"rank": 0, "type": "UpdateWeightsFromTensorReqInput", "rid": None,
                                 "form": {"serialized_named_tensors": step["sent_bytes"]}})
    run.links = {"scheduler_0": {"frames": 12, "kinds": [transport], "largest": 900, "sent": 12}}
    return run


def test_a_clean_run_passes_every_oracle():
    run = clean_run()
    assert pipeline.liveness_failures(run) == []
    assert pipeline.transport_failures(run) == []
    assert pipeline.delivery_failures(run) == []
    assert pipeline.conservation_failures(run) == []
    assert pipeline.identity_failures(clean_run(transport="pickle"), run) == []


def test_a_dead_hop_or_unanswered_request_fails_liveness():
    run = clean_run()
    run.errors.append("scheduler rank 0: Traceback ...\nUnpicklingError: invalid load key")
    run.responses["plain"] = {"$error": "no answer to /generate: none within 30.0 s"}
    lines = pipeline.liveness_failures(run)
    assert any("UnpicklingError" in line for line in lines) and any("plain" in line for line in lines)


def test_a_frame_of_the_other_transport_fails_the_transport_oracle():
    run = clean_run()
    run.links["scheduler_1"] = {"frames": 3, "kinds": ["msgpack", "pickle"], "largest": 10, "sent": 3}
    assert pipeline.transport_failures(run) == ["scheduler_1: received pickle frame(s) in a msgpack run"]


def test_a_switch_that_selects_the_other_transport_fails_the_transport_oracle():
    run = clean_run()
    run.selected = "pickle"
    (line,) = pipeline.transport_failures(run)
    assert "asked for msgpack" in line and "'0'" in line and "selected pickle" in line


def test_a_dropped_frame_or_a_duplicate_request_fails_delivery():
    run = clean_run()
    run.links["scheduler_0"]["frames"] = 11
    run.received.append(copy.deepcopy(run.received[0]))
    lines = pipeline.delivery_failures(run)
    assert lines[0] == "scheduler_0: 12 frame(s) sent towards it, 11 received"
    assert "reached the scheduler ranks 2 time(s), not once" in lines[1]


def test_a_control_message_missing_on_a_rank_fails_delivery():
    run = clean_run(SPREAD)
    run.received = [item for item in run.received if not (item["type"] == "PauseGenerationReqInput"
                                                          and item["rank"] == 1)]
    assert pipeline.delivery_failures(run) == [
        "pause_generation: scheduler rank 1 received PauseGenerationReqInput 0 time(s), not once"]


def test_a_request_that_never_reached_a_rank_fails_delivery():
    run = clean_run()
    run.received = [item for item in run.received if item["rid"] != "logprobs"]
    assert pipeline.delivery_failures(run) == ["request 'logprobs' reached the scheduler ranks 0 time(s), not once"]


def test_a_field_lost_on_the_way_fails_conservation_under_any_transport():
    for transport in ("pickle", "msgpack"):
        run = clean_run(transport=transport)
        run.responses["plain"]["body"]["meta_info"].pop("expert_ids")
        (line,) = pipeline.conservation_failures(run)
        assert line.startswith("plain: meta_info.expert_ids (customized info): the model produced")


def test_changed_weight_bytes_fail_conservation():
    run = clean_run()
    weights = next(item for item in run.received if item["type"] == "UpdateWeightsFromTensorReqInput")
    weights["form"] = {"serialized_named_tensors": [{"$bytes": 1024, "sha256": "0" * 16}]}
    (line,) = pipeline.conservation_failures(run)
    assert line.startswith("update_weights: the client sent serialized_named_tensors")


def test_a_large_message_that_never_arrived_fails_conservation():
    run = clean_run(Topology("dp1", large=True))
    run.received = [item for item in run.received if item["type"] != "UpdateWeightsFromTensorReqInput"][:]
    assert "2 weight update(s) sent, 0 reached the scheduler" in pipeline.conservation_failures(run)


def test_identity_ignores_clocks_and_stream_chunking_but_not_values():
    pickled, packed = clean_run(transport="pickle"), clean_run()
    packed.responses["plain"]["body"]["meta_info"]["e2e_latency"] = 9.9
    assert pipeline.identity_failures(pickled, packed) == []
    packed.responses["plain"]["body"]["output_ids"] = [1, 2]
    lines = pipeline.identity_failures(pickled, packed)
    assert lines and all(line.startswith("plain: $.body.output_ids[") for line in lines)
    a = {"status": 200, "chunks": [{"output_ids": [1]}, {"output_ids": [1, 2]}, "[DONE]"]}
    b = {"status": 200, "chunks": [{"output_ids": [1, 2]}, "[DONE]"]}
    assert pipeline.comparable(a) == pipeline.comparable(b)


def test_identity_compares_what_the_scheduler_received_attribute_by_attribute():
    pickled, packed = clean_run(transport="pickle"), clean_run()
    packed.received[0]["form"]["input_ids"] = [1]
    (line,) = pipeline.identity_failures(pickled, packed)
    assert "scheduler received" in line and "$.input_ids" in line


def test_between_topologies_the_fields_a_topology_stamps_are_not_compared():
    single, spread = clean_run(), clean_run(SPREAD)
    for item in spread.received:
        if "time_stats" in item["form"]:
            item["form"]["time_stats"] = {"$type": "DPControllerReqTimeStats"}
    assert pipeline.identity_failures(single, spread) == []
    assert pipeline.identity_failures(clean_run(SPREAD, "pickle"), spread) != []


@pytest.mark.parametrize("topology", pipeline.TOPOLOGIES, ids=lambda t: t.name)
def test_every_topology_spells_the_switch_both_ways_and_names_every_rid(topology):
    assert pipeline.switch_value(topology, "pickle") in ("1", "true")
    assert pipeline.switch_value(topology, "msgpack") in ("0", "false")
    rids = pipeline.expected_rids(topology)
    assert len(rids) == len(set(rids)) >= 8


# -- which runs a selection makes (conformance/suite/test_pipeline._wanted) --------------------
def _selected(*params: dict) -> object:
    from types import SimpleNamespace

    from conformance.suite import test_pipeline

    items = [SimpleNamespace(callspec=SimpleNamespace(params=p), function=test_pipeline.test_pipeline_conserves)
             for p in params]
    return SimpleNamespace(items=items)


def test_a_selection_of_one_topology_makes_its_runs_and_its_baselines_only():
    from types import SimpleNamespace

    from conformance.suite.test_pipeline import _wanted

    ipc = SimpleNamespace(transports=["pickle", "msgpack"])
    topologies, transports = _wanted(ipc, _selected({"topology": "dp2-round_robin", "transport": "msgpack"}))
    assert [t.name for t in topologies] == ["dp1", "dp2-round_robin"] and transports == ["msgpack"]
    # a check that compares transports needs both
    topologies, transports = _wanted(ipc, _selected({"topology": "embed"}))
    assert [t.name for t in topologies] == ["embed"] and transports == ["pickle", "msgpack"]
    # nothing of this module selected (a direct call): every run
    topologies, transports = _wanted(ipc, SimpleNamespace(items=[]))
    assert topologies == list(pipeline.TOPOLOGIES) and transports == ["pickle", "msgpack"]


def test_the_runs_work_folders_are_made_before_the_threads_start(tmp_path, monkeypatch):
    """pytest's temporary-folder factory is not thread-safe: two first mktemp calls at once each
    made a base folder, and one refused its own path ("pipeline-pickle is not a normalized and
    relative path", a CI failure). Every folder is made on the thread that asks for the runs."""
    import threading
    from types import SimpleNamespace

    from conformance.suite import test_pipeline

    made_on: list[threading.Thread] = []

    def mktemp(name: str) -> object:
        made_on.append(threading.current_thread())
        return tmp_path / name

    def run_pipelines(transport: str, topologies: list, workdir: object) -> list[PipelineRun]:
        assert workdir == tmp_path / f"pipeline-{transport}"
        return [PipelineRun(transport=transport, topology=t) for t in topologies]

    monkeypatch.setattr(test_pipeline, "_RUNS", {})
    ipc = SimpleNamespace(transports=["pickle", "msgpack"], adapter=SimpleNamespace(run_pipelines=run_pipelines))
    runs = test_pipeline._all_runs(ipc, SimpleNamespace(mktemp=mktemp), SimpleNamespace(items=[]))
    assert len(runs) == 2 * len(pipeline.TOPOLOGIES) and not any(run.errors for run in runs.values())
    assert made_on == [threading.current_thread()] * 2
