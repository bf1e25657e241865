"""Engine-path samples for `bench codec`: the messages a step of the reference engine really
sends, built by the engine's own code, timed through the functions its processes call.

Messages (one row and a batch):
- ``BatchTokenIDOutput``: the scheduler's output of one decode step, built by
  ``Scheduler._batch_output`` (one new token per request, the requests' time stats - created,
  scheduler_recv, prefill_done, first_token stamps and a trace carrier - in the PickleWrapper
  field ``time_stats`` as a ``TimeStatsBatch``);
- ``BatchStrOutput``: what the detokenizer makes of it (``Detokenizer.detokenize``: the text
  delta, the time stats stamped ``detokenized``), sent on to the tokenizer manager;
- ``engine final ...``: the same two messages for requests answered as one JSON, which get a
  single output when they finish, with all their tokens (200, the seed's output length).

Paths (what ``reference_impl.engine.ipc`` runs, less the socket):
- send: ``codec.encode(obj, transport)`` (what ``Sender.send`` -> ``zmq_io.send`` calls: the
  wrap of the PickleWrapper fields, the map-key scan, the encode);
- receive: ``codec.decode_frames([frame], transport, allow_pickle=True, unwrap_wrappers=False)``
  then ``ipc.unwrap_received`` (the allow-listed unpickler opening the wrappers), as
  ``ipc._decode`` does on every link.
Both transports take the same path; pickle's unwrap finds nothing to open.

SGLang's side (rows ``sglang engine pickle`` / ``sglang engine msgpack``, SGLang installed):
the same decode step's ``BatchTokenIDOutput`` built by SGLang's own output processor
(``_GenerationStreamAccumulator.accept`` per ``schedule_batch.Req``, then ``to_payload``; the
requests' ``SchedulerReqTimeStats`` stamped as with ``--enable-metrics``), timed through the
functions SGLang's processes call, switched per transport as ``SGLANG_USE_PICKLE_IPC`` switches
them (``io_struct._USE_PICKLE_IPC``, saved and restored around each call, as the conformance
adapter does):
- send: ``wrap_as_pickle`` of the time stats (what ``to_payload`` does: a pickle of the list
  under msgpack, nothing under pickle), then ``sock_send``'s encode (``msgpack_encode``, or
  ``pickle.dumps`` at the highest protocol as ``send_pyobj`` does);
- receive: ``sock_recv``'s decode (``msgpack_decode``, or ``pickle.loads``) then
  ``unwrap_from_pickle`` of ``time_stats`` and ``customized_info``, as the tokenizer manager's
  ``_handle_batch_output`` does. (SGLang's detokenizer, the step message's first receiver,
  passes the wrapper on to its ``BatchStrOutput`` unopened: the unwrap is paid once per two hops.)

``python -m reference_tools.bench.engine_samples`` times the pieces of the msgpack send and
receive of a one-row step message, each alone (the accounting in docs/benchmarks.md).
"""

from __future__ import annotations

import types
from array import array
from typing import Any, Callable, Optional

ENGINE_PICKLE, ENGINE_MSGPACK = "engine pickle", "engine msgpack"
ENGINE_TRANSPORTS = {ENGINE_PICKLE: "pickle", ENGINE_MSGPACK: "msgpack"}
SGLANG_ENGINE_PICKLE, SGLANG_ENGINE_MSGPACK = "sglang engine pickle", "sglang engine msgpack"
SGLANG_ENGINE_TRANSPORTS = {SGLANG_ENGINE_PICKLE: "pickle", SGLANG_ENGINE_MSGPACK: "msgpack"}
SGLANG_COUNTERPART = {ENGINE_PICKLE: SGLANG_ENGINE_PICKLE, ENGINE_MSGPACK: SGLANG_ENGINE_MSGPACK}
SIZES = (1, 64)  # requests per step message: a lone request, a batch
FINAL_TOKENS = 200  # the seed's output length: what a final output of a request answered as one JSON holds


def _stats(rid: str, i: int) -> Any:
    from reference_impl.engine.tracing import ReqTimeStats

    stats = ReqTimeStats(rid=rid, trace_carrier={"traceparent": f"00-{i + 1:032x}-{i + 1:016x}-01"})
    t = 1.7e9 + i
    stats.stamps.update(created=t, scheduler_recv=t + 0.001, prefill_done=t + 0.002, first_token=t + 0.003)
    return stats


