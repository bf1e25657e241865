"""Adapter for this project's reference implementation."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from conformance.adapters.base import OPTIONAL_CAPABILITIES, Adapter, EnginePayload, ReceivePath
from conformance.adapters.e2e import E2ERun, TappedMessage
from reference_impl.errors import WireError

if TYPE_CHECKING:
    from conformance.pipeline import PipelineRun, Topology

#: The hops of the reference's pipeline runs leave out, and why.
PIPELINE_NOT_DRIVEN = {
    "model forward": "replaced by the stub model (--model stub, reference_impl/engine/stub_model.py), "
                     "the one stand-in",
    "tracing on": "driven by the Trace and E2E checks, not in the pipeline runs",
    "engine API (engine:encode)": "the reference has no in-process Engine API: its pooled hidden states are "
                                  "answered by its HTTP /encode (return_pooled_hidden_states: the values and dtype)",
}
#: Scheduler ranks behind the controller in the receive-path checks: a broadcast reaches several.
RECEIVE_PATH_DP_SIZE = 2
TRACE_CARRIER = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}


class ReferenceAdapter(Adapter):
    name = "reference"
    catalogue_module = "reference_impl.io_struct"
    catalogue_options = {"union_attr": "CUSTOM_MESSAGE_TYPES", "array_typecode": "q"}
    refusal_errors = (WireError,)  # the codec's one error, for every input it refuses
    capabilities = OPTIONAL_CAPABILITIES  # every one: the reference is what the suite is checked on
    # Its own tracing across real processes, each with IPC_TRANSPORT set (reference_tools/trace_hops.py).
    trace_driver = "reference_tools.trace_hops"

    def __init__(self, *, engine_debug_skip_unwrap: Sequence[str] = ()) -> None:
        """engine_debug_skip_unwrap: test hook only (EngineConfig.debug_skip_unwrap): these engine
        processes' receive paths skip the PickleWrapper unwrap, in the receive-path checks and
        in launched servers, to show that the checks catch it."""
        import importlib.util

        import reference_impl
        from reference_impl import codec, io_struct

        # The reference is a torch engine (its model, its tensors): torch is imported only once a
        # tensor is met, so ask here, without importing it, and name the extra at once.
        if importlib.util.find_spec("torch") is None:
            raise ModuleNotFoundError("No module named 'torch'", name="torch")

        self._codec = codec
        self._module = io_struct
        self.version = reference_impl.__version__  # the distribution's one version (conformance/__init__.py)
        self.engine_debug_skip_unwrap = tuple(engine_debug_skip_unwrap)

    def message_types(self) -> Sequence[type]:
        return self._codec.message_types()

    def encode(self, obj: Any, transport: str) -> bytes:
        return self._codec.encode(obj, transport)

    def wrap(self, obj: Any) -> Any:
        return self._codec.wrap_fields(obj)

    def decode(self, data: bytes, transport: str) -> Any:
        return self._codec.decode(data, transport, unwrap_wrappers=False)

    def unwrap(self, obj: Any) -> Any:
        return self._codec.unwrap(obj, allow_pickle=True)

    def receive(self, data: bytes, transport: str) -> Any:
        return self._codec.decode(data, transport, allow_pickle=False)

    def send(self, sock: Any, obj: Any, transport: str, *, zero_copy: bool = False) -> None:
        from reference_impl import zmq_io

        zmq_io.send(sock, obj, transport, zero_copy=zero_copy)

    def recv(self, sock: Any, transport: str) -> Any:
        from reference_impl import zmq_io

        return zmq_io.recv(sock, transport, allow_pickle=True)

    def trace_env(self, transport: str) -> Mapping[str, str]:
        return {"IPC_TRANSPORT": transport}

    def pickle_residue(self) -> dict[str, int]:
        from reference_impl.pickle_wrapper import pickle_residue

        return dict(pickle_residue)

    def validate_http(self, struct: str, json_text: str) -> Any:
        from pydantic import TypeAdapter

        return TypeAdapter(getattr(self._module, struct)).validate_json(json_text)

    def validate_http_python(self, struct: str, body: Any) -> Any:
        from pydantic import TypeAdapter

        return TypeAdapter(getattr(self._module, struct)).validate_python(body, from_attributes=True)

    def manifest_id(self) -> str:
        return self._module.MANIFEST_ID

    # -- the serving engine (reference_impl/engine) ----------------------------------
    def receive_paths(self) -> Mapping[str, ReceivePath]:
        return {"controller": partial(self._through, "controller"), "scheduler": partial(self._through, "scheduler"),
                "unroutable": self._unroutable, "detokenizer": partial(self._back, "detokenizer"),
                "tokenizer_manager": partial(self._back, "tokenizer_manager")}

    def _rig(self, transport: str) -> Any:
        """The engine's controller and scheduler receive paths over real sockets
        (reference_impl/engine/receive_paths.py), a fresh set per message."""
        from reference_impl.engine.receive_paths import ReceivePathRig

        return ReceivePathRig(transport, dp_size=RECEIVE_PATH_DP_SIZE, debug_skip_unwrap=self.engine_debug_skip_unwrap)

    def _unroutable(self, obj: Any, transport: str) -> Any:
        with self._rig(transport) as rig:
            return rig.unroutable(obj)

    def _back(self, path: str, obj: Any, transport: str) -> Any:
        """The engine's detokenizer and tokenizer manager receive paths over real sockets
        (reference_impl/engine/receive_paths.py OutputPathRig), a fresh set per message."""
        from reference_impl.engine.receive_paths import OutputPathRig

        with OutputPathRig(transport, debug_skip_unwrap=self.engine_debug_skip_unwrap) as rig:
            return rig.through_detokenizer(obj) if path == "detokenizer" else rig.through_tokenizer_manager(obj)

    def _through(self, path: str, obj: Any, transport: str) -> Any:
        """The controller's receive path: what it handed to dispatch; the schedulers': what each
        rank handed on after the controller's broadcast (a list, rank by rank)."""
        with self._rig(transport) as rig:
            return rig.through_controller(obj) if path == "controller" else rig.through_scheduler(obj)

    def payload_samples(self) -> Mapping[str, Sequence[Any]]:
        """The engine's own time stats (reference_impl/engine/tracing.py) where its requests and
        outputs carry them: one ReqTimeStats with stamps and a trace carrier per request, a
        TimeStatsBatch (one entry or None per request) per batch output; customized info as the
        per-request lists of a dict; a ReqTimeStats as a whole message, wrapped (top level)."""
        from conformance.adapters.base import TOP_LEVEL_WRAPPER
        from reference_impl.engine.tracing import ReqTimeStats, TimeStatsBatch

        def stats(rid: str) -> ReqTimeStats:
            return ReqTimeStats(rid=rid, stamps={"tokenizer_recv": 1.5, "controller_dispatch": 2.25},
                                trace_carrier=dict(TRACE_CARRIER), external_trace_header=dict(TRACE_CARRIER))

        samples: dict[str, list[Any]] = {TOP_LEVEL_WRAPPER: [stats("top-level")]}
        for struct in ("TokenizedGenerateReqInput", "TokenizedEmbeddingReqInput"):
            samples[f"{struct}.time_stats"] = [stats(f"{struct}-0"), stats("")]
        for struct in ("BatchTokenIDOutput", "BatchStrOutput", "BatchEmbeddingOutput"):
            samples[f"{struct}.time_stats"] = [TimeStatsBatch([stats(f"{struct}-0"), None, stats(f"{struct}-2")])]
        for struct in ("BatchTokenIDOutput", "BatchStrOutput"):
            samples[f"{struct}.customized_info"] = [{"expert_ids": [[1, 2], [3]], "note": ["a", "b"]}]
        return samples

    def engine_payloads(self) -> Mapping[str, EnginePayload]:
        """The engine's own objects as it builds them (reference_tools/engine_payloads.py)."""
        from reference_tools.engine_payloads import engine_payloads

        return engine_payloads()

    def decode_frames(self, frames: Sequence[bytes], transport: str) -> Any:
        return self._codec.decode_frames(frames, transport, allow_pickle=True, unwrap_wrappers=False)

    def run_pipeline(self, transport: str, topology: "Topology", workdir: Path) -> "PipelineRun":
        return self.run_pipelines(transport, [topology], workdir)[0]

    def run_pipelines(self, transport: str, topologies: Sequence["Topology"], workdir: Path) -> list["PipelineRun"]:
        """The scenario through the engine's own server and processes (reference_tools/pipeline_driver.py),
        --model stub, the transport chosen by SGLANG_USE_PICKLE_IPC spelled as each topology says
        (the topologies that spell it alike in one driver process, a server each); then what the
        engine's tap recorded in each run (received, produced, links)."""
        from conformance.pipeline import PipelineRun, switch_value
        from conformance.pipeline_runner import run_module
        from reference_tools.pipeline_driver import records

        by_switch: dict[str, list[Topology]] = {}
        runs: dict[str, PipelineRun] = {}
        for topology in topologies:
            if topology.tokenizer_workers > 1:
                runs[topology.name] = PipelineRun(transport=transport, topology=topology, unsupported=(
                    "the reference engine has one tokenizer manager a server (no multi-tokenizer mode)"))
            else:
                by_switch.setdefault(switch_value(topology, transport), []).append(topology)
        for switch, group in by_switch.items():
            folder = workdir / f"switch-{switch}"
            env = {"SGLANG_USE_PICKLE_IPC": switch, **self.pipeline_env(folder)}
            for run in run_module("reference_tools.pipeline_driver", transport, group, folder, env=env,
                                  not_driven=PIPELINE_NOT_DRIVEN):
                tap_dir = folder / f"run-{run.topology.name}" / "tap"
                if tap_dir.is_dir():
                    found = records(tap_dir)
                    run.received, run.produced, run.links = found["received"], found["produced"], found["links"]
                runs[run.topology.name] = run
        return [runs[t.name] for t in topologies]

    def pipeline_env(self, workdir: Path) -> dict[str, str]:
        """More environment for a pipeline run's processes (the proof's engine mutants plant here)."""
        return {}

    def run_e2e(self, transport: str, dp_size: int, workdir: Path) -> E2ERun:
        """reference_tools.e2e.run_engine with this adapter's engine options, as facts for the suite."""
        from reference_tools.e2e import ServerProcess, run_engine
        from reference_tools.e2e.expected import CHAIN, EMBED_CHAIN, link_messages
        from reference_tools.e2e.scenario import PARENT_SPAN, TRACE_IDS, comparable_results

        skip = [arg for process in self.engine_debug_skip_unwrap for arg in ("--debug-skip-unwrap", process)]
        run = run_engine(f"{transport}-dp{dp_size}", transport, dp_size,
                         lambda: ServerProcess(Path(workdir), transport, dp_size, extra_args=tuple(skip)).start())
        records = [TappedMessage(process=r.process, link=r.link, transport=r.transport, frames=list(r.frames),
                                 delivered_type=r.delivered_type, leftover_wrappers=list(r.leftover_wrappers))
                   for r in run.records]
        return E2ERun(transport=transport, dp_size=dp_size, info=run.info, responses=run.scenario_results,
                      comparable_responses=comparable_results(run.scenario_results) if not run.scenario_error else {},
                      scenario_error=run.scenario_error, records=records, spans=run.spans, shutdown=run.shutdown,
                      trace_ids=dict(TRACE_IDS), parent_span=PARENT_SPAN,
                      trace_chains={kind: EMBED_CHAIN if kind == "encode" else CHAIN for kind in TRACE_IDS},
                      link_messages=link_messages(dp_size))
