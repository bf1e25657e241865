"""Engine-path samples for `bench codec`: the messages a step of the reference engine really
sends, built by the engine's own code, timed through the functions its processes call.

Messages (one row and a batch):
- ``BatchTokenIDOutput``: the scheduler's output of one decode step, built by
  ``Scheduler._batch_output`` (one new token per request, the requests' time stats - created,
  scheduler_recv, prefill_done, first_token stamps and a trace carrier - in the PickleWrapper
  field ``time_stats`` as a ``TimeStatsBatch``);
- ``BatchStrOutput``: what the detokenizer makes of it (``Detokenizer.detokenize``: the text
  delta, the time stats stamped ``detokenized``), sent on to the tokenizer manager.

Paths (what ``reference_impl.engine.ipc`` runs, less the socket):
- send: ``codec.encode(obj, transport)`` (what ``Sender.send`` -> ``zmq_io.send`` calls: the
  wrap of the PickleWrapper fields, the map-key scan, the encode);
- receive: ``codec.decode_frames([frame], transport, allow_pickle=True, unwrap_wrappers=False)``
  then ``ipc.unwrap_received`` (the allow-listed unpickler opening the wrappers), as
  ``ipc._decode`` does on every link.
Both transports take the same path; pickle's unwrap finds nothing to open.

``python -m reference_tools.bench.engine_samples`` times the pieces of the msgpack send and
receive of a one-row step message, each alone (the accounting in docs/benchmarks.md).
"""

from __future__ import annotations

import types
from array import array
from typing import Any, Callable

ENGINE_PICKLE, ENGINE_MSGPACK = "engine pickle", "engine msgpack"
ENGINE_TRANSPORTS = {ENGINE_PICKLE: "pickle", ENGINE_MSGPACK: "msgpack"}
SIZES = (1, 64)  # requests per step message: a lone request, a batch


def _stats(rid: str, i: int) -> Any:
    from reference_impl.engine.tracing import ReqTimeStats

    stats = ReqTimeStats(rid=rid, trace_carrier={"traceparent": f"00-{i + 1:032x}-{i + 1:016x}-01"})
    t = 1.7e9 + i
    stats.stamps.update(created=t, scheduler_recv=t + 0.001, prefill_done=t + 0.002, first_token=t + 0.003)
    return stats


def scheduler_output(n: int, input_len: int = 1024, generated: int = 10) -> Any:
    """One decode step's BatchTokenIDOutput for n requests, by Scheduler._batch_output."""
    from reference_impl.engine.scheduler import Req, Scheduler
    from reference_impl.io_struct import SamplingParams

    reqs = []
    for i in range(n):
        req = Req(rid=f"req-{i:08x}", input_ids=list(range(input_len)), params=SamplingParams(max_new_tokens=200),
                  stream=False, return_logprob=False, logprob_start_len=-1, top_logprobs_num=0,
                  token_ids_logprob=None, return_hidden_states=False, time_stats=_stats(f"req-{i:08x}", i))
        req.output_ids = [65 + (j + i) % 26 for j in range(generated)]
        req.sent_len = generated - 1  # one new token since the last output: a decode step
        reqs.append(req)
    scheduler = types.SimpleNamespace(dp_rank=0)
    return Scheduler._batch_output(scheduler, reqs)  # type: ignore[arg-type]


def detokenizer_output(n: int) -> Any:
    """What the detokenizer sends for that step (BatchStrOutput), by Detokenizer.detokenize."""
    from reference_impl import codec
    from reference_impl.engine.detokenizer import Detokenizer
    from reference_impl.engine.tokenizer import ByteTokenizer

    received = codec.decode(codec.encode(scheduler_output(n), "msgpack"), "msgpack", allow_pickle=True)
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


def samples(sizes: tuple[int, ...] = SIZES) -> list[tuple[str, Callable[[Any], Any]]]:
    """(payload name, builder(classes)) for every engine-path sample; reference only."""
    out: list[tuple[str, Callable[[Any], Any]]] = []
    for n in sizes:
        out.append((f"engine step BatchTokenIDOutput x{n}", lambda classes, n=n: scheduler_output(n)))
        out.append((f"engine step BatchStrOutput x{n}", lambda classes, n=n: detokenizer_output(n)))
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


def piece_times(n: int = 2000, batches: int = 7) -> dict[str, float]:
    """Microseconds (CPU time, median of `batches` loops of n calls) of each piece of the msgpack
    send and receive of one engine step message (BatchTokenIDOutput, one row, time stats)."""
    import time

    from reference_impl import _codec_fast, _codec_keys, codec, pickle_wrapper
    from reference_impl.engine.ipc import unwrap_received

    obj = scheduler_output(1)
    wire = codec.encode(obj, "msgpack")
    wrapped = codec.wrap_fields(obj)

    def received() -> Any:
        return codec.decode_frames([wire], "msgpack", allow_pickle=True, unwrap_wrappers=False)

    def clock(fn: Callable[[], Any]) -> float:
        out = []
        for _ in range(batches):
            t = time.process_time()
            for _ in range(n):
                fn()
            out.append((time.process_time() - t) / n)
        return sorted(out)[len(out) // 2] * 1e6

    pieces = {
        "send: codec.encode, all of it": lambda: codec.encode(obj, "msgpack"),
        "  map-key collision scan (find_collision)": lambda: _codec_keys.find_collision(obj),
        "  wrap_fields: copy + wrap": lambda: codec.wrap_fields(obj),
        "    pickle_wrapper.wrap of the time stats": lambda: pickle_wrapper.wrap(obj.time_stats),
        "  msgspec encode of the wrapped struct": lambda: _codec_fast.encoder.encode(wrapped),
        "receive: decode_frames + unwrap, all of it": lambda: unwrap_received(received(), "msgpack"),
        "  decode_frames (wrappers kept)": received,
    }
    times = {name: clock(fn) for name, fn in pieces.items()}
    times["  unwrap (allow-listed unpickler)"] = (times["receive: decode_frames + unwrap, all of it"]
                                                   - times["  decode_frames (wrappers kept)"])
    return times


if __name__ == "__main__":
    for name, us in piece_times().items():
        print(f"{name:48s} {us:7.2f} us")