def scheduler_output(n: int, input_len: int = 1024, generated: Optional[int] = None, final: bool = False) -> Any:
    """One decode step's BatchTokenIDOutput for n requests, by Scheduler._batch_output. final: the
    output of n requests answered as one JSON, which the scheduler sends once, when they finish:
    every generated token (FINAL_TOKENS unless `generated` says; a step: 10 so far), the finish reason."""
    from reference_impl.engine.scheduler import Req, Scheduler
    from reference_impl.io_struct import SamplingParams

    if generated is None:
        generated = FINAL_TOKENS if final else 10
    reqs = []
    for i in range(n):
        req = Req(rid=f"req-{i:08x}", input_ids=list(range(input_len)), params=SamplingParams(max_new_tokens=200),
                  stream=False, return_logprob=False, logprob_start_len=-1, top_logprobs_num=0,
                  token_ids_logprob=None, return_hidden_states=False, time_stats=_stats(f"req-{i:08x}", i))
        req.output_ids = [65 + (j + i) % 26 for j in range(generated)]
        if final:
            req.finished_reason = {"type": "length", "length": generated}
        else:
            req.sent_len = generated - 1  # one new token since the last output: a decode step
        reqs.append(req)
    scheduler = types.SimpleNamespace(dp_rank=0)
    return Scheduler._batch_output(scheduler, reqs)  # type: ignore[arg-type]


def detokenizer_output(n: int, final: bool = False) -> Any:
    """What the detokenizer sends for that step (BatchStrOutput), by Detokenizer.detokenize."""
    from reference_impl import codec
    from reference_impl.engine.detokenizer import Detokenizer
    from reference_impl.engine.tokenizer import ByteTokenizer

    received = codec.decode(codec.encode(scheduler_output(n, final=final), "msgpack"), "msgpack", allow_pickle=True)
    detok = types.SimpleNamespace(states={}, tokenizer=ByteTokenizer(), tracing=types.SimpleNamespace(enabled=False))
    detok._text_delta = types.MethodType(Detokenizer._text_delta, detok)
    return Detokenizer.detokenize(detok, received)  # type: ignore[arg-type]


def engine_send(transport: str) -> Callable[[Any], bytes]:
    from reference_impl import codec

    return lambda obj: codec.encode(obj, transport)


def engine_receive(transport: str) -> Callable[[Any], Any]:
    from reference_impl import codec
    from reference_impl.engine.ipc import unwrap_received

    def receive(wire: Any) -> Any:
        obj = codec.decode_frames([wire], transport, allow_pickle=True, unwrap_wrappers=False)
        return unwrap_received(obj, transport)

    return receive


# -- SGLang's side ----------------------------------------------------------------------------
def is_sglang(classes: Any) -> bool:
    return str(getattr(classes, "__name__", "")).startswith("sglang.")


def _sglang_accumulator() -> Any:
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.managers.scheduler_components.output_streamer import _GenerationStreamAccumulator
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    # What SchedulerOutputStreamer._stream_output_generation passes for a plain generation batch
    # (no logprobs, hidden states or speculative decoding; stream interval 1).
    return _GenerationStreamAccumulator(
        return_logprob=False, return_hidden_states=False, return_routed_experts=False, return_indexer_topk=False,
        spec_algorithm=SpeculativeAlgorithm.NONE, disaggregation_mode=DisaggregationMode.NULL,
        default_stream_interval=1, default_force_stream_interval=50, get_cached_tokens_details=lambda req: None,
        is_request_level_customized_info_key=lambda key: False, current_weight_version=None)


def sglang_scheduler_output(n: int, input_len: int = 1024, generated: int = 10, metrics: bool = True) -> Any:
    """One decode step's BatchTokenIDOutput for n requests, built by SGLang's output processor, as
    its pickle mode holds it (time_stats: the list of SchedulerReqTimeStats; the msgpack send
    wraps it, engine_send_sglang). metrics: as with --enable-metrics (the stamps travel); without,
    each request's time stats pickle as an empty state (SchedulerReqTimeStats.__getstate__)."""
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.sampling.sampling_params import SamplingParams

    reqs = []
    for i in range(n):
        params = SamplingParams(max_new_tokens=200)
        params.normalize(None)
        req = Req(f"req-{i:08x}", "", array("q", range(input_len)), params, stream=True)
        stats, t = req.time_stats, 12000.0 + i  # perf_counter stamps, as the scheduler sets them
        stats.enable_metrics = metrics  # --enable-metrics: the stamps travel (else __getstate__ sends {})
        stats.wait_queue_entry_time, stats.forward_entry_time, stats.prefill_finished_time = t, t + 0.001, t + 0.002
        req.output_ids.extend(65 + (j + i) % 26 for j in range(generated - 1))
        _sglang_accumulator().accept(req=req)  # the earlier steps' output: offsets advance
        req.output_ids.append(65 + (generated - 1 + i) % 26)  # this step's one new token
        reqs.append(req)
    acc = _sglang_accumulator()
    for req in reqs:
        acc.accept(req=req)
    io = _sglang_io()
    saved = io._USE_PICKLE_IPC
    io._USE_PICKLE_IPC = True  # to_payload's wrap_as_pickle leaves the time stats as they are
    try:
        return acc.to_payload(dp_rank=0, is_idle_batch=False)
    finally:
        io._USE_PICKLE_IPC = saved


