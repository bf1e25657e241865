"""Per-request time stats and OpenTelemetry tracing across processes.

ReqTimeStats travels in the ``time_stats`` field of the request and output
structs. That field is typed PickleWrapper, so under msgpack the codec wraps it
on send and every receive path must unwrap it (exactly as upstream SGLang
0.5.23, whose TraceReqContext rides inside its time stats). What the wrapper
holds is ours to choose: a batch's stats travel as one TimeStatsBatch, whose
pickle is one call with a single msgpack blob, which the trusted unwrap opens by
making that call (pickle_wrapper.call_of_admitted) instead of running the memo scan
and the allow-list unpickler over a few dozen opcodes per request; one request's
stats pickle the same way (PackedReqTimeStats). It carries stage
timestamps and the W3C propagation carrier (``traceparent``) of the latest span,
so each process opens its span as a child of the previous process's span:

    client traceparent -> tokenizer_manager.request -> controller.dispatch
      -> scheduler.request -> detokenizer.decode -> tokenizer_manager.response

Spans go to ``<trace_dir>/<process>.jsonl`` (one JSON object per line) when a
trace directory is configured; otherwise tracing is off and only the incoming
header is passed along.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

import msgspec
from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACE_HEADERS = ("traceparent", "tracestate")
_propagator = TraceContextTextMapPropagator()


class ReqTimeStats(msgspec.Struct, array_like=True):
    """What the time_stats PickleWrapper holds for one request (a TimeStatsBatch of these in batch outputs)."""

    rid: str
    stamps: dict[str, float] = {}  # stage -> time.time()
    trace_carrier: dict[str, str] = {}  # W3C headers of the latest span
    external_trace_header: Optional[dict[str, str]] = None  # as the HTTP client sent it

    def mark(self, stage: str) -> "ReqTimeStats":
        self.stamps[stage] = time.time()
        return self

    def copy(self) -> "ReqTimeStats":
        return ReqTimeStats(self.rid, dict(self.stamps), dict(self.trace_carrier),
                            dict(self.external_trace_header) if self.external_trace_header else None)

    def latency(self, start: str, end: str) -> Optional[float]:
        if start in self.stamps and end in self.stamps:
            return self.stamps[end] - self.stamps[start]
        return None

    def __reduce__(self) -> tuple[type[PackedReqTimeStats], tuple[bytes]]:
        return (PackedReqTimeStats, (_pack_stats(self),))


_pack_stats = msgspec.msgpack.Encoder().encode
_unpack_stats = msgspec.msgpack.Decoder(list[Optional[ReqTimeStats]]).decode
_unpack_one = msgspec.msgpack.Decoder(ReqTimeStats).decode


class PackedReqTimeStats:
    """What one request's time stats pickle as: ``PackedReqTimeStats(b"<msgpack blob>")``, a call
    that returns the ReqTimeStats (typed and validated by msgspec). Like TimeStatsBatch, one call
    with one bytes argument, which the trusted unwrap opens without the unpickler
    (pickle_wrapper.call_of_admitted); a struct's own pickle is a few dozen opcodes for the
    unpickler and the memo scan, in the controller and the scheduler for every request."""

    __unpickle_safe__ = True

    def __new__(cls, blob: bytes) -> ReqTimeStats:  # type: ignore[misc]  # opens to the struct, by design
        return _unpack_one(blob)


class TimeStatsBatch(list[Optional[ReqTimeStats]]):
    """The time stats of a batch output, one entry (or None) per request: a list that pickles
    as one msgpack blob. Unpickling it builds typed ReqTimeStats through msgspec (which
    validates every field), so constructing it runs no code a payload can choose: the
    allow-list unpickler admits it as it admits data classes (``__unpickle_safe__``)."""

    __unpickle_safe__ = True

    def __init__(self, items: Iterable[Optional[ReqTimeStats]] | bytes = ()) -> None:
        if isinstance(items, (bytes, bytearray, memoryview)):
            items = _unpack_stats(items)
        super().__init__(items)

    def __reduce__(self) -> tuple[type[TimeStatsBatch], tuple[bytes]]:
        return (TimeStatsBatch, (_pack_stats(self),))


def trace_headers(headers: Any) -> Optional[dict[str, str]]:
    """The W3C trace headers of an incoming HTTP request (None when there are none)."""
    found = {k: headers[k] for k in TRACE_HEADERS if k in headers}
    return found or None


class JsonLinesSpanExporter(SpanExporter):
    """One JSON object per finished span, appended to a file (synchronously, so tests can read it)."""

    def __init__(self, path: Path, process: str) -> None:
        self.path = Path(path)
        self.process = process
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            for span in spans:
                self._file.write(json.dumps(span_record(span, self.process)) + "\n")
            self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()


def span_record(span: ReadableSpan, process: str) -> dict[str, Any]:
    ctx = span.get_span_context()
    assert ctx is not None, "a finished span has a context"
    return {
        "name": span.name,
        "process": process,
        "pid": os.getpid(),
        "trace_id": trace_api.format_trace_id(ctx.trace_id),
        "span_id": trace_api.format_span_id(ctx.span_id),
        "parent_id": trace_api.format_span_id(span.parent.span_id) if span.parent else None,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "attributes": dict(span.attributes or {}),
        "events": [e.name for e in span.events],
    }


def read_spans(trace_dir: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(Path(trace_dir).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return out


class Tracing:
    """This process's tracer. Disabled (every call a no-op) without a trace directory."""

    def __init__(self, process: str, trace_dir: Optional[str]) -> None:
        self.process = process
        self.enabled = trace_dir is not None
        self._provider: Optional[TracerProvider] = None
        if self.enabled:
            assert trace_dir is not None
            Path(trace_dir).mkdir(parents=True, exist_ok=True)
            resource = Resource.create({"service.name": "ipc-conformance-engine", "process.name": process,
                                        "process.pid": os.getpid()})
            self._provider = TracerProvider(resource=resource)
            exporter = JsonLinesSpanExporter(Path(trace_dir) / f"{process}.jsonl", process)
            self._provider.add_span_processor(SimpleSpanProcessor(exporter))
            self._tracer = self._provider.get_tracer("reference_impl.engine")

    def start_span(self, name: str, carrier: Optional[dict[str, str]], **attributes: Any) -> Optional[trace_api.Span]:
        """A span whose parent is the span named by carrier (a W3C traceparent), or a new trace."""
        if not self.enabled:
            return None
        parent = _propagator.extract(carrier or {})
        span = self._tracer.start_span(name, context=parent)
        span.set_attribute("process", self.process)
        for key, value in attributes.items():
            if value is not None:
                span.set_attribute(key, value)
        return span

    @staticmethod
    def carrier(span: Optional[trace_api.Span], fallback: Optional[dict[str, str]] = None) -> dict[str, str]:
        """The propagation carrier naming span (what the next process continues from)."""
        if span is None:
            return dict(fallback or {})
        out: dict[str, str] = {}
        _propagator.inject(out, context=trace_api.set_span_in_context(span))
        return out

    @contextlib.contextmanager
    def step(self, name: str, stats: Optional[ReqTimeStats], **attributes: Any) -> Iterator[Optional[trace_api.Span]]:
        """A short span continuing stats' trace; afterwards stats points at it."""
        span = self.start_span(name, stats.trace_carrier if stats else None, **attributes)
        try:
            yield span
        finally:
            if span is not None:
                span.end()
                if stats is not None:
                    stats.trace_carrier = self.carrier(span)

    def shutdown(self) -> None:
        if self._provider is not None:
            self._provider.shutdown()


def open_request_trace(tracing: Tracing, rid: str, trace_header: Optional[dict[str, str]],
                       **attributes: Any) -> tuple[ReqTimeStats, Optional[trace_api.Span]]:
    """The tokenizer manager's start of a request: its time stats and its span, a child of the
    client's span (trace_header: its W3C headers), whose carrier the time stats take along."""
    stats = ReqTimeStats(rid=rid, external_trace_header=trace_header, trace_carrier=dict(trace_header or {}))
    stats.mark("created")
    span = tracing.start_span("tokenizer_manager.request", trace_header, rid=rid, **attributes)
    stats.trace_carrier = Tracing.carrier(span, trace_header)
    return stats, span
