"""SGLang's own request tracing, enabled, across real processes (capability ``trace``; run by
conformance/adapters/trace.py as ``python -m conformance.adapters.sglang_trace <role> ...``).

Each process selects its transport as SGLang's users do (``SGLANG_USE_PICKLE_IPC`` in its
environment before SGLang is imported), initialises tracing with SGLang's own
``process_tracing_init`` (only its OTLP exporter is replaced by an in-memory one) and names its
thread with ``trace_set_thread_info``, then runs upstream's code for its step:

    tokenizer_manager  APIServerReqTimeStats.init_trace_ctx(rid, None, external_trace_header),
                       set_created_time / set_tokenize_finish_time / set_api_server_dispatch_time,
                       wrap_pickle_fields, sock_send, set_api_server_dispatch_finish_time (as
                       TokenizerManager._init_req_state and _send_one_request do)
    controller         sock_recv, DataParallelController.dispatching_with_trace (new_from_obj of
                       the unwrapped time stats, its dispatch span, wrap_as_pickle; its dispatch
                       is sock_send to the scheduler)
    scheduler          sock_recv, SchedulerRequestReceiver.unwrap_pickle_wrapper,
                       SchedulerReqTimeStats.new_from_obj (as Req.__init__), set_scheduler_recv_time,
                       set_wait_queue_entry_time, set_completion_time

and writes the spans its tracer provider exported. The trace context crosses each process
boundary the way SGLang sends it: pickled inside the time stats (TraceReqContext.__getstate__ /
__setstate__), inside a PickleWrapper under msgpack.
"""

from __future__ import annotations

import os
import time
import types
from pathlib import Path
from typing import Any

from conformance.adapters.trace import (
    driver_args,
    endpoint,
    otel_span_record,
    read_request,
    recv_timeout_ms,
    write_spans,
)

THREAD_LABELS = {"tokenizer_manager": "Tokenizer Manager", "controller": "DP Controller", "scheduler": "Scheduler"}


def _init_tracing(role: str) -> Any:
    """SGLang's process_tracing_init with an in-memory exporter; returns the exporter."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from sglang.srt.observability import trace as sgl_trace

    exporter = InMemorySpanExporter()
    sgl_trace.get_otlp_span_exporter = lambda endpoint: exporter  # the exporter only
    sgl_trace.process_tracing_init("in-memory", "ipc-conformance")
    sgl_trace.trace_set_thread_info(THREAD_LABELS[role])
    return exporter


def _export(workdir: Path, role: str, exporter: Any) -> None:
    from opentelemetry import trace

    provider: Any = trace.get_tracer_provider()
    provider.force_flush()
    write_spans(workdir, role, [otel_span_record(span) for span in exporter.get_finished_spans()])


def _recv(sock: Any, io: Any) -> Any:
    import zmq

    if not sock.poll(recv_timeout_ms(), zmq.POLLIN):
        raise SystemExit(f"received nothing within {recv_timeout_ms()} ms")
    return io.sock_recv(sock)


def tokenizer_manager(workdir: Path, ipc_dir: str, io: Any, ctx: Any) -> None:
    import zmq
    from sglang.srt.observability.req_time_stats import APIServerReqTimeStats

    request, traceparent = read_request(workdir)
    time_stats = APIServerReqTimeStats()
    time_stats.init_trace_ctx(request.rid, None, {"traceparent": traceparent})
    time_stats.set_created_time(time.perf_counter())
    time_stats.set_tokenize_finish_time()
    request.time_stats = time_stats
    time_stats.set_api_server_dispatch_time()
    request.wrap_pickle_fields()
    sock = ctx.socket(zmq.PUSH)
    sock.connect(endpoint(ipc_dir, "controller"))
    io.sock_send(sock, request)
    request.time_stats = time_stats
    time_stats.set_api_server_dispatch_finish_time()
    time_stats.set_finished_time()
    sock.close()  # lingers until the controller has the message


def controller(workdir: Path, ipc_dir: str, io: Any, ctx: Any) -> None:
    import zmq
    from sglang.srt.managers.data_parallel_controller import DataParallelController

    pull = ctx.socket(zmq.PULL)
    pull.bind(endpoint(ipc_dir, "controller"))
    push = ctx.socket(zmq.PUSH)
    push.connect(endpoint(ipc_dir, "scheduler"))
    req = _recv(pull, io)
    # What dispatching_with_trace reads of the controller: no load budget refresh; its dispatch
    # (round robin to one rank) is the send to the scheduler.
    rig = types.SimpleNamespace(refresh_load_budget_on_dispatch=False,
                                dispatching=lambda r: io.sock_send(push, r),
                                dispatch_health_check=lambda r: io.sock_send(push, r))
    DataParallelController.dispatching_with_trace(rig, req)
    push.close()
    pull.close()


def scheduler(workdir: Path, ipc_dir: str, io: Any, ctx: Any) -> None:
    import zmq
    from sglang.srt.managers.scheduler_components.request_receiver import SchedulerRequestReceiver
    from sglang.srt.observability.req_time_stats import SchedulerReqTimeStats

    pull = ctx.socket(zmq.PULL)
    pull.bind(endpoint(ipc_dir, "scheduler"))
    reqs = [_recv(pull, io)]
    SchedulerRequestReceiver.unwrap_pickle_wrapper(None, reqs)
    stats = SchedulerReqTimeStats.new_from_obj(reqs[0].time_stats)  # as Req.__init__
    stats.set_scheduler_recv_time()
    stats.set_wait_queue_entry_time()
    stats.set_completion_time()
    pull.close()


def main() -> None:
    role, workdir, ipc_dir = driver_args()
    if os.environ.get("SGLANG_USE_PICKLE_IPC") not in ("0", "1"):
        raise SystemExit("SGLANG_USE_PICKLE_IPC must be set to 0 or 1 (the runner sets it)")
    import zmq
    from sglang.srt.managers import io_struct

    exporter = _init_tracing(role)
    ctx = zmq.Context()
    {"tokenizer_manager": tokenizer_manager, "controller": controller, "scheduler": scheduler}[role](
        workdir, ipc_dir, io_struct, ctx)
    ctx.term()
    _export(workdir, role, exporter)


if __name__ == "__main__":
    main()