def _sglang_io() -> Any:
    import importlib

    return importlib.import_module("sglang.srt.managers.io_struct")


def engine_send_sglang(transport: str) -> Callable[[Any], Any]:
    import pickle

    io = _sglang_io()
    use_pickle = transport == "pickle"

    def send(obj: Any) -> Any:
        saved, raw = io._USE_PICKLE_IPC, obj.time_stats
        io._USE_PICKLE_IPC = use_pickle
        try:
            obj.time_stats = io.wrap_as_pickle(raw)  # to_payload's wrap (none under pickle)
            if use_pickle:
                return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)  # sock_send -> send_pyobj
            return io.msgpack_encode(obj)  # sock_send, msgpack mode
        finally:
            obj.time_stats, io._USE_PICKLE_IPC = raw, saved

    return send


def engine_receive_sglang(transport: str) -> Callable[[Any], Any]:
    import pickle

    io = _sglang_io()
    use_pickle = transport == "pickle"

    def receive(wire: Any) -> Any:
        saved = io._USE_PICKLE_IPC
        io._USE_PICKLE_IPC = use_pickle
        try:
            obj = pickle.loads(wire) if use_pickle else io.msgpack_decode(wire)  # sock_recv
            obj.time_stats = io.unwrap_from_pickle(obj.time_stats)  # TokenizerManager._handle_batch_output
            io.unwrap_from_pickle(obj.customized_info)
            return obj
        finally:
            io._USE_PICKLE_IPC = saved

    return receive


def samples(sizes: tuple[int, ...] = SIZES) -> list[tuple[str, Callable[[Any], Any], tuple[str, ...]]]:
    """(payload name, builder(classes), implementations) for every engine-path sample: the step
    message BatchTokenIDOutput for the reference and SGLang, BatchStrOutput for the reference, and
    the final outputs of the largest size (reference)."""
    out: list[tuple[str, Callable[[Any], Any], tuple[str, ...]]] = []
    for n in sizes:
        out.append((f"engine step BatchTokenIDOutput x{n}",
                    lambda classes, n=n: sglang_scheduler_output(n) if is_sglang(classes) else scheduler_output(n),
                    ("reference", "sglang")))
        out.append((f"engine step BatchStrOutput x{n}", lambda classes, n=n: detokenizer_output(n), ("reference",)))
    # Requests answered as one JSON get a single output, when they finish: all their tokens at once.
    n = max(sizes)
    out.append((f"engine final BatchTokenIDOutput x{n}",
                lambda classes: scheduler_output(n, final=True), ("reference",)))
    out.append((f"engine final BatchStrOutput x{n}", lambda classes: detokenizer_output(n, final=True), ("reference",)))
    return out


def same_delivery(a: Any, b: Any) -> bool:
    """Whether two delivered messages carry the same values (arrays compared as lists)."""
    import msgspec

    def norm(v: Any) -> Any:
        if isinstance(v, msgspec.Struct):
            return (type(v).__name__, {k: norm(x) for k, x in msgspec.structs.asdict(v).items()})
        if isinstance(v, array):
            return list(v)
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v

    return bool(norm(a) == norm(b))


