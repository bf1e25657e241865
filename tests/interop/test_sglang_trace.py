"""SGLang's own tracing, enabled, across three real processes (conformance/adapters/sglang_trace.py;
run in `tox -e upstream`): one linked trace under both transports, and the OneLinkedTrace check
fails when TraceReqContext.__getstate__ carries the current context instead of the root span's,
or __setstate__ drops the carrier (tests/interop/sglang_trace_plants.py). About 30 s a run."""

from __future__ import annotations

import pytest

from conformance.adapters.trace import CLIENT_TRACE_ID, ROLES
from conformance.schema.values import ValueBuilder
from conformance.suite import test_trace as trace_checks  # not its check function: pytest would collect it

pytest.importorskip("sglang.srt.managers.io_struct", reason="needs SGLang: tox -e upstream")
pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
                    reason="SGLang's tracing needs opentelemetry-exporter-otlp (tox -e upstream installs it)")
pytestmark = pytest.mark.sglang


def _verdicts(adapter, transport, tmp_path):
    request = ValueBuilder(adapter.live_manifest(), adapter.classes(), "typical").instance("TokenizedGenerateReqInput")
    request.rid, request.time_stats, request.routed_dp_rank = f"trace-{transport}", None, None
    run = adapter.run_traced(request, transport, tmp_path)
    out = {}
    for hop in trace_checks.HOPS:
        try:
            trace_checks.test_one_linked_trace(None, lambda t: run, hop, transport)
            out[hop] = ""
        except AssertionError as exc:
            out[hop] = str(exc).splitlines()[0]
    return run, out


@pytest.mark.parametrize("transport", ["pickle", "msgpack"])
def test_sglang_keeps_one_linked_trace_across_processes(transport, tmp_path):
    from conformance.adapters.sglang import SGLangAdapter

    run, verdicts = _verdicts(SGLangAdapter(), transport, tmp_path)
    assert verdicts == dict.fromkeys(trace_checks.HOPS, ""), verdicts
    assert {s.process for s in run.spans} == set(ROLES) and {s.trace_id for s in run.spans} == {CLIENT_TRACE_ID}


@pytest.mark.parametrize("plant, transport", [("GetstateInjectsCurrentContext", "msgpack"),
                                              ("SetstateDropsCarrier", "pickle")])
def test_one_linked_trace_fails_on_planted_sglang_bugs(plant, transport, tmp_path):
    from tests.interop import sglang_trace_plants

    _, verdicts = _verdicts(getattr(sglang_trace_plants, plant)(), transport, tmp_path)
    assert verdicts["TokenizerManager"] == "", verdicts
    assert verdicts["Controller"].startswith(f"Controller: the request's spans are not one linked trace over "
                                             f"{transport} at controller span "), verdicts
    assert verdicts["Scheduler"], verdicts  # its context arrives disabled: it exports nothing
