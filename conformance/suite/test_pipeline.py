"""Differential pipeline runs: the scenario through the implementation's own pipeline, under
each transport and in each topology (conformance/pipeline.py; SPEC §16, R-PIPE-*).

Capability ``pipeline`` (others skip). The runs are made once per session, on first use, for the
selected topologies (and their baselines) only, the transports side by side; every check of a run
judges the same record.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any

import pytest

from conformance import pipeline
from conformance.plugin import check
from conformance.suite.capability import require
from conformance.suite.failure import Failure, fail, raise_failure

#: Transports whose runs are made side by side (an implementation's runs are processes).
PARALLEL_RUNS = 2
_RUNS: dict[tuple[str, str], pipeline.PipelineRun] = {}
_LOCK = threading.Lock()


def _topologies(ipc: Any) -> list[str]:
    return [t.name for t in pipeline.TOPOLOGIES]


def _wanted(ipc: Any, session: Any) -> tuple[list[pipeline.Topology], list[str]]:
    """The topologies and transports the session's selected pipeline checks judge: a run of one
    topology (`-k dp1`) makes only that topology's runs and its baseline's, not all of them."""
    names: set[str] = set()
    transports: set[str] = set()
    for item in session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "topology" not in params or getattr(getattr(item, "function", None), "__module__", None) != __name__:
            continue
        topology = next(t for t in pipeline.TOPOLOGIES if t.name == params["topology"])
        names.update({topology.name, pipeline.baseline_of(topology).name})
        transports.update([params["transport"]] if "transport" in params else ipc.transports)
    if not names:  # asked for from outside the selection (a plugin, a direct call): everything
        return list(pipeline.TOPOLOGIES), list(ipc.transports)
    return ([t for t in pipeline.TOPOLOGIES if t.name in names],
            [t for t in ipc.transports if t in transports])


def _all_runs(ipc: Any, tmp_path_factory: Any, session: Any) -> dict[tuple[str, str], pipeline.PipelineRun]:
    """Every selected (topology, transport) run, made together the first time a check asks: each
    transport's runs on a thread of their own (the adapter's run_pipelines)."""
    with _LOCK:
        if not _RUNS:
            topologies, transports = _wanted(ipc, session)
            # Made here, not on the threads: pytest's temporary-folder factory is not thread-safe
            # (two first calls at once each made a base folder, and mktemp then refused its own path).
            workdirs = {transport: tmp_path_factory.mktemp(f"pipeline-{transport}") for transport in transports}

            def runs_of(transport: str) -> list[pipeline.PipelineRun]:
                try:
                    made: list[pipeline.PipelineRun] = ipc.adapter.run_pipelines(transport, topologies,
                                                                                   workdirs[transport])
                    return made
                except Exception as exc:  # noqa: BLE001 - every check of these runs reports it
                    failed = [pipeline.PipelineRun(transport=transport, topology=t) for t in topologies]
                    for run in failed:
                        run.errors.append(f"run_pipelines raised {type(exc).__name__}: {exc}")
                    return failed

            with concurrent.futures.ThreadPoolExecutor(PARALLEL_RUNS) as pool:
                for runs in pool.map(runs_of, transports):
                    _RUNS.update(((run.topology.name, run.transport), run) for run in runs)
        return _RUNS


@pytest.fixture(scope="session")
def pipeline_run(ipc, tmp_path_factory, request):
    def get(topology: str, transport: str) -> pipeline.PipelineRun:
        require(ipc, "pipeline")
        run = _all_runs(ipc, tmp_path_factory, request.session)[(topology, transport)]
        if run.unsupported:
            pytest.skip(f"the implementation has no {topology} topology: {run.unsupported}")
        return run

    return get


def _step(run: pipeline.PipelineRun) -> str:
    return (f"the implementation's own pipeline, {run.topology.name}, transport {run.transport} "
            f"selected as its users do ({pipeline.switch_value(run.topology, run.transport)!r})")


def _fail(ipc: Any, run: pipeline.PipelineRun, what: str, requirement: str, lines: list[str]) -> None:
    raise_failure(Failure(f"{what} ({run.topology.name} over {run.transport})", requirement, step=_step(run),
                          differences=lines, notes=_hops(run)), ipc)


def _hops(run: pipeline.PipelineRun) -> list[str]:
    driven = [f"hop driven: {hop}: {how}" for hop, how in sorted(run.hops.items())]
    return driven + [f"hop not driven: {hop}: {why}" for hop, why in sorted(run.not_driven.items())]


PER = ("topology", "transport")
CASES = {"topology": _topologies}


@check("Pipeline", per=PER, name="AnswersEveryRequest", cases=CASES)
def test_pipeline_answers_every_request(ipc, pipeline_run, topology, transport):
    """Liveness: no hop died and every request of the scenario was answered (HTTP 200)."""
    run = pipeline_run(topology, transport)
    lines = pipeline.liveness_failures(run)
    if lines:
        _fail(ipc, run, "the pipeline did not answer every request", "R-PIPE-5", lines)


@check("Pipeline", per=PER, name="SelectedTransportOnEverySocket", cases=CASES)
def test_pipeline_selected_transport(ipc, pipeline_run, topology, transport):
    """The transport the run selected the users' way is the one on every socket."""
    run = pipeline_run(topology, transport)
    lines = pipeline.transport_failures(run)
    if lines:
        _fail(ipc, run, f"frames of another transport than {transport}", "R-PIPE-3", lines)


