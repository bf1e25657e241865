"""The reference engine's own tracing, enabled, across real processes (the reference adapter's
capability ``trace``; run by conformance/adapters/trace.py as ``python -m reference_tools.trace_hops
<role> <workdir> <ipc_dir>``).

Each process takes its transport from ``IPC_TRANSPORT`` in its environment (the engine's own
switch, codec.default_transport) and traces as the engine does when ``EngineConfig.trace_dir`` is
set (tracing.Tracing: OpenTelemetry SDK, its JSON-lines exporter), then runs the engine's code:

    tokenizer_manager  tracing.open_request_trace (TokenizerManager._new_state's), the request's
                       time_stats = those stats, ipc.Sender.send (zmq_io.send: wrap, encode)
    controller         the engine's DataParallelController, one step: its Receiver (decode,
                       unwrap_on_receive), dispatch (its span, Tracing.step) and send to the rank
    scheduler          scheduler_receiver (decode, unwrap), then the span Scheduler.add_request
                       opens ("scheduler.request", a child of the carrier in the time stats)

and writes the spans its exporter wrote.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import zmq

from conformance.adapters.trace import driver_args, endpoint, read_request, recv_timeout_ms, write_spans
from reference_impl import codec
from reference_impl.engine.config import TOKENIZER_MANAGER, EngineConfig, IpcNames, scheduler_name
from reference_impl.engine.tracing import Tracing, open_request_trace

#: After its last send a process closes the socket lingering until the message has left (the
#: engine's senders close with linger 0: its processes outlive their sends; these exit right after).
LINGER_MS = 100_000


def _names(ipc_dir: str) -> IpcNames:
    return IpcNames(ipc_dir=ipc_dir, tokenizer_manager=endpoint(ipc_dir, "tokenizer_manager"),
                    controller=endpoint(ipc_dir, "controller"), detokenizer=endpoint(ipc_dir, "detokenizer"),
                    schedulers=(endpoint(ipc_dir, "scheduler"),))


def _config(workdir: Path, role: str) -> EngineConfig:
    return EngineConfig(transport=codec.resolve_transport(None), trace_dir=str(workdir / f"{role}.otel"))


def tokenizer_manager(workdir: Path, ipc_dir: str) -> None:
    from reference_impl.engine.ipc import Sender

    config = _config(workdir, "tokenizer_manager")
    assert config.transport is not None
    request, traceparent = read_request(workdir)
    tracing = Tracing(TOKENIZER_MANAGER, config.trace_dir)
    ctx: zmq.Context[Any] = zmq.Context()
    sender = Sender(ctx, _names(ipc_dir).controller, config.transport)
    stats, span = open_request_trace(tracing, request.rid, {"traceparent": traceparent}, kind="generate",
                                     transport=config.transport)
    request.time_stats = stats
    sender.send(request)
    if span is not None:
        span.end()
    sender.sock.close(linger=LINGER_MS)
    ctx.term()
    tracing.shutdown()


def controller(workdir: Path, ipc_dir: str) -> None:
    from reference_impl.engine.controller import DataParallelController

    engine = DataParallelController(_config(workdir, "controller"), _names(ipc_dir))
    if engine.step(timeout_ms=recv_timeout_ms()) is None:
        raise SystemExit(f"the controller received nothing within {recv_timeout_ms()} ms")
    for worker in engine.workers:
        worker.sock.close(linger=LINGER_MS)
    engine.close()


def scheduler(workdir: Path, ipc_dir: str) -> None:
    from reference_impl.engine.scheduler import scheduler_receiver
    from reference_impl.engine.tap import Tap

    config = _config(workdir, "scheduler")
    name = scheduler_name(0)
    tracing = Tracing(name, config.trace_dir)
    ctx: zmq.Context[Any] = zmq.Context()
    receiver = scheduler_receiver(ctx, config, _names(ipc_dir), 0, Tap(None, name))
    obj = receiver.recv(timeout_ms=recv_timeout_ms())
    if obj is None:
        raise SystemExit(f"the scheduler received nothing within {recv_timeout_ms()} ms")
    stats = obj.time_stats
    span = tracing.start_span("scheduler.request", stats.trace_carrier if stats else None, rid=obj.rid, dp_rank=0)
    if span is not None:
        span.end()
    receiver.close()
    ctx.term()
    tracing.shutdown()


def _export(workdir: Path, role: str) -> None:
    """The spans the engine's exporter wrote (tracing.JsonLinesSpanExporter), as the runner reads them."""
    spans = []
    for path in sorted((workdir / f"{role}.otel").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                spans.append({key: record[key] for key in ("name", "trace_id", "span_id", "parent_id", "start_ns")})
    write_spans(workdir, role, spans)


def main() -> None:
    role, workdir, ipc_dir = driver_args()
    logging.basicConfig(level=logging.WARNING)
    {"tokenizer_manager": tokenizer_manager, "controller": controller, "scheduler": scheduler}[role](workdir, ipc_dir)
    _export(workdir, role)


if __name__ == "__main__":
    main()
