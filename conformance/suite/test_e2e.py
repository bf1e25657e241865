"""End to end (issue #4): the implementation's real server, once per transport, with its IPC tap on.

Opt-in: ``ipc-conformance run --e2e`` (pytest: ``--ipc-e2e``); only these: ``--e2e -- -k E2E``.
Each run starts the server (adapter capability ``launch_server``; others skip), sends the fixed
scenario (reference_tools/e2e/scenario.py), stops it with SIGTERM, then the checks read the
responses, every IPC message the tap recorded and the exported spans. One server at a time.
"""

from __future__ import annotations

import pytest

from conformance.plugin import check

pytestmark = pytest.mark.ipc_e2e

#: Data-parallel ranks of each run: the controller routes between two and broadcasts to both.
DP_SIZE = 2
TRACE_KINDS = ("encode", "generate", "stream")
PROCESSES = ("tokenizer_manager", "controller", "detokenizer")
_RUNS: dict = {}


@pytest.fixture(scope="session")
def e2e_run(ipc, tmp_path_factory):
    """The run of a transport (reference_tools.e2e.run_engine), started on first use, once per session."""

    def get(transport: str):
        if transport not in _RUNS:
            _RUNS[transport] = _start(ipc, transport, tmp_path_factory)
        run = _RUNS[transport]
        if isinstance(run, BaseException):
            if isinstance(run, NotImplementedError):
                pytest.skip(f"no E2E checks: {run} (adapter capability launch_server)")
            pytest.fail(f"the {transport} server run failed: {run}", pytrace=False)
        return run

    return get


def _start(ipc, transport, tmp_path_factory):
    from reference_tools.e2e import run_engine

    name = f"{transport}-dp{DP_SIZE}"
    workdir = tmp_path_factory.mktemp(f"e2e-{name}")
    try:
        return run_engine(name, transport, DP_SIZE, lambda: ipc.adapter.launch_server(transport, DP_SIZE, workdir))
    except Exception as exc:  # noqa: BLE001 - every check of this run reports it
        return exc


def _failures(lines: list[str], limit: int = 8) -> str:
    return "\n  " + "\n  ".join(lines[:limit]) + (f"\n  ... and {len(lines) - limit} more" if len(lines) > limit else "")


@check("E2E", per=("transport",), name="ServesScenario")
def test_e2e_serves_scenario(e2e_run, transport):
    run = e2e_run(transport)
    assert run.results, "the scenario recorded no responses"
    assert run.info.get("transport") == transport, f"the server says its transport is {run.info.get('transport')}"


@check("E2E", per=("transport",), name="ShutsDownCleanly")
def test_e2e_shuts_down_cleanly(e2e_run, transport):
    run = e2e_run(transport)
    assert run.shutdown == {"exit_code": 0, "hung": False, "orphans": {}, "ipc_dir_left": False}, run.shutdown


@check("E2E", per=("transport",), name="TappedMessagesConform")
def test_e2e_tapped_messages_conform(e2e_run, transport):
    """Every IPC message received is a struct of the catalogue, decodes, and re-encodes to the same bytes."""
    from reference_tools.e2e.checks import wire_failures

    run = e2e_run(transport)
    count = len(run.records)
    assert count > 50, f"the tap recorded only {count} IPC messages (the scenario sends hundreds)"
    failures = wire_failures(run.records)
    assert not failures, f"{len(failures)} tapped {transport} message(s) do not conform:" + _failures(failures)


@check("E2E", per=("transport",), name="LinksCarryTheirMessages")
def test_e2e_links_carry_their_messages(e2e_run, transport):
    from reference_tools.e2e.checks import link_failures

    failures = link_failures(e2e_run(transport).records, DP_SIZE)
    assert not failures, "the scenario did not exercise every link:" + _failures(failures)


@check("E2E", per=("transport",), name="NoWrapperPastReceive")
def test_e2e_no_wrapper_past_receive(e2e_run, transport):
    """No process handed a PickleWrapper downstream; time stats travelled wrapped (msgpack) and opened."""
    from reference_tools.e2e.checks import leftover_wrapper_failures, time_stats_failures, wrapped_on_wire

    run = e2e_run(transport)
    failures = leftover_wrapper_failures(run.records) + time_stats_failures(run.records)
    assert not failures, "PickleWrappers past a receive path:" + _failures(failures)
    if transport == "msgpack":  # else the check above proved nothing
        assert wrapped_on_wire(run.records)["controller<-tokenizer_manager"] > 0, "no PickleWrapper reached the controller"


@check("E2E", per=("kind", "transport"), name="OneLinkedTrace", cases={"kind": lambda ipc: list(TRACE_KINDS)})
def test_e2e_one_linked_trace(e2e_run, kind, transport):
    """The client's trace continues in every process, each span a child of the previous process's."""
    from reference_tools.e2e.checks import processes_in_trace, trace_failures
    from reference_tools.e2e.scenario import PARENT_SPAN, TRACE_IDS

    run = e2e_run(transport)
    chain = ("tokenizer_manager.request", "controller.dispatch", "scheduler.embed", "detokenizer.pass_embedding",
             "tokenizer_manager.response") if kind == "encode" else None
    failures = trace_failures(run.spans, TRACE_IDS[kind], PARENT_SPAN, *([chain] if chain else []))
    assert not failures, f"the {kind} request's trace is broken over {transport}:" + _failures(failures)
    procs = processes_in_trace(run.spans, TRACE_IDS[kind])
    assert procs >= set(PROCESSES) and any(p.startswith("scheduler_") for p in procs), sorted(procs)


@check("E2E", per=(), name="SameResponsesAcrossTransports")
def test_e2e_same_responses_across_transports(ipc, e2e_run, ipc_check_id):
    from reference_tools.e2e.scenario import comparable_results

    if len(ipc.transports) < 2:
        pytest.skip("needs both transports")
    expected, actual = (comparable_results(e2e_run(t).results) for t in ("pickle", "msgpack"))
    differing = sorted(k for k in expected if expected[k] != actual.get(k))
    assert not differing, (f"responses differ between pickle and msgpack in {differing}: "
                           + "; ".join(f"{k}: {expected[k]!r:.80} vs {actual.get(k)!r:.80}" for k in differing[:2]))
