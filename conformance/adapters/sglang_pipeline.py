"""SGLang's own serving pipeline on a CPU machine (``python -m conformance.adapters.sglang_pipeline
RUNS.json OUT.json``, several topologies one after another in one process): the differential
pipeline runs of the ``pipeline`` capability (conformance/pipeline.py says what a run is and how
runs are judged).

    HTTP client --(httpx, in process)--> SGLang's FastAPI app (its routes, its body validation)
      -> TokenizerManager (built by its own __init__: tokenizer, sockets, send, output handler),
         or its MultiTokenizerRouter and TokenizerWorkers (multi-tokenizer topologies)
      -> [DataParallelController: its own __init__ less the scheduler processes it would launch,
          its event loop and the run's load-balance method]          (dp_size > 1)
      -> each rank: SchedulerIpcChannels.create (its sockets) + SchedulerRequestReceiver
         -> the stub scheduler below -> SchedulerOutputStreamer.stream_output (its output building)
      -> DetokenizerManager (its own __init__ and event loop, the model's tokenizer)
      -> TokenizerManager.handle_loop -> the HTTP response (or the Engine API's answer: pooled
         hidden states are tensors)

Every process boundary of a deployment is a real ZeroMQ socket made by SGLang's get_zmq_socket,
crossed by its own send and receive functions; the transport is chosen the way its users choose
it (SGLANG_USE_PICKLE_IPC in this process's environment, read when SGLang is imported). The one
stand-in is the model: the stub scheduler turns each request into SGLang's own ``Req`` and
"decodes" deterministic tokens, logprobs (``-inf`` and the ``None`` shapes included), hidden
states and customized info, and records what it produced: the conservation oracle.
A tap on every socket records each frame (its size and whether it is pickle): conformance/pipeline_tap.py,
shared with the reference's driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import math
import os
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Optional

from conformance.adapters.sglang_engine import QuietWatchdog, StopLoop
from conformance.pipeline import ENGINE_ENCODE
from conformance.pipeline_tap import Tap, TappedSocket, answer_within, plain, post_step, received_form

#: The tiny model every run serves: SGLang reads its config; the stub scheduler is its "forward".
MODEL_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
                "num_hidden_layers": 1, "vocab_size": 258, "max_position_embeddings": 2048,
                "rms_norm_eps": 1e-5, "torch_dtype": "float32", "bos_token_id": 256, "eos_token_id": 257}
HIDDEN_SIZE = 4  #: floats per hidden state the stub reports
POLL_S = 0.001
#: How long an idle rank waits, once a request arrived, for those sent with it (the scheduler's
#: batches then hold the requests of several clients and tokenizer workers, interleaved).
BATCH_WINDOW_S = 0.05


# -- the model folder -----------------------------------------------------------------------
def write_model(folder: str) -> None:
    """config.json and a byte-level tokenizer (one token per byte, no merges): every text
    round-trips exactly, so responses are the stub's tokens, readable."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: byte for byte, ch in enumerate(_byte_symbols())} | {"<s>": 256, "</s>": 257}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>").save_pretrained(folder)
    with open(os.path.join(folder, "config.json"), "w") as out:
        json.dump(MODEL_CONFIG, out)


def _byte_symbols() -> list[str]:
    """The printable symbol byte-level tokenizers use for each byte, in byte order (printable
    Latin-1 bytes stand for themselves, the others for code points from 256 up)."""
    own = set(range(33, 127)) | set(range(161, 173)) | set(range(174, 256))
    symbols, extra = [], 256
    for byte in range(256):
        if byte in own:
            symbols.append(chr(byte))
        else:
            symbols.append(chr(extra))
            extra += 1
    return symbols


# -- the stub model --------------------------------------------------------------------------
def stub_tokens(input_ids: list[int], count: int) -> list[int]:
    """Deterministic printable byte tokens from the prompt (the same in every run)."""
    seed = sum(input_ids) % 61
    return [97 + (seed + 7 * step) % 26 for step in range(count)]


def stub_logprob(step: int) -> float:
    return -math.inf if step == 1 else -0.25 * (step + 1)


