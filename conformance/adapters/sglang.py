"""Adapter for an installed SGLang (`sglang.srt.managers.io_struct` + `msgpack_utils`).

Calls upstream's own functions: `msgpack_encode` and its union decoder for
msgpack, `send_pyobj`'s pickle for pickle, `sock_send` / `sock_recv` on sockets (its
top-level decode opens a top-level PickleWrapper), and the structs' `unwrap_pickle_fields`
for the receive side. Its engine's receive paths (data-parallel controller, scheduler request
receiver, detokenizer) run in-process over real sockets (conformance/adapters/sglang_engine.py).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import msgspec

from conformance.adapters.base import IN_PROCESS, TOP_LEVEL_WRAPPER, Adapter, EnginePayload, ReceivePath

if TYPE_CHECKING:
    from conformance.pipeline import PipelineRun, Topology

MODULE = "sglang.srt.managers.io_struct"
# Importing this registers KvMetrics in the top-level union (hook_custom_types).
CUSTOM_TYPE_MODULES = ("sglang.srt.managers.scheduler_components.kv_events_publisher",)


#: The hops of an SGLang deployment its pipeline runs leave out on a CPU machine, and why.
SGLANG_NOT_DRIVEN = {
    "model forward": "replaced by the deterministic stub scheduler (tokens, logprobs, hidden states, customized "
                     "info); SGLang's Scheduler class needs a GPU model runner",
    "scheduler request handling": "the stub builds SGLang's Req from the received request (the arguments of "
                                  "Scheduler.handle_generate_request); batching and the KV cache are the model's",
    "multi-tokenizer worker processes": "its router and workers run in one process, on one event loop (SGLang's "
                                        "launcher starts one process each); the app serves each request from "
                                        "the worker the scenario chose",
    "tracing on": "driven by the Trace checks (their own processes), not in the pipeline runs",
    "HTTP server": "SGLang's FastAPI app is driven in process (httpx's ASGI transport), not through uvicorn",
}


class SGLangAdapter(Adapter):
    name = "sglang"
    catalogue_module = MODULE
    catalogue_options = {"imports": CUSTOM_TYPE_MODULES, "array_typecode": "q"}
    # What upstream refuses with on purpose: msgspec's decode errors (ValidationError is one;
    # msgpack_utils raises DecodeError for a short buffer extension), msgspec's encode error,
    # the OverflowError of an int beyond 64 bits, the UnicodeError of a str that is not valid
    # Unicode (msgspec up to 0.22 also decodes bad UTF-8 with it). Anything else its extension
    # hook lets escape (ValueError unpacking metadata, torch's RuntimeError) is a crash.
    refusal_errors = (msgspec.DecodeError, msgspec.EncodeError, OverflowError, UnicodeError)
    # No zero-copy send (SGLang 0.5.23 has none), no server run here. The tokenizer manager's
    # receive path is not driven: its batch-output handler opens customized info into a local
    # that only waiting request states see (sglang_engine.py).
    capabilities = IN_PROCESS | {"http_python", "receive_path.controller", "receive_path.scheduler",
                                 "receive_path.detokenizer", "receive_path.unroutable", "pipeline", "trace"}
    # Its own tracing across real processes, each with SGLANG_USE_PICKLE_IPC set (sglang_trace.py).
    trace_driver = "conformance.adapters.sglang_trace"

    def __init__(self) -> None:
        self._io: Any = importlib.import_module(MODULE)  # SGLang ships no type information
        for module in CUSTOM_TYPE_MODULES:
            importlib.import_module(module)
        self.version = importlib.metadata.version("sglang")


    def message_types(self) -> Sequence[type]:
        return [t for t in self._io._all_types if isinstance(t, type) and hasattr(t, "__struct_config__")]

    def encode(self, obj: Any, transport: str) -> bytes:
        if transport == "pickle":
            return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        data: bytes = self._io.msgpack_encode(obj)
        return data

    def wrap(self, obj: Any) -> Any:
        return self._with_msgpack_mode(lambda: _wrapped_copy(obj, self._io))

    def decode(self, data: bytes, transport: str) -> Any:
        if transport == "pickle":
            return pickle.loads(data)
        return self._io._msgpack_decoder.decode(data)

    def unwrap(self, obj: Any) -> Any:
        # A top-level wrapper as msgpack_decode opens it (_maybe_unwrap_pickle), then the fields.
        return self._with_msgpack_mode(lambda: self._unwrap_fields(self._io._maybe_unwrap_pickle(obj)))

    def _unwrap_fields(self, value: Any) -> Any:
        """The receivers' unwrap of PickleWrapper fields: the request structs' unwrap_pickle_fields
        (the scheduler's, on each sub-request of a batch), unwrap_from_pickle on each such field of
        an output (the tokenizer manager's)."""
        def run() -> Any:
            if hasattr(value, "unwrap_pickle_fields"):
                value.unwrap_pickle_fields()
            elif isinstance(getattr(value, "batch", None), list):
                for item in value.batch:
                    if hasattr(item, "unwrap_pickle_fields"):
                        item.unwrap_pickle_fields()
            else:
                for name in _wrapper_fields(type(value), self._io.PickleWrapper):
                    setattr(value, name, self._io.unwrap_from_pickle(getattr(value, name)))
            return value

        return self._with_msgpack_mode(run)

    def receive(self, data: bytes, transport: str) -> Any:
        # Upstream's receive path: msgpack_decode (which opens a top-level wrapper), then the fields.
        if transport == "pickle":
            return pickle.loads(data)
        return self._unwrap_fields(self._io.msgpack_decode(data))

    def send(self, sock: Any, obj: Any, transport: str, *, zero_copy: bool = False) -> None:
        if zero_copy:
            raise ValueError("SGLang 0.5.23 has no zero-copy send (capability 'zero_copy' is not declared)")
        from conformance.adapters.sglang_engine import transport_mode

        with transport_mode(self._io, transport):
            self._io.sock_send(sock, obj)

    def recv(self, sock: Any, transport: str) -> Any:
        # sock_recv (recv_pyobj, or msgpack_decode: it opens a top-level wrapper), then the
        # receiver's unwrap of opaque fields (a trusted peer).
        from conformance.adapters.sglang_engine import transport_mode

        with transport_mode(self._io, transport):
            value = self._io.sock_recv(sock)
        return self._unwrap_fields(value)

    def trace_env(self, transport: str) -> Mapping[str, str]:
        return {"SGLANG_USE_PICKLE_IPC": "1" if transport == "pickle" else "0"}

    # -- the engine's receive paths (sglang_engine.py) -------------------------------
    def receive_paths(self) -> Mapping[str, ReceivePath]:
        return {"controller": self._controller, "scheduler": self._scheduler, "unroutable": self._unroutable,
                "detokenizer": self._detokenizer}

    def _sent_form(self, obj: Any, transport: str) -> Any:
        """What the sending process puts on its socket: under msgpack its wrapped copy (the tokenizer
        manager's wrap_pickle_fields, per sub-request of a batch; the scheduler's wrap_as_pickle)."""
        return self.wrap(obj) if transport == "msgpack" else obj

    def _controller(self, obj: Any, transport: str) -> Any:
        """The tokenizer manager sends; the controller's event loop receives and dispatches. Returns
        the message as the controller's code left it, once its dispatch reached the rank(s)."""
        from conformance.adapters.sglang_engine import DP_SIZE, EngineRig, ReceivePathError

        with EngineRig(self._io, transport) as rig:
            rig.send_as_tokenizer_manager(self._sent_form(obj, transport))
            handled = rig.controller_handled()
            batch = getattr(handled, "batch", None)
            routed = type(handled).__name__ in ("TokenizedGenerateReqInput", "TokenizedEmbeddingReqInput")
            want = len(batch) if isinstance(batch, list) else 1 if routed else DP_SIZE
            forwarded = rig.ranks_received(want)
            if len(forwarded) < want:
                raise ReceivePathError(f"the controller dispatched {type(handled).__name__}, but {len(forwarded)} "
                                       f"of {want} message(s) reached the scheduler ranks")
            return handled

    def _scheduler(self, obj: Any, transport: str) -> list[Any]:
        """The controller's broadcast (send_control_message) to every rank; what each rank's
        SchedulerRequestReceiver.recv_requests handed the scheduler."""
        from conformance.adapters.sglang_engine import DP_SIZE, EngineRig, ReceivePathError

        with EngineRig(self._io, transport) as rig:
            rig.controller.send_control_message(self._sent_form(obj, transport))
            got = []
            for rank in range(DP_SIZE):
                received = rig.rank_received(rank)
                if len(received) != 1:
                    raise ReceivePathError(f"scheduler rank {rank} received {len(received)} messages, not 1")
                got.append(received[0])
            return got

    def _unroutable(self, obj: Any, transport: str) -> Any:
        """A request naming a rank the controller does not have: what the controller answered."""
        from conformance.adapters.sglang_engine import EngineRig, ReceivePathError

        with EngineRig(self._io, transport) as rig:
            rig.send_as_tokenizer_manager(self._sent_form(obj, transport))
            handled = rig.controller_handled()
            raise ReceivePathError(f"the controller dispatched {type(handled).__name__} naming routed_dp_rank "
                                   f"{handled.routed_dp_rank} and answered nothing")

    def _detokenizer(self, obj: Any, transport: str) -> Any:
        from conformance.adapters.sglang_engine import OutputRig

        with OutputRig(self._io, transport) as rig:
            return rig.through_detokenizer(self._sent_form(obj, transport))

    # -- its own pipeline (sglang_pipeline.py) -------------------------------------------
    def run_pipelines(self, transport: str, topologies: Sequence["Topology"], workdir: Path) -> list["PipelineRun"]:
        """SGLang's own processes' code, the topologies that spell the switch alike in one process
        (SGLang read once), SGLANG_USE_PICKLE_IPC in its environment (sglang_pipeline.py)."""
        from conformance.pipeline import switch_value
        from conformance.pipeline_runner import run_module

        # A multi-tokenizer run after two data-parallel runs in one process hangs building its router:
        # those runs get processes of their own.
        groups: dict[tuple[str, bool], list[Topology]] = {}
        for topology in topologies:
            groups.setdefault((switch_value(topology, transport), topology.tokenizer_workers > 1), []).append(topology)
        runs: dict[str, PipelineRun] = {}
        for (switch, workers), group in groups.items():
            done = run_module("conformance.adapters.sglang_pipeline", transport, group,
                              workdir / f"switch-{switch}{'-workers' if workers else ''}",
                              env={"SGLANG_USE_PICKLE_IPC": switch}, not_driven=SGLANG_NOT_DRIVEN)
            runs.update((run.topology.name, run) for run in done)
        return [runs[t.name] for t in topologies]

    # -- its own payloads --------------------------------------------------------------
    def payload_samples(self) -> Mapping[str, Sequence[Any]]:
        """SGLang's own objects at its opaque positions: the time stats each process sends
        (APIServerReqTimeStats from the tokenizer manager, DPControllerReqTimeStats from the
        controller, a list of SchedulerReqTimeStats per batch output), customized info (a dict of
        per-request lists), and the data-parallel controller's handshakes, which it sends as
        top-level PickleWrappers (WorkerPortHandshake, the node rank as a str; releases without
        WorkerPortHandshake, 0.5.19 among them, send the worker ports as a plain list)."""
        from sglang.srt.observability.req_time_stats import (
            APIServerReqTimeStats,
            DPControllerReqTimeStats,
            SchedulerReqTimeStats,
        )

        def api() -> Any:
            return APIServerReqTimeStats(created_time=1.5, tokenize_finish_time=1.75, api_server_dispatch_time=2.0)

        def scheduler(stamp: float) -> Any:
            return SchedulerReqTimeStats(wait_queue_entry_time=stamp, forward_entry_time=stamp + 0.5,
                                         has_timing_data=True)

        requests = {f"{struct}.time_stats": [api(), DPControllerReqTimeStats(created_time=1.5, dpc_dispatch_time=2.5)]
                    for struct in ("TokenizedGenerateReqInput", "TokenizedEmbeddingReqInput")}
        outputs = {f"{struct}.time_stats": [[scheduler(3.0), scheduler(4.0)]]
                   for struct in ("BatchTokenIDOutput", "BatchStrOutput", "BatchEmbeddingOutput")}
        info = {f"{struct}.customized_info": [{"expert_ids": [[1, 2], [3]], "note": ["a", "b"]}]
                for struct in ("BatchTokenIDOutput", "BatchStrOutput")}
        try:
            from sglang.srt.managers.data_parallel_controller import WorkerPortHandshake
        except ImportError:  # sock_send(rep_socket, wrap_as_pickle(worker_ports))
            handshakes: list[Any] = [[31000, 31001], "1"]
        else:
            handshakes = [WorkerPortHandshake(worker_ports=[31000, 31001], attn_tp_size=1, attn_cp_size=1), "1"]
        return {TOP_LEVEL_WRAPPER: handshakes, **requests, **outputs, **info}

    def engine_payloads(self) -> Mapping[str, EnginePayload]:
        """Upstream's own objects as its processes build them (conformance/adapters/sglang_payloads.py)."""
        from conformance.adapters.sglang_payloads import engine_payloads

        return engine_payloads()

    def validate_http(self, struct: str, json_text: str) -> Any:
        from pydantic import TypeAdapter

        return TypeAdapter(self.classes()[struct]).validate_json(json_text)

    def validate_http_python(self, struct: str, body: Any) -> Any:
        # What FastAPI (fastapi/_compat/v2.py ModelField.validate) runs on a route's parsed body.
        from pydantic import TypeAdapter

        return TypeAdapter(self.classes()[struct]).validate_python(body, from_attributes=True)

    def manifest_id(self) -> str:
        return f"sglang-{self.version}"

    def _with_msgpack_mode(self, fn: Any) -> Any:
        # wrap_as_pickle / unwrap_from_pickle are no-ops unless msgpack IPC is on.
        saved = self._io._USE_PICKLE_IPC
        self._io._USE_PICKLE_IPC = False
        try:
            return fn()
        finally:
            self._io._USE_PICKLE_IPC = saved


def _wrapped_copy(obj: Any, io: Any) -> Any:
    """Upstream wraps either through the struct's wrap_pickle_fields() or, for outputs,
    by passing wrap_as_pickle(value) into PickleWrapper-typed fields at construction."""
    import copy

    clone = copy.copy(obj)
    if hasattr(clone, "wrap_pickle_fields"):
        clone.wrap_pickle_fields()
        return clone
    if isinstance(getattr(clone, "batch", None), list):  # the tokenizer manager wraps each sub-request
        clone.batch = [_wrapped_copy(item, io) for item in clone.batch]
        return clone
    for name in _wrapper_fields(type(obj), io.PickleWrapper):
        value = getattr(clone, name)
        if value is not None and not isinstance(value, io.PickleWrapper):
            setattr(clone, name, io.wrap_as_pickle(value))
    return clone


def _wrapper_fields(cls: type, wrapper: type) -> list[str]:
    import msgspec
    import msgspec.inspect as mi

    if not (isinstance(cls, type) and issubclass(cls, msgspec.Struct)):
        return []
    names = []
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    for field in info.fields:
        arms = field.type.types if isinstance(field.type, mi.UnionType) else (field.type,)
        if any(isinstance(a, mi.StructType) and a.cls is wrapper for a in arms):
            names.append(field.name)
    return names