def _clock(fn: Callable[[], Any], n: int, batches: int) -> float:
    """Microseconds per call: CPU time, median of `batches` loops of n calls."""
    import time

    out = []
    for _ in range(batches):
        t = time.process_time()
        for _ in range(n):
            fn()
        out.append((time.process_time() - t) / n)
    return sorted(out)[len(out) // 2] * 1e6


def piece_times(n: int = 2000, batches: int = 7, rows: int = 1) -> dict[str, float]:
    """Microseconds (CPU time, median of `batches` loops of n calls) of each piece of the msgpack
    send and receive of one engine step message (BatchTokenIDOutput, `rows` rows, time stats)."""
    from reference_impl import _codec_fast, _codec_keys, codec, pickle_wrapper
    from reference_impl.engine.ipc import unwrap_received

    obj = scheduler_output(rows)
    wire = codec.encode(obj, "msgpack")
    wrapped = codec.wrap_fields(obj)

    def received() -> Any:
        return codec.decode_frames([wire], "msgpack", allow_pickle=True, unwrap_wrappers=False)

    pieces = {
        "send: codec.encode, all of it": lambda: codec.encode(obj, "msgpack"),
        "  map-key collision scan (find_collision)": lambda: _codec_keys.find_collision(obj),
        "  wrap_fields: copy + wrap": lambda: codec.wrap_fields(obj),
        "    pickle_wrapper.wrap of the time stats": lambda: pickle_wrapper.wrap(obj.time_stats),
        "  msgspec encode of the wrapped struct": lambda: _codec_fast.encoder.encode(wrapped),
        "receive: decode_frames + unwrap, all of it": lambda: unwrap_received(received(), "msgpack"),
        "  decode_frames (wrappers kept)": received,
    }
    times = {name: _clock(fn, n, batches) for name, fn in pieces.items()}
    times["  unwrap (allow-listed unpickler)"] = (times["receive: decode_frames + unwrap, all of it"]
                                                   - times["  decode_frames (wrappers kept)"])
    return times


def sglang_piece_times(n: int = 2000, batches: int = 7, rows: int = 1, metrics: bool = True) -> dict[str, float]:
    """The same accounting for SGLang's own path (its step message, `rows` rows), both transports:
    each piece is a function SGLang's processes call, timed alone."""
    import pickle

    io = _sglang_io()
    obj = sglang_scheduler_output(rows, metrics=metrics)
    stats = obj.time_stats
    saved = io._USE_PICKLE_IPC
    io._USE_PICKLE_IPC = False  # msgpack mode for the pieces called directly
    try:
        wrapped = io.wrap_as_pickle(stats)
        obj.time_stats = wrapped
        wire = io.msgpack_encode(obj)
        obj.time_stats = stats
        pickled = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        send, receive = engine_send_sglang("msgpack"), engine_receive_sglang("msgpack")
        with_wrapper = io.msgpack_decode(wire)

        def encode_wrapped() -> bytes:
            obj.time_stats = wrapped
            try:
                return io.msgpack_encode(obj)
            finally:
                obj.time_stats = stats

        pieces = {
            "msgpack send: wrap + msgpack_encode, all of it": lambda: send(obj),
            "  wrap_as_pickle of the time stats": lambda: io.wrap_as_pickle(stats),
            "  msgpack_encode (time stats wrapped)": encode_wrapped,
            "msgpack receive: msgpack_decode + unwrap, all of it": lambda: receive(wire),
            "  msgpack_decode (what its detokenizer does)": lambda: io.msgpack_decode(wire),
            "  unwrap_from_pickle of the time stats": lambda: io.unwrap_from_pickle(with_wrapper.time_stats),
            "pickle send: pickle.dumps (send_pyobj), all of it": lambda: pickle.dumps(obj, protocol=5),
            "  of which the time stats alone": lambda: pickle.dumps(stats, protocol=5),
            "pickle receive: pickle.loads (recv_pyobj), all of it": lambda: pickle.loads(pickled),
        }
        return {name: _clock(fn, n, batches) for name, fn in pieces.items()}
    finally:
        io._USE_PICKLE_IPC = saved


def main(argv: Optional[list[str]] = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m reference_tools.bench.engine_samples",
                                     description="the msgpack send and receive of one step message, piece by piece")
    parser.add_argument("--impl", choices=["reference", "sglang"], default="reference")
    parser.add_argument("--rows", type=int, default=1, help="requests in the step message (default 1)")
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed loop (default 2000)")
    parser.add_argument("--no-metrics", action="store_true",
                        help="sglang: time stats as a server without --enable-metrics sends them (empty states)")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.calls < 1:
        parser.error("--rows and --calls must be at least 1")
    if args.no_metrics and args.impl != "sglang":
        parser.error("--no-metrics is for --impl sglang (the reference engine always sends its stamps)")
    if args.impl == "sglang":
        try:
            _sglang_io()
        except Exception as exc:  # noqa: BLE001 - any failure to import SGLang: one line, as bench codec says it
            parser.error(f"--impl sglang: cannot import SGLang ({type(exc).__name__}: {exc}); "
                         "run in an environment with SGLang installed (tox -e upstream)")
        times = sglang_piece_times(n=args.calls, rows=args.rows, metrics=not args.no_metrics)
    else:
        times = piece_times(n=args.calls, rows=args.rows)
    for name, us in times.items():
        print(f"{name:56s} {us:8.2f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
