"""SGLang with a tracing bug planted in every process of the traced chain (trace_prelude runs
before SGLang's code there), to show that ``Trace.<Hop>.OneLinkedTrace`` catches it:

    ipc-conformance run --impl tests.interop.sglang_trace_plants:GetstateInjectsCurrentContext -- -k OneLinkedTrace
"""

from __future__ import annotations

from conformance.adapters.sglang import SGLangAdapter

#: TraceReqContext.__getstate__ puts the sending thread's *current* context into the carrier
#: instead of the request's root span (nothing is current: the carrier is empty).
INJECT_CURRENT_CONTEXT = """
from opentelemetry import propagate
from sglang.srt.observability import trace as _trace
_getstate = _trace.TraceReqContext.__getstate__
def _planted_getstate(self):
    state = _getstate(self)
    if state and "root_span_context" in state:
        carrier = {}
        propagate.inject(carrier)  # the current context, not self.root_span_context
        state["root_span_context"] = carrier
    return state
_trace.TraceReqContext.__getstate__ = _planted_getstate
"""

#: TraceReqContext.__setstate__ drops the carrier it received.
SETSTATE_DROPS_CARRIER = """
from sglang.srt.observability import trace as _trace
_setstate = _trace.TraceReqContext.__setstate__
def _planted_setstate(self, state):
    _setstate(self, {**state, "root_span_context": {}})
_trace.TraceReqContext.__setstate__ = _planted_setstate
"""


class GetstateInjectsCurrentContext(SGLangAdapter):
    trace_prelude = INJECT_CURRENT_CONTEXT


class SetstateDropsCarrier(SGLangAdapter):
    trace_prelude = SETSTATE_DROPS_CARRIER
