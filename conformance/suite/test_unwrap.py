"""PickleWrapper-typed fields (time stats, trace context) over a process boundary: the sender
wraps, the trusted receiver decodes and unwraps, and nothing wrapped is handed on; a trace context
survives two hops with a re-wrap between them. These use the adapter's unwrap function; the
ReceivePath checks run an engine's own receive paths."""

from __future__ import annotations

from conformance.plugin import check
from conformance.suite.capability import require
from conformance.suite.failure import Failure, fail, raise_failure
from conformance.suite.fields import find_wrappers, opaque_structs, wrapper_fields

TRACE = {
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "tracestate": "vendor=opaque",
}


def _hop(ipc, obj, transport):
    """One process boundary: the sender wraps, the trusted receiver decodes and unwraps."""
    return ipc.adapter.unwrap(ipc.adapter.decode(ipc.adapter.encode(ipc.adapter.wrap(obj), transport), transport))


@check("Unwrap", per=("struct", "transport"), name="NoWrapperLeft", cases={"struct": opaque_structs})
def test_receive_path_unwraps(ipc, struct, transport):
    require(ipc, "unwrap")
    value = ipc.instance(struct, "typical")
    fields = wrapper_fields(ipc.manifest.structs[struct])
    for name in fields:
        setattr(value, name, {"created": 1.5, "field": name})
    got = _hop(ipc, value, transport)
    step = f"the implementation's wrap and encode, then its decode and unwrap (a trusted receive path) over {transport}"
    left = find_wrappers(got)
    if left:
        raise_failure(Failure(f"a receive path handed on PickleWrappers at {left} ({transport})", "R-PW-3", step,
                              [f"{path}: expected the unwrapped object, got a PickleWrapper" for path in left],
                              value=value), ipc)
    lost = [f"$.{name}: expected {{'created': 1.5, 'field': {name!r}}}, got {getattr(got, name)!r:.80}"
            for name in fields if getattr(got, name) != {"created": 1.5, "field": name}]
    if lost:
        raise_failure(Failure(f"{struct}.{lost[0][2:].split(':')[0]} did not survive", "R-PW-1 … R-PW-3", step, lost,
                              value=value), ipc)


@check("Trace", per=("struct", "transport"), name="ContextSurvivesForwarding", cases={"struct": opaque_structs})
def test_trace_context_survives_forwarding(ipc, struct, transport):
    """tokenizer -> data-parallel controller -> scheduler: two hops, a re-wrap between them."""
    require(ipc, "unwrap")
    field = wrapper_fields(ipc.manifest.structs[struct])[0]
    value = ipc.instance(struct, "typical")
    setattr(value, field, {"trace_context": dict(TRACE), "created": 1.5})
    forwarded = _hop(ipc, _hop(ipc, value, transport), transport)
    got = getattr(forwarded, field)
    if not (isinstance(got, dict) and got.get("trace_context") == TRACE):
        fail(f"trace context lost over two {transport} hops: {type(got).__name__} {got!r:.200}", "R-TRACE-3",
             step=(f"the implementation's wrap, encode, decode and unwrap over {transport}, twice (tokenizer -> "
                   "controller -> scheduler, a re-wrap between the hops)"),
             differences=[f"$.{field}['trace_context']: expected {TRACE!r}, got "
                          f"{got.get('trace_context') if isinstance(got, dict) else got!r:.120}"],
             value=value, ipc=ipc)
