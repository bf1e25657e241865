"""End to end: the implementation's real server, once per transport, with its IPC tap on.

Opt-in: ``ipc-conformance run --e2e`` (pytest: ``--ipc-e2e``); only these: ``--e2e -- -k E2E``.
Each run is the adapter's ``run_e2e`` (capability ``e2e``; others skip): it starts the server,
sends the fixed scenario, stops it with SIGTERM and returns what happened. The checks judge
those facts: the responses, every IPC message the tap recorded (decoded with the adapter's own
decode) and the exported spans. One server at a time.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.plugin import check
from conformance.suite import tapped
from conformance.suite.capability import require
from conformance.suite.failure import fail
from conformance.transport import TRANSPORTS

pytestmark = pytest.mark.ipc_e2e

#: Data-parallel ranks of each run: the controller routes between two and broadcasts to both.
DP_SIZE = 2
TRACE_KINDS = ("encode", "generate", "stream")
PROCESSES = ("tokenizer_manager", "controller", "detokenizer")
_RUNS: dict[str, Any] = {}


@pytest.fixture(scope="session")
def e2e_run(ipc, tmp_path_factory):
    """The run of a transport (the adapter's run_e2e), made on first use, once per session."""

    def get(transport: str):
        require(ipc, "e2e")
        if transport not in _RUNS:
            _RUNS[transport] = _start(ipc, transport, tmp_path_factory)
        run = _RUNS[transport]
        if isinstance(run, BaseException):
            fail(f"the {transport} server run failed: {run!r}", "R-TRN-1", kind="Failed",
                 step=_step(transport, "starting the server, sending the scenario, stopping it"))
        return run

    return get


def _start(ipc, transport, tmp_path_factory):
    workdir = tmp_path_factory.mktemp(f"e2e-{transport}-dp{DP_SIZE}")
    try:
        return ipc.adapter.run_e2e(transport, DP_SIZE, workdir)
    except Exception as exc:  # noqa: BLE001 - every check of this run reports it
        return exc


def _responses(run, comparable: bool = False) -> dict[str, Any]:
    """The scenario's responses; a check that needs them fails if the scenario did not finish
    (checks of the tap and the spans still run on what was recorded)."""
    if run.scenario_error:
        fail(f"the scenario of the {run.transport} run failed: {run.scenario_error}", "R-TRN-1", kind="Failed",
             step=_step(run.transport, "the fixed scenario's requests and their responses"))
    responses: dict[str, Any] = run.comparable_responses if comparable else run.responses
    return responses


def _step(transport: str, what: str) -> str:
    return f"the implementation's server (Adapter.run_e2e) over {transport}, its IPC tap on: {what}"


def _failures(lines: list[str], limit: int = 8) -> list[str]:
    """The lines of a failure after its first: what each tapped message or span got wrong."""
    more = [f"... and {len(lines) - limit} more"] if len(lines) > limit else []
    return [*lines[:limit], *more]


@check("E2E", per=("transport",), name="ServesScenario")
def test_e2e_serves_scenario(e2e_run, transport):
    run = e2e_run(transport)
    if not _responses(run):
        fail("the scenario recorded no responses", "R-TRN-1", step=_step(transport, "the scenario's responses"))
    if run.info.get("transport") != transport:
        fail(f"the server says its transport is {run.info.get('transport')}", "R-TRN-1",
             step=_step(transport, "the transport the server reports"))


@check("E2E", per=("transport",), name="ShutsDownCleanly")
def test_e2e_shuts_down_cleanly(e2e_run, transport):
    run = e2e_run(transport)
    clean = {"exit_code": 0, "hung": False, "orphans": {}, "ipc_dir_left": False}
    if run.shutdown != clean:
        fail(str(run.shutdown), "R-TRN-1", step=_step(transport, "stopping the server with SIGTERM"),
             differences=[f"$.{k}: expected {v!r}, got {run.shutdown.get(k)!r}" for k, v in clean.items()
                          if run.shutdown.get(k) != v])


@check("E2E", per=("transport",), name="TappedMessagesConform")
def test_e2e_tapped_messages_conform(ipc, e2e_run, transport):
    """Every IPC message received is a struct of the catalogue, decodes, and re-encodes to the same bytes."""
    run = e2e_run(transport)
    count = len(run.records)
    if count <= 50:
        fail(f"the tap recorded only {count} IPC messages (the scenario sends hundreds)", "R-MSG-6",
             step=_step(transport, "the messages its tap recorded"))
    failures = tapped.wire_failures(run.records, ipc.adapter)
    if failures:
        fail(f"{len(failures)} tapped {transport} message(s) do not conform:", "R-MSG-9", notes=_failures(failures),
             step=_step(transport, "each tapped message decoded with the implementation's decode, encoded again"))


@check("E2E", per=("transport",), name="LinksCarryTheirMessages")
def test_e2e_links_carry_their_messages(ipc, e2e_run, transport):
    run = e2e_run(transport)
    failures = tapped.link_failures(run.records, ipc.adapter, run.link_messages)
    if failures:
        fail("the scenario did not exercise every link:", "R-MSG-6", notes=_failures(failures),
             step=_step(transport, "the messages its tap recorded on each link"))


@check("E2E", per=("transport",), name="NoWrapperPastReceive")
def test_e2e_no_wrapper_past_receive(ipc, e2e_run, transport):
    """No process handed a PickleWrapper downstream; time stats travelled wrapped (msgpack) and opened."""
    run = e2e_run(transport)
    failures = tapped.leftover_wrapper_failures(run.records) + tapped.time_stats_failures(run.records, ipc.adapter)
    if failures:
        fail("PickleWrappers past a receive path:", "R-PW-3", notes=_failures(failures),
             step=_step(transport, "the messages each process handed downstream, as its tap recorded them"))
    if transport == "msgpack":  # else the check above proved nothing
        wrapped = tapped.wrapped_on_wire(run.records, ipc.adapter)
        if wrapped["controller<-tokenizer_manager"] <= 0:
            fail("no PickleWrapper reached the controller", "R-PW-1",
                 step=_step(transport, "the messages its tap recorded on controller<-tokenizer_manager"))


@check("E2E", per=("kind", "transport"), name="OneLinkedTrace", cases={"kind": lambda ipc: list(TRACE_KINDS)})
def test_e2e_one_linked_trace(e2e_run, kind, transport):
    """The client's trace continues in every process, each span a child of the previous process's."""
    run = e2e_run(transport)
    trace_id = run.trace_ids[kind]
    failures = tapped.trace_failures(run.spans, trace_id, run.parent_span, run.trace_chains[kind])
    if failures:
        fail(f"the {kind} request's trace is broken over {transport}:", "R-TRACE-2", notes=_failures(failures),
             step=_step(transport, f"the spans exported for the {kind} request"))
    procs = tapped.processes_in_trace(run.spans, trace_id)
    if not (procs >= set(PROCESSES) and any(p.startswith("scheduler_") for p in procs)):
        missing = sorted(set(PROCESSES) - procs) + ([] if any(p.startswith("scheduler_") for p in procs)
                                                     else ["scheduler_*"])
        fail(str(sorted(procs)), "R-TRACE-2", step=_step(transport, f"the processes in the {kind} request's trace"),
             differences=[f"{name}: no span in the trace" for name in missing])


@check("E2E", per=(), name="SameResponsesAcrossTransports")
def test_e2e_same_responses_across_transports(ipc, e2e_run, ipc_check_id):
    if len(ipc.transports) < 2:
        pytest.skip("needs both transports")
    expected, actual = (_responses(e2e_run(t), comparable=True) for t in TRANSPORTS)
    differing = sorted(k for k in expected if expected[k] != actual.get(k))
    if differing:
        fail(f"responses differ between pickle and msgpack in {differing}: "
             + "; ".join(f"{k}: {expected[k]!r:.80} vs {actual.get(k)!r:.80}" for k in differing[:2]), "R-NORM-1",
             step="the fixed scenario's responses of the pickle server run and the msgpack one",
             notes=[f"{k}: pickle {expected[k]!r:.200} vs msgpack {actual.get(k)!r:.200}" for k in differing])
