"""The implementation's own tracing, enabled, across real processes (SPEC R-TRACE-4; defect class:
trace-lost).

The adapter's ``run_traced`` (capability ``trace``; others skip) runs three processes, each with
the transport selected as the implementation's users select it: the tokenizer manager opens the
request's trace from the client's ``traceparent`` the engine's way and sends the request with its
own send over ZeroMQ; the data-parallel controller receives, unwraps and continues the trace and
forwards the request; a scheduler receives it and continues the trace. Every process exports its
spans. ``Trace.<Hop>.OneLinkedTrace.<transport>`` passes when every span that process exported
is in the client's trace, its first span (each span whose parent is not one of its own) is a
child of a span an earlier process exported (the tokenizer manager's: of the client's span), and
one of its spans is a child of, or links to, a span of the process just before it (SGLang parents
every process's thread span on the root span and links each stage to the previous one).
A context that carries the sending thread's current context instead of the request's span, or a
receiver that drops the carrier, starts a new trace in the next process: that hop fails.
One run per transport serves the three hops.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.adapters.trace import CLIENT_SPAN_ID, CLIENT_TRACE_ID, ROLES, Span, TraceRun, TraceRunError
from conformance.plugin import check
from conformance.suite.capability import require
from conformance.suite.failure import Failure, raise_failure
from conformance.suite.fields import wrapper_fields

#: Check subject -> the process (trace.ROLES) it judges.
HOPS = {"TokenizerManager": "tokenizer_manager", "Controller": "controller", "Scheduler": "scheduler"}
REQUEST = "TokenizedGenerateReqInput"
_RUNS: dict[tuple[str, str], Any] = {}
STEP = ("the implementation's own tracing, enabled, in three processes: tokenizer manager -> data-parallel "
        "controller -> scheduler, each sending with its own send and receiving with its own receive and unwrap "
        "over ZeroMQ ({transport}, selected in each process's environment)")


@pytest.fixture(scope="session")
def traced_run(ipc, tmp_path_factory):
    """The chain of a transport (the adapter's run_traced), run on first use, once per session."""

    def get(transport: str) -> TraceRun:
        require(ipc, "trace")
        key = (ipc.adapter.label, transport)
        if key not in _RUNS:
            _RUNS[key] = _run(ipc, transport, tmp_path_factory.mktemp(f"trace-{transport}"))
        run: Any = _RUNS[key]
        if isinstance(run, BaseException):
            raise_failure(Failure(f"the traced chain did not run over {transport}: {run}", "R-TRACE-4",
                                  STEP.format(transport=transport), kind="Failed"), ipc)
        assert isinstance(run, TraceRun)
        return run

    return get


def _run(ipc: Any, transport: str, workdir: Any) -> Any:
    request = ipc.instance(REQUEST, "typical")
    request.rid = f"trace-{transport}"
    if hasattr(request, "routed_dp_rank"):  # the controller routes it (a scheduler of its own choice)
        request.routed_dp_rank = None
    for name in wrapper_fields(ipc.manifest.structs[REQUEST]):  # the implementation sets time_stats
        setattr(request, name, None)
    try:
        return ipc.adapter.run_traced(request, transport, workdir)
    except TraceRunError as exc:  # a hung or failed process: every hop of this transport reports it
        return exc


def _named(spans: list[Span], limit: int = 3) -> str:
    shown = ", ".join(f"{s.span_id} {s.name!r}" for s in spans[:limit])
    return shown + (f", ... {len(spans) - limit} more" if len(spans) > limit else "")


def hop_failures(run: TraceRun, role: str) -> list[str]:
    """Why `role`'s spans are not part of the request's one linked trace (empty: they are)."""
    index = ROLES.index(role)
    mine = run.of(role)
    if not mine:
        return [f"{role}: expected its spans in trace {CLIENT_TRACE_ID}, got no span (its tracing exported nothing)"]
    failures = [f"{role} span {s.name!r} (pid {s.pid}): expected trace {CLIENT_TRACE_ID}, got trace {s.trace_id}"
                for s in mine if s.trace_id != CLIENT_TRACE_ID]
    own = {s.span_id for s in mine}
    earlier = [s for r in ROLES[:index] for s in run.of(r)]
    parents = {s.span_id for s in earlier} if index else {CLIENT_SPAN_ID}
    expected = (f"a span of {'/'.join(ROLES[:index])} ({_named(earlier)})" if index
                else f"the client's span {CLIENT_SPAN_ID}")
    for span in mine:
        if span.parent_id not in own and span.parent_id not in parents:
            got = span.parent_id or "none (a new trace)"
            failures.append(f"{role} span {span.name!r} (pid {span.pid}), its first: expected parent {expected}, "
                            f"got parent {got} in trace {span.trace_id}")
    previous = run.of(ROLES[index - 1]) if index else []
    ids = {s.span_id for s in previous}
    if ids and not any(s.parent_id in ids or ids & set(s.links) for s in mine):
        failures.append(f"{role}: expected a span that is a child of, or links to, a span of {ROLES[index - 1]} "
                        f"({_named(previous)}), got none (the trace skips the {ROLES[index - 1]}: the carrier it "
                        "forwarded is not its own)")
    return failures


@check("Trace", per=("hop", "transport"), name="OneLinkedTrace", cases={"hop": lambda ipc: list(HOPS)})
def test_one_linked_trace(ipc, traced_run, hop, transport):
    """Every span of the request in the client's trace; each process's first span a child of an earlier one's."""
    run = traced_run(transport)
    role = HOPS[hop]
    failures = hop_failures(run, role)
    if failures:
        pids = ", ".join(f"{r} {run.pids.get(r)}" for r in run.roles)
        raise_failure(Failure(f"{hop}: the request's spans are not one linked trace over {transport}", "R-TRACE-4",
                              STEP.format(transport=transport), failures,
                              notes=[f"client traceparent: {run.traceparent}", f"processes: {pids}",
                                     "spans: " + "; ".join(f"{s.process} {s.name!r} {s.trace_id}/{s.span_id} "
                                                           f"parent {s.parent_id}" for s in run.spans)[:1500]]), ipc)