class StubScheduler:
    """One scheduler rank: SGLang's receiver and output streamer around a stand-in forward.
    Requests a poll hands over are decoded together, one token a step, as continuous batching
    does; every output goes through SchedulerOutputStreamer.stream_output."""

    def __init__(self, rank: int, server_args: Any, port_args: Any, tap: Tap, record: dict[str, Any],
                 upstream: str, is_generation: bool = True) -> None:
        from sglang.srt.disaggregation.utils import DisaggregationMode
        from sglang.srt.managers.scheduler_components.ipc_channels import SchedulerIpcChannels
        from sglang.srt.managers.scheduler_components.output_sender import SenderWrapper
        from sglang.srt.managers.scheduler_components.output_streamer import SchedulerOutputStreamer
        from sglang.srt.managers.scheduler_components.request_receiver import SchedulerRequestReceiver
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        self.rank, self.tap, self.record = rank, tap, record
        self.dp_rank = rank if server_args.dp_size > 1 else None
        channels = SchedulerIpcChannels.create(port_args=port_args, is_rank_zero=True, skip_tokenizer_init=False,
                                               metrics_enabled=False, enable_scripted_runtime=False)
        self.send_to_tokenizer = SenderWrapper(TappedSocket(channels.send_to_tokenizer.socket,
                                                            "tokenizer_manager", tap))
        send_to_detokenizer = SenderWrapper(TappedSocket(channels.send_to_detokenizer.socket,
                                                         "detokenizer", tap))
        self.receiver = SchedulerRequestReceiver(
            recv_from_tokenizer=TappedSocket(channels.recv_from_tokenizer, f"scheduler_{rank}", tap),
            recv_from_rpc=channels.recv_from_rpc, recv_skipper=None, input_blocker=None, mm_receiver=None,
            server_args=server_args, model_config=_ModelView(), max_recv_per_poll=-1,
            stream_output=lambda *args, **kwargs: None, get_last_batch=lambda: None)
        self.streamer = SchedulerOutputStreamer(
            send_to_detokenizer=send_to_detokenizer, tree_cache=None, server_args=server_args,
            is_generation=is_generation,
            spec_algorithm=SpeculativeAlgorithm.NONE, disaggregation_mode=DisaggregationMode.NULL,
            enable_hicache_storage=lambda: False)
        self.running: list[Any] = []
        self.stopping = threading.Event()
        self.error: Optional[str] = None
        self.thread = threading.Thread(target=self._loop, name=f"scheduler_{rank}", daemon=True)

    def _loop(self) -> None:
        from sglang.srt.runtime_context import get_parallel

        try:
            with get_parallel().override(pp_rank=0, attn_tp_rank=0, attn_cp_rank=0, dp_rank=self.dp_rank):
                while not self.stopping.is_set():
                    idle = not self.running
                    for obj in self.receiver.recv_requests():
                        self._handle(obj)
                    if self.running and idle:  # a new batch: let the requests sent with it join it
                        time.sleep(BATCH_WINDOW_S)
                        for obj in self.receiver.recv_requests():
                            self._handle(obj)
                    if self.running:
                        self._step()
                    else:
                        time.sleep(POLL_S)
        except BaseException:  # noqa: BLE001 - the rank died: the run reports it, naming the hop
            self.error = traceback.format_exc(limit=6)

    def _handle(self, obj: Any) -> None:
        from sglang.srt.managers import io_struct as io

        name = type(obj).__name__
        self.record["received"].append({"rank": self.rank, "type": name, "rid": getattr(obj, "rid", None),
                                        "form": received_form(obj)})
        if isinstance(obj, io.TokenizedGenerateReqInput):
            self.running.append(self._req(obj))
        elif isinstance(obj, io.TokenizedEmbeddingReqInput):
            self.streamer.stream_output([self._embedded(obj)], False)
        elif isinstance(obj, io.UpdateWeightsFromTensorReqInput):
            sizes = [len(t) if isinstance(t, (bytes, bytearray)) else -1 for t in obj.serialized_named_tensors]
            self.send_to_tokenizer.send_output(io.UpdateWeightsFromTensorReqOutput(
                success=True, message=f"stub loaded {sizes}"), obj)
        elif isinstance(obj, io.FlushCacheReqInput):
            self.send_to_tokenizer.send_output(io.FlushCacheReqOutput(success=True), obj)
        elif isinstance(obj, io.OpenSessionReqInput) and self.rank == 0:  # one answer a deployment
            self.send_to_tokenizer.send_output(io.OpenSessionReqOutput(session_id=obj.session_id, success=True), obj)

    def _req(self, obj: Any) -> Any:
        """SGLang's Req for a received request, from the fields the scheduler's
        handle_generate_request passes (what the output streamer reads of it)."""
        from sglang.srt.managers.schedule_batch import Req

        req = Req(obj.rid, obj.input_text, obj.input_ids, obj.sampling_params, return_logprob=obj.return_logprob,
                  top_logprobs_num=obj.top_logprobs_num, token_ids_logprob=obj.token_ids_logprob, stream=obj.stream,
                  return_hidden_states=obj.return_hidden_states, http_worker_ipc=obj.http_worker_ipc,
                  time_stats=obj.time_stats, vocab_size=MODEL_CONFIG["vocab_size"], eos_token_ids={257})
        req.customized_info = {}
        produced: dict[str, Any] = {"tokens": [], "input_logprobs": None, "output_logprobs": [], "top_logprobs": [],
                    "hidden_states": [], "customized": []}
        self.record["produced"][obj.rid] = produced
        if obj.return_logprob:
            n = len(obj.input_ids)
            vals: list[Optional[float]] = [None] + [-0.5 * i for i in range(1, n)]
            req.logprob.input_token_logprobs_val = vals
            req.logprob.input_token_logprobs_idx = list(obj.input_ids)
            req.logprob.input_top_logprobs_val = [None] + [[-0.5 * i] * obj.top_logprobs_num for i in range(1, n)]
            req.logprob.input_top_logprobs_idx = [None] + [[65] * obj.top_logprobs_num for _ in range(1, n)]
            req.logprob.input_token_ids_logprobs_val = [None] + [[-1.0] * len(obj.token_ids_logprob or [])
                                                                 for _ in range(1, n)]
            req.logprob.input_token_ids_logprobs_idx = [None] + [list(obj.token_ids_logprob or [])
                                                                 for _ in range(1, n)]
            produced["input_logprobs"] = [plain(v) for v in vals]
        return req

    def _embedded(self, obj: Any) -> Any:
        """SGLang's Req for an embedding request (the arguments of the scheduler's
        handle_embedding_request), finished by the stand-in forward in one step."""
        import torch
        from sglang.srt.managers.schedule_batch import FINISH_LENGTH, Req

        req = Req(obj.rid, obj.input_text, obj.input_ids, obj.sampling_params, http_worker_ipc=obj.http_worker_ipc,
                  time_stats=obj.time_stats, return_pooled_hidden_states=obj.return_pooled_hidden_states)
        seed = sum(obj.input_ids) % 17
        req.embedding = [0.125 * (seed + i) for i in range(HIDDEN_SIZE)]
        produced: dict[str, Any] = {"embedding": req.embedding, "pooled": None}
        if obj.return_pooled_hidden_states:
            req.pooled_hidden_state = torch.arange(HIDDEN_SIZE, dtype=torch.float32) * 0.5 + seed
            produced["pooled"] = plain(req.pooled_hidden_state)
        req.finished_reason = FINISH_LENGTH(length=0)
        self.record["produced"][obj.rid] = produced
        return req

    def _step(self) -> None:
        from sglang.srt.managers.schedule_batch import FINISH_LENGTH

        for req in self.running:
            step = len(req.output_ids)
            token = stub_tokens(list(req.origin_input_ids), step + 1)[-1]
            req.output_ids.append(token)
            produced = self.record["produced"][req.rid]
            produced["tokens"].append(token)
            if req.return_logprob:
                value = stub_logprob(step)
                req.logprob.output_token_logprobs_val.append(value)
                req.logprob.output_token_logprobs_idx.append(token)
                top = [value, value - 1.0][: req.logprob.top_logprobs_num]
                req.logprob.output_top_logprobs_val.append(top)
                req.logprob.output_top_logprobs_idx.append([token, token + 1][: req.logprob.top_logprobs_num])
                wanted = req.logprob.token_ids_logprob or []
                req.logprob.output_token_ids_logprobs_val.append([-2.0] * len(wanted))
                req.logprob.output_token_ids_logprobs_idx.append(list(wanted))
                produced["output_logprobs"].append(plain(value))
                produced["top_logprobs"].append(plain(top))
            if req.return_hidden_states:
                state = [round(0.5 * step + 0.125 * i, 6) for i in range(HIDDEN_SIZE)]
                req.hidden_states.append(state)
                produced["hidden_states"].append(state)
            req.customized_info.setdefault("expert_ids", []).append([step, token % 8])
            produced["customized"].append([step, token % 8])
            if len(req.output_ids) >= req.sampling_params.max_new_tokens:
                req.finished_reason = FINISH_LENGTH(length=len(req.output_ids))
        return_logprob = any(req.return_logprob for req in self.running)
        self.streamer.stream_output(self.running, return_logprob)
        self.running = [req for req in self.running if not req.finished()]