@check("Pipeline", per=PER, name="DeliveredExactlyOnce", cases=CASES)
def test_pipeline_delivered_exactly_once(ipc, pipeline_run, topology, transport):
    run = pipeline_run(topology, transport)
    if run.errors and not run.links:
        fail(f"the run recorded nothing: {run.errors[0]}", "R-PIPE-2", step=_step(run), notes=_hops(run),
             kind="Failed", ipc=ipc)
    lines = pipeline.delivery_failures(run)
    if lines:
        _fail(ipc, run, "a message was not delivered exactly once", "R-PIPE-2", lines)


@check("Pipeline", per=PER, name="ConservesWhatWasSent", cases=CASES)
def test_pipeline_conserves(ipc, pipeline_run, topology, transport):
    """What the stub model produced reaches the client; what the client sent reaches the scheduler."""
    run = pipeline_run(topology, transport)
    if not run.produced:
        fail(f"the stub model produced nothing in this run: {'; '.join(run.errors) or 'no request arrived'}",
             "R-PIPE-1", step=_step(run), notes=_hops(run), kind="Failed", ipc=ipc)
    lines = pipeline.conservation_failures(run)
    if lines:
        _fail(ipc, run, "the pipeline lost or changed what crossed it", "R-PIPE-1", lines)


@check("Pipeline", per=("topology",), name="SameAcrossTransports", cases=CASES)
def test_pipeline_same_across_transports(ipc, pipeline_run, topology):
    """Every consumer-visible result of the msgpack run equals the pickle run's, field by field."""
    if len(ipc.transports) < 2:
        pytest.skip("needs both transports")
    pickled, packed = pipeline_run(topology, "pickle"), pipeline_run(topology, "msgpack")
    lines = pipeline.identity_failures(pickled, packed)
    if lines:
        _fail(ipc, packed, "results differ from the pickle run's", "R-PIPE-1", lines)


def _spread(ipc: Any) -> list[str]:
    return [t.name for t in pipeline.TOPOLOGIES if pipeline.baseline_of(t) != t]


@check("Pipeline", per=("topology", "transport"), name="SameAsBaseline", cases={"topology": _spread})
def test_pipeline_same_as_baseline(ipc, pipeline_run, topology, transport):
    """Every consumer-visible result of a multi-rank or multi-worker topology equals the
    single-rank run's of the same model over the same transport (routing, by load-balance method
    or by tokenizer worker, may never change what is answered)."""
    run = pipeline_run(topology, transport)
    baseline = pipeline_run(pipeline.baseline_of(run.topology).name, transport)
    lines = pipeline.identity_failures(baseline, run)
    if lines:
        _fail(ipc, run, f"results differ from the {baseline.topology.name} run's", "R-PIPE-1", lines)
