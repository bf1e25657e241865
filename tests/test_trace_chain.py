"""The reference engine's own tracing across three real processes (conformance/adapters/trace.py,
reference_tools/trace_hops.py), and proof that ``Trace.<Hop>.OneLinkedTrace`` fails when the
engine's tracing loses the request's trace at a process boundary (defect class: trace-lost).

The bugs are planted in each process of the chain (``trace_prelude``: the mutants'
TraceCarrierFromCurrentContext and TraceCarrierDroppedOnReceive); the check function is called
with the run, as the suite does."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.adapters.trace import CLIENT_TRACE_ID, ROLES, TraceRun, TraceRunError
from conformance.schema.values import ValueBuilder
from conformance.suite import test_trace as trace_checks  # not its check function: pytest would collect it
from reference_tools.adapter import ReferenceAdapter
from reference_tools.proof.mutants import (
    TraceCarrierDroppedOnReceive,
    TraceCarrierFromCurrentContext,
    TraceCarrierNotAdvanced,
)

HOPS = trace_checks.HOPS


def _run(adapter: ReferenceAdapter, transport: str, tmp_path: Path) -> TraceRun:
    request = ValueBuilder(adapter.live_manifest(), adapter.classes(), "typical").instance("TokenizedGenerateReqInput")
    request.rid, request.time_stats, request.routed_dp_rank = f"trace-{transport}", None, None
    return adapter.run_traced(request, transport, tmp_path)


def _verdicts(run: TraceRun, transport: str) -> dict[str, str]:
    """hop -> "" (passed) or the first line of the check's failure."""
    out = {}
    for hop in HOPS:
        try:
            trace_checks.test_one_linked_trace(None, lambda t: run, hop, transport)
            out[hop] = ""
        except AssertionError as exc:
            out[hop] = str(exc).splitlines()[0]
    return out


@pytest.mark.parametrize("transport", ["pickle", "msgpack"])
def test_reference_keeps_one_linked_trace_across_processes(transport, tmp_path):
    run = _run(ReferenceAdapter(), transport, tmp_path)
    assert _verdicts(run, transport) == dict.fromkeys(HOPS, "")
    assert {s.process for s in run.spans} == set(ROLES) and {s.trace_id for s in run.spans} == {CLIENT_TRACE_ID}
    assert len({s.pid for s in run.spans}) == 3  # three processes


def test_check_fails_when_the_carrier_is_the_current_context(monkeypatch, tmp_path):
    adapter = ReferenceAdapter()
    monkeypatch.setattr(adapter, "trace_prelude", TraceCarrierFromCurrentContext.trace_prelude)
    verdicts = _verdicts(_run(adapter, "msgpack", tmp_path), "msgpack")
    assert verdicts["TokenizerManager"] == ""
    for hop in ("Controller", "Scheduler"):
        assert verdicts[hop].startswith(f"{hop}: the request's spans are not one linked trace over msgpack at "
                                        f"{HOPS[hop]} span "), verdicts[hop]
        assert f"expected trace {CLIENT_TRACE_ID}, got trace " in verdicts[hop]


def test_check_fails_when_the_receiver_drops_the_carrier(monkeypatch, tmp_path):
    adapter = ReferenceAdapter()
    monkeypatch.setattr(adapter, "trace_prelude", TraceCarrierDroppedOnReceive.trace_prelude)
    verdicts = _verdicts(_run(adapter, "pickle", tmp_path), "pickle")
    assert verdicts["TokenizerManager"] == "" and verdicts["Controller"] and verdicts["Scheduler"], verdicts


def test_check_fails_when_the_controller_forwards_the_carrier_it_received(monkeypatch, tmp_path):
    adapter = ReferenceAdapter()
    monkeypatch.setattr(adapter, "trace_prelude", TraceCarrierNotAdvanced.trace_prelude)
    verdicts = _verdicts(_run(adapter, "msgpack", tmp_path), "msgpack")
    assert verdicts["TokenizerManager"] == verdicts["Controller"] == "", verdicts
    assert verdicts["Scheduler"].startswith("Scheduler: the request's spans are not one linked trace over msgpack at "
                                            "scheduler: expected a span that is a child of, or links to, a span of "
                                            "controller "), verdicts


def test_a_hung_process_is_killed_and_named_in_one_line(monkeypatch, tmp_path):
    adapter = ReferenceAdapter()
    monkeypatch.setattr(adapter, "trace_prelude", "import sys, time\nif sys.argv[1] == 'controller': time.sleep(600)")
    monkeypatch.setattr(adapter, "trace_timeout_s", 8.0)
    with pytest.raises(TraceRunError) as caught:
        _run(adapter, "msgpack", tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "the controller process (pid " in message and "hung: killed after 8 s" in message