class _ModelView:
    """The one model-config attribute the request receiver reads."""

    is_multimodal = False


# -- the run ----------------------------------------------------------------------------------
def main(config_path: str, out_path: str) -> int:
    """Every run the file names, in order, in this process (SGLang is imported once); the
    records are written after each run, so a run that hangs keeps those before it."""
    try:
        with open(config_path) as f:
            config = json.load(f)
        runs, timeout_s = list(config["runs"]), float(config["timeout_s"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"sglang_pipeline: {config_path}: not a runs file ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    records: list[dict[str, Any]] = []
    for one in runs:
        record: dict[str, Any] = {"topology": one["topology"]["name"], "hops": {}, "errors": []}
        try:
            record.update(run(one, timeout_s))
        except BaseException:  # noqa: BLE001 - what the parent reports, naming the run
            record["errors"].append(traceback.format_exc(limit=8))
        records.append(record)
        with open(out_path + ".part", "w") as out:
            json.dump({"runs": records}, out)
        os.replace(out_path + ".part", out_path)
    sys.stdout.flush()
    os._exit(0)  # SGLang's loop threads and sockets end with the process


def run(config: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """One topology's run: SGLang's objects built afresh on a newly published runtime context
    and new socket names; those of an earlier run are stopped, or left blocked on sockets
    nothing sends to."""
    started = time.monotonic()
    import sglang.srt.managers.io_struct as io
    from sglang.srt import runtime_context
    from sglang.srt.server_args import PortArgs, ServerArgs

    folder = tempfile.mkdtemp(prefix="ipc-conformance-sglang-pipeline-")
    write_model(folder)
    topology = config["topology"]
    runtime_context.reset_context()
    dp_size, workers = int(topology["dp_size"]), int(topology["tokenizer_workers"])
    is_generation = not topology["embedding"]
    server_args = ServerArgs(model_path=folder, device="cpu", dp_size=dp_size, tokenizer_worker_num=workers,
                             is_embedding=not is_generation,
                             load_balance_method=topology["load_balance_method"], return_hidden_states_mode="full")
    runtime_context.publish(server_args, role="tokenizer")
    port_args = PortArgs.init_new(server_args)
    tap = Tap()
    record: dict[str, Any] = {"received": [], "produced": {}}
    hops: dict[str, str] = {}
    transport = "pickle" if io._USE_PICKLE_IPC else "msgpack"

    from sglang.srt.managers.detokenizer_manager import DetokenizerManager

    # The tokenizer side's asyncio sockets belong to the loop the scenario runs on (a tokenizer
    # worker sends its registration while it is built).
    event_loop = asyncio.new_event_loop()
    asyncio.set_event_loop(event_loop)
    first = "scheduler_0" if dp_size == 1 else "controller"  # the process the tokenizer manager sends to
    if workers == 1:
        from sglang.srt.managers.tokenizer_manager import TokenizerManager

        managers = [TokenizerManager(server_args, port_args)]
        managers[0].send_to_scheduler = TappedSocket(managers[0].send_to_scheduler, first, tap)
        managers[0].recv_from_detokenizer = TappedSocket(managers[0].recv_from_detokenizer, "tokenizer_manager", tap)
        hops["tokenizer_manager"] = "TokenizerManager(server_args, port_args): its send and its output handler"
    else:
        managers = _tokenizer_workers(server_args, port_args, workers, first, tap)
        hops["tokenizer_manager"] = (f"MultiTokenizerRouter and {workers} TokenizerWorkers (their own __init__, "
                                     "sends, routing of outputs by http_worker_ipc, output handlers)")

    detokenizer = DetokenizerManager(server_args, port_args)
    detokenizer.recv_from_scheduler = TappedSocket(detokenizer.recv_from_scheduler, "detokenizer", tap)
    if workers == 1:
        detokenizer.send_to_tokenizer = TappedSocket(detokenizer.send_to_tokenizer, "tokenizer_manager", tap)
        loops = [_thread(detokenizer.event_loop, "detokenizer")]
        hops["detokenizer"] = "DetokenizerManager(server_args, port_args).event_loop"
    else:
        loops = [_thread(detokenizer.multi_http_worker_event_loop, "detokenizer")]
        hops["detokenizer"] = ("DetokenizerManager(server_args, port_args).multi_http_worker_event_loop "
                               "(outputs split per tokenizer worker)")

    ranks: list[StubScheduler] = []
    if dp_size == 1:
        ranks.append(StubScheduler(0, server_args, port_args, tap, record, "tokenizer_manager", is_generation))
    else:
        controller = _controller(server_args, port_args, tap)
        loops.append(_thread(controller.event_loop, "controller"))
        loops[-1][1].stopping = controller.soft_watchdog.stopping
        hops["controller"] = f"DataParallelController.event_loop, load balance {controller.load_balance_method.name}"
        for dp_rank, rank_args in enumerate(controller.rank_port_args):
            ranks.append(StubScheduler(dp_rank, server_args, rank_args, tap, record, "controller", is_generation))
    for rank in ranks:
        rank.thread.start()
    hops["scheduler"] = ("SchedulerIpcChannels.create, SchedulerRequestReceiver.recv_requests, "
                         "SchedulerOutputStreamer.stream_output (a stub forward)")
    hops["http"] = "sglang.srt.entrypoints.http_server.app (its routes and body validation), in process"

    def dead() -> str:
        died = [f"scheduler rank {r.rank}" for r in ranks if r.error] + [n for n, loop in loops if loop.error]
        return ", ".join(died)

    built = time.monotonic()
    try:
        responses = event_loop.run_until_complete(_drive(managers, config, timeout_s, dead))
    finally:
        asyncio.set_event_loop(None)
    for rank in ranks:
        rank.stopping.set()
    for _, loop in loops:
        loop.stop()
    errors = [f"scheduler rank {r.rank}: {r.error}" for r in ranks if r.error]
    errors += [f"{name}: {loop.error}" for name, loop in loops if loop.error]
    phases = {"start": round(built - started, 2), "scenario": round(time.monotonic() - built, 2)}
    return {"selected": transport, "hops": hops, "responses": responses, **record, "phases": phases,
            "links": tap.report(), "errors": errors}


class _LoopThread(threading.Thread):
    """An SGLang event loop on a thread; stop() ends it at its next watchdog feed (a loop blocked
    on a socket nothing sends to stays blocked, using no CPU, until the process ends)."""

    def __init__(self, target: Any, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._fn, self.error = target, ""
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            self._fn()
        except StopLoop:
            pass
        except BaseException:  # noqa: BLE001 - the loop died: the run reports it, naming the hop
            self.error = traceback.format_exc(limit=6)

    def stop(self) -> None:
        self.stopping.set()


def _thread(target: Any, name: str) -> tuple[str, _LoopThread]:
    loop = _LoopThread(target, name)
    loop.start()
    return name, loop


def _controller(server_args: Any, port_args: Any, tap: Tap) -> Any:
    """SGLang's DataParallelController through its own __init__; only the scheduler processes
    it would launch are left out: launch_dp_schedulers binds each rank's socket as upstream
    does (get_zmq_socket, PUSH, bound) and keeps the rank's port args for the stub ranks."""
    import zmq
    from sglang.srt.managers.data_parallel_controller import DataParallelController
    from sglang.srt.runtime_context import get_parallel
    from sglang.srt.server_args import PortArgs
    from sglang.srt.utils.network import get_zmq_socket

    class Controller(DataParallelController):  # type: ignore[misc]  # SGLang ships no type information
        def launch_dp_schedulers(self, server_args: Any, port_args: Any) -> None:
            self.rank_port_args = []
            parallel = get_parallel()  # ParallelContext; 0.5.19 and before name num_dp_ranks dp_size
            ranks = parallel.num_dp_ranks if hasattr(parallel, "num_dp_ranks") else parallel.dp_size
            for dp_rank in range(ranks):
                rank_args = PortArgs.init_new(server_args)
                rank_args.tokenizer_ipc_name = port_args.tokenizer_ipc_name
                rank_args.detokenizer_ipc_name = port_args.detokenizer_ipc_name
                rank_args.instance_id = port_args.instance_id
                self.rank_port_args.append(rank_args)
                self.workers[dp_rank] = TappedSocket(get_zmq_socket(
                    self.context, zmq.PUSH, rank_args.scheduler_input_ipc_name, True),
                    f"scheduler_{dp_rank}", tap)

    controller = Controller(server_args, port_args, run_scheduler_process_func=lambda *a: None)
    controller.recv_from_tokenizer = TappedSocket(controller.recv_from_tokenizer,
                                                  "controller", tap)
    controller.soft_watchdog = QuietWatchdog()
    return controller


async def _drive(managers: list[Any], config: dict[str, Any], timeout_s: float, dead: Any) -> dict[str, Any]:
    """The scenario through SGLang's own app: each request's JSON answer (or its stream's
    chunks). With one tokenizer manager the steps go one after another; with several tokenizer
    workers, step i goes through worker i mod n and the requests are all in flight at once, so
    the scheduler's batches mix the workers' requests (the app reads the worker that serves a
    request from the global state: here one that answers for the request's own worker)."""
    import httpx
    from sglang.srt.entrypoints import http_server

    serving: contextvars.ContextVar[Any] = contextvars.ContextVar("serving", default=managers[0])
    http_server.set_global_state(http_server._GlobalState(
        tokenizer_manager=managers[0] if len(managers) == 1 else _PerRequest(serving), template_manager=None,
        scheduler_info={}))
    transport = httpx.ASGITransport(app=http_server.app)
    responses: dict[str, Any] = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://sglang", timeout=timeout_s) as client:
        async def one(index: int, step: dict[str, Any]) -> None:
            name, path, body = step["name"], step["path"], step["body"]
            serving.set(managers[index % len(managers)])
            if path == ENGINE_ENCODE and not dead():
                got = await answer_within(_engine_encode(serving.get(), body), timeout_s, dead)
                responses[name] = {"$error": f"no answer to {path}: {got}"} if isinstance(got, str) else \
                    {"status": 200, "body": plain(got)}
                return
            responses[name] = await post_step(client, step, timeout_s, dead)

        steps = list(enumerate(config["scenario"]))
        if len(managers) == 1:
            for index, step in steps:
                await one(index, step)
        else:  # requests together, then the control requests in order
            await asyncio.gather(*(one(i, step) for i, step in steps if "control" not in step))
            for index, step in steps:
                if "control" in step:
                    await one(index, step)
    return {step["name"]: responses[step["name"]] for _, step in steps}


@contextlib.contextmanager
def _tapped_sockets(module: Any, links: dict[str, str], tap: Tap) -> Any:
    """While SGLang's code in ``module`` builds its sockets: each made by SGLang's get_zmq_socket
    (its options, its endpoint), then seen by the tap under the name of its endpoint."""
    make = module.get_zmq_socket

    def tapped(context: Any, kind: Any, endpoint: str, bind: bool) -> Any:
        return TappedSocket(make(context, kind, endpoint, bind), links[endpoint], tap)

    module.get_zmq_socket = tapped
    try:
        yield
    finally:
        module.get_zmq_socket = make


async def _engine_encode(manager: Any, body: dict[str, Any]) -> Any:
    """What SGLang's Engine.encode does with a request: its input object, the tokenizer
    manager's generate_request, the first answer (a list for a batch)."""
    from sglang.srt.managers.io_struct import EmbeddingReqInput

    return await manager.generate_request(EmbeddingReqInput(**body), None).__anext__()


class _PerRequest:
    """The tokenizer manager of the app's global state when several workers serve: each request
    reaches the worker its task chose (real deployments run one app per worker process)."""

    def __init__(self, serving: "contextvars.ContextVar[Any]") -> None:
        self._serving = serving

    def __getattr__(self, name: str) -> Any:
        return getattr(self._serving.get(), name)


def _tokenizer_workers(server_args: Any, port_args: Any, count: int, first: str, tap: Tap) -> list[Any]:
    """SGLang's multi-tokenizer mode: its MultiTokenizerRouter (between the workers and the
    scheduler, and back) and ``count`` TokenizerWorkers, each with its own IPC name, as its
    launcher builds them (one process each there; one event loop here)."""
    import copy

    from sglang.srt.managers import multi_tokenizer_mixin as mixin
    from sglang.srt.managers import tokenizer_manager

    # The router starts its loops inside __init__, and a worker sends its registration from its
    # own: their sockets are tapped as SGLang's get_zmq_socket makes them.
    links = {port_args.tokenizer_ipc_name: "router", port_args.scheduler_input_ipc_name: first,
             port_args.tokenizer_worker_ipc_name: "router_from_workers"}
    router = mixin.MultiTokenizerRouter
    with _tapped_sockets(mixin, links, tap):
        router(server_args, port_args)
    workers = []
    for index in range(count):
        worker_args = copy.copy(port_args)
        worker_args.tokenizer_ipc_name = f"ipc://{tempfile.NamedTemporaryFile(delete=False).name}"
        with _tapped_sockets(tokenizer_manager, {**links, worker_args.tokenizer_ipc_name: f"tokenizer_worker_{index}"},
                             tap):
            workers.append(mixin.get_tokenizer_worker_class(server_args)(server_args, worker_args))
    return workers


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
