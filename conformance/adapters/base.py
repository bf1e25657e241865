"""The adapter interface: what an implementation provides to be tested."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence

from conformance import spec_versions
from conformance.transport import TRANSPORTS, Transport

if TYPE_CHECKING:
    from conformance.adapters.e2e import E2ERun
    from conformance.adapters.trace import TraceRun
    from conformance.pipeline import PipelineRun, Topology
    from conformance.schema.manifest import Manifest

#: obj (in-process form: PickleWrapper-typed fields hold their objects), transport -> what the
#: receive path hands downstream.
ReceivePath = Callable[[Any, str], Any]

#: Where an implementation's own objects travel opaque, the keys of Adapter.payload_samples:
#: "<Struct>.<field>" (a PickleWrapper- or Any-typed field of a catalogue message) or
#: TOP_LEVEL_WRAPPER (the object is the whole message, wrapped: a top-level PickleWrapper).
PayloadPosition = str
TOP_LEVEL_WRAPPER = "PickleWrapper"


@dataclass(frozen=True)
class EnginePayload:
    """One object the engine builds and sends inside a message (Adapter.engine_payloads).

    ``build()`` returns a fresh object built the way the engine builds it: through the engine's
    own constructors, setters and normalization (a request's sampling parameters normalized and
    verified as the tokenizer manager does, multimodal items filled through the processor's
    setter, a shared-memory pointer made by the engine's wrap). ``position`` is where it travels:
    "<Struct>.<field>" of a catalogue message. ``release(obj)``, if given, frees what a built or
    received object holds outside the process (a shared-memory segment); the check calls it on
    both after comparing."""

    position: PayloadPosition
    build: Callable[[], Any]
    release: Optional[Callable[[Any], None]] = None


#: The engine receive paths a ReceivePath check can drive (see Adapter.receive_paths).
RECEIVE_PATHS = ("controller", "scheduler", "detokenizer", "tokenizer_manager", "unroutable")

#: The capability vocabulary: what an adapter may declare in ``Adapter.capabilities``, besides
#: its transports. Encode and decode are always required. A check that needs a capability the
#: adapter does not declare is skipped before it does any work, naming the capability; once
#: declared, any exception raised inside the operation is the implementation's failure.
CAPABILITIES: Mapping[str, str] = {
    "unwrap": "the trusted receive path that opens PickleWrappers (unwrap)",
    "receive": "the receive path for an untrusted peer (receive)",
    "http": "HTTP JSON validation (validate_http)",
    "http_python": "HTTP JSON validated as a FastAPI server validates a request body: pydantic's "
                   "validate_python on the parsed JSON (validate_http_python)",
    "define": "decoding a message subclass defined after start-up",
    "socket": "ZeroMQ send and receive (send, recv)",
    "zero_copy": "zero-copy ZeroMQ sends (send with zero_copy=True)",
    **{f"receive_path.{path}": f"the engine's {path} receive path over real sockets (receive_paths)"
       for path in RECEIVE_PATHS},
    "e2e": "running its server with the IPC tap on through the fixed scenario (run_e2e)",
    "pipeline": "running the scenario through its own pipeline per transport and topology (run_pipeline)",
    "trace": "its own tracing, enabled, across real processes: tokenizer manager, controller, scheduler (run_traced)",
}
OPTIONAL_CAPABILITIES = frozenset(CAPABILITIES)
#: What an in-process Python implementation typically offers (the reference declares more).
IN_PROCESS = frozenset({"unwrap", "receive", "http", "define", "socket"})


def unknown_capabilities(declared: Iterable[str]) -> list[str]:
    """The declared names that are not in the vocabulary (a typo would silently skip checks)."""
    return sorted(set(declared) - OPTIONAL_CAPABILITIES)


class Adapter:
    """One implementation under test.

    Subclasses set ``name``/``version``/``transports`` and implement the methods.
    ``decode`` is the wire decode only (PickleWrappers stay wrapped); ``unwrap`` is
    the implementation's receive-side unwrap, as its trusted receive paths run it.
    """

    name: str = "?"
    version: str = "?"
    transports: Sequence[Transport] = TRANSPORTS
    #: Where the catalogue lives, for adapters that describe it by module: classes() and
    #: live_manifest() then extract it once with these extractor options.
    catalogue_module: Optional[str] = None
    catalogue_options: Mapping[str, Any] = {}
    _catalogue: Optional[tuple["Manifest", dict[str, type]]] = None
    #: The exceptions with which this implementation refuses bad input: decode of bytes that
    #: do not match the manifest, encode of a value with no wire form. The Refuses checks pass
    #: only on these; any other exception counts as a crash. Declare them precisely.
    refusal_errors: tuple[type[BaseException], ...] = (ValueError,)
    #: What this adapter offers beyond encode and decode, in the words of CAPABILITIES. Checks
    #: ask ``supports()`` first and skip, naming what is missing, before doing any work. Declare
    #: only what the methods implement: an exception from a declared operation fails its checks.
    capabilities: frozenset[str] = frozenset()
    #: The version of spec/SPEC.md this implementation targets ("major.minor", §14). The run
    #: names the checks newer than it (they still run and fail, SPEC §15). Default: the current one.
    spec_version: str = spec_versions.CURRENT

    def supports(self, what: str) -> bool:
        """Whether a capability (CAPABILITIES) or a transport is offered."""
        return what in self.capabilities or what in self.transports

    def classes(self) -> Mapping[str, type]:
        """Every struct and enum of the catalogue, by name."""
        return self._extracted()[1]

    def live_manifest(self) -> "Manifest":
        """The catalogue as the implementation defines it now (extracted from its classes)."""
        return self._extracted()[0]

    def _extracted(self) -> tuple["Manifest", dict[str, type]]:
        if self.catalogue_module is None:
            raise NotImplementedError(f"{type(self).__name__} sets no catalogue_module")
        if self._catalogue is None:
            from conformance.schema.manifest.extract import extract_with_classes

            self._catalogue = extract_with_classes(self.catalogue_module, **self.catalogue_options)
        return self._catalogue

    def message_types(self) -> Sequence[type]:
        """The types the top-level decoder accepts (the tagged union)."""
        raise NotImplementedError

    def encode(self, obj: Any, transport: Transport) -> bytes:
        """The wire encode of one message (a sender calls wrap first)."""
        raise NotImplementedError

    def wrap(self, obj: Any) -> Any:
        """Sender side: a copy whose PickleWrapper-typed fields hold PickleWrappers."""
        raise NotImplementedError

    def decode(self, data: bytes, transport: Transport) -> Any:
        raise NotImplementedError

    def unwrap(self, obj: Any) -> Any:
        raise NotImplementedError

    def receive(self, data: bytes, transport: Transport) -> Any:
        """The receive path for a peer that is NOT trusted: decode and whatever unwrapping
        the implementation does there. Must never hand wire bytes to pickle (msgpack)."""
        raise NotImplementedError

    def send(self, sock: Any, obj: Any, transport: Transport, *, zero_copy: bool = False) -> None:
        """Send one message on a ZeroMQ socket as the implementation does (capability "socket";
        with zero_copy=True, "zero_copy": the caller may reuse its buffers once this returns)."""
        raise NotImplementedError

    def recv(self, sock: Any, transport: Transport) -> Any:
        """Receive one message from a ZeroMQ socket through the trusted receive path, unwrapped
        (capability "socket")."""
        raise NotImplementedError

    def validate_http(self, struct: str, json_text: str) -> Any:
        """HTTP JSON -> struct through the implementation's pydantic bridge (capability "http")."""
        raise NotImplementedError

    def validate_http_python(self, struct: str, body: Any) -> Any:
        """The parsed HTTP JSON body (``json.loads`` of the request: dicts, lists, str, ...) ->
        struct, the way the implementation's HTTP server validates a request body (capability
        "http_python"). A FastAPI server runs pydantic in Python mode on the parsed body,
        ``TypeAdapter(cls).validate_python(body, from_attributes=True)``, so base64 text reaches
        the bridge as a str in Python mode, not in JSON mode (SPEC R-HTTP-3)."""
        raise NotImplementedError

    # -- a serving engine ------------------------------------------------------------
    def receive_paths(self) -> Mapping[str, ReceivePath]:
        """The engine's real receive paths, by name (capabilities "receive_path.<name>", checks
        ``ReceivePath``). Each function sends obj through that path over real sockets under the
        transport and returns what the path handed downstream: "controller" (the data-parallel
        controller: receive, unwrap, dispatch), "scheduler" (a list: what each scheduler rank
        that received it handed on, after the controller's broadcast or routing), and on the
        way back "detokenizer" (scheduler outputs) and "tokenizer_manager" (detokenizer outputs
        and engine errors); see spec/SPEC.md R-PW-3, R-DP-2. "unroutable" sends a request
        naming a rank the engine does not have to the controller and returns what it answered
        the tokenizer manager (R-DP-5). Declare only the paths the engine has."""
        raise NotImplementedError

    def opaque_value(self, struct: str, field: str) -> Any:
        """An object of the kind this implementation keeps in the PickleWrapper-typed field
        (e.g. its time stats): what the receive-path checks send, so the sender must wrap it.
        By default the first of payload_samples() for that position, else a plain dict."""
        samples = self.payload_samples().get(f"{struct}.{field}")
        if samples:
            return samples[0]
        return {"created": 1.5, "struct": struct, "field": field}

    def payload_samples(self) -> Mapping[PayloadPosition, Sequence[Any]]:
        """Objects of the implementation's own opaque types, as its engine really carries them, by
        position (PayloadPosition): e.g. its time-stats classes with a trace context at
        "TokenizedGenerateReqInput.time_stats", its customized-info dicts, a handshake it sends as
        a top-level PickleWrapper. Checks ``Payload.<position>.StateKept`` send each through the
        sender's wrap, the wire and the trusted receiver's unwrap (a top-level one over a real
        socket with send and recv) and compare the object's state attribute by attribute (its
        __dict__, slots, dataclass or msgspec fields): what a class's pickling leaves out, a
        receiver reads as the class default. The samples must be picklable and fresh on every
        call (a check may change them). Receive-path checks send the first sample of a position
        as the object the sender must wrap (opaque_value). None: no Payload checks."""
        return {}

    def engine_payloads(self) -> Mapping[str, EnginePayload]:
        """The engine's own objects as the engine builds and mutates them, by a name of the
        adapter's choosing (an identifier: it is part of the check id). Checks
        ``EnginePayload.<name>.StateKept.<transport>`` put each at its position of the canonical
        message, send it with this adapter's ``send`` over a real ZeroMQ socket pair and receive
        it with ``recv`` (capability "socket"), then compare the object's state on both sides:
        ``__getstate__()`` where its class defines one, else its fields, ``__dict__`` and slots,
        recursively (tensors by dtype, shape, device and values, dtypes by identity). Unlike
        payload_samples these need not be PickleWrapper positions: any field whose object the
        engine builds with state of its own. None: no EnginePayload checks."""
        return {}

    def decode_frames(self, frames: Sequence[bytes], transport: Transport) -> Any:
        """The wire decode of one multipart message as it came off a socket (PickleWrappers
        stay wrapped). One frame is a plain message; an implementation that sends side frames
        (zero-copy buffers) overrides this."""
        if len(frames) != 1:
            raise ValueError(f"{transport}: {len(frames)} frames; {self.label} decodes single-frame messages only")
        return self.decode(bytes(frames[0]), transport)

    def run_e2e(self, transport: Transport, dp_size: int, workdir: Path) -> "E2ERun":
        """Start this implementation's server with its IPC tap on, send the fixed scenario,
        stop it, and return what happened (capability "e2e"; checks ``E2E``): the responses,
        every tapped message as raw frames, the spans and the shutdown facts. Leaves nothing
        running. The checks decode the tapped frames with this adapter's decode_frames."""
        raise NotImplementedError

    def run_pipeline(self, transport: Transport, topology: "Topology", workdir: Path) -> "PipelineRun":
        """Drive conformance.pipeline's scenario for ``topology`` through this implementation's
        own pipeline, the transport selected the way its users select it, the model's forward
        replaced by a stub that records what it produced (capability "pipeline"; checks
        ``Pipeline``, SPEC §16). Returns the run's record; a hop that died or hung is reported in
        ``errors``, never raised; leaves nothing running."""
        raise NotImplementedError

    def run_pipelines(self, transport: Transport, topologies: Sequence["Topology"],
                      workdir: Path) -> list["PipelineRun"]:
        """run_pipeline for each topology, in order; an implementation whose runs share costly
        set-up (one process for several topologies) overrides this instead."""
        return [self.run_pipeline(transport, t, workdir / t.name) for t in topologies]

    # -- its own tracing, enabled, across processes (conformance/adapters/trace.py) ----------
    #: The module each process of the traced chain runs (``python -m <module> <role> <workdir>
    #: <ipc_dir>``, see conformance/adapters/trace.py); None: no ``trace`` capability.
    trace_driver: Optional[str] = None
    #: Python source each traced process runs before its driver (a test hook that plants a defect).
    trace_prelude: str = ""
    trace_timeout_s: float = 120.0

    def trace_env(self, transport: Transport) -> Mapping[str, str]:
        """The environment that selects the transport, as the implementation's users set it."""
        raise NotImplementedError

    def run_traced(self, request: Any, transport: Transport, workdir: Path) -> "TraceRun":
        """Run the implementation's own tracing, enabled, across three real processes (capability
        "trace"; checks ``Trace.<Hop>.OneLinkedTrace``): the tokenizer manager opens the request's
        trace context the engine's way from the client's traceparent, puts it in `request`'s time
        stats and sends it with its own send; the data-parallel controller receives and unwraps it
        with its own code, continues the trace and forwards it; a scheduler receives it and
        continues the trace. Returns every span they exported. By default the processes run
        ``trace_driver`` with ``trace_env(transport)``."""
        from conformance.adapters.trace import run_chain

        if self.trace_driver is None:
            raise NotImplementedError(f"{type(self).__name__} sets no trace_driver")
        return run_chain(self.trace_driver, self.trace_env(transport), workdir, request, prelude=self.trace_prelude,
                         timeout_s=self.trace_timeout_s, transport=transport)

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"

    def manifest_id(self) -> Optional[str]:
        """The bundled manifest this implementation claims to match, if any."""
        return None
