"""The adapter interface: what an implementation provides to be tested."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

if TYPE_CHECKING:
    from conformance.schema.manifest import Manifest

#: obj (in-process form: PickleWrapper-typed fields hold their objects), transport -> what the
#: receive path hands downstream.
ReceivePath = Callable[[Any, str], Any]

#: The optional operations a check may need besides encode/decode: `unwrap` (the trusted
#: receive path), `receive` (the untrusted one), `http` (validate_http), `define` (a subclass
#: defined after start-up), `socket` (send/recv over ZeroMQ).
OPTIONAL_CAPABILITIES = frozenset({"unwrap", "receive", "http", "define", "socket"})


class Adapter:
    """One implementation under test.

    Subclasses set ``name``/``version``/``transports`` and implement the methods.
    ``decode`` is the wire decode only (PickleWrappers stay wrapped); ``unwrap`` is
    the implementation's receive-side unwrap, as its trusted receive paths run it.
    """

    name: str = "?"
    version: str = "?"
    transports: Sequence[str] = ("pickle", "msgpack")
    #: Where the catalogue lives, for adapters that describe it by module: classes() and
    #: live_manifest() then extract it once with these extractor options.
    catalogue_module: Optional[str] = None
    catalogue_options: Mapping[str, Any] = {}
    _catalogue: Optional[tuple] = None
    #: The exceptions with which this implementation refuses bad input: decode of bytes that
    #: do not match the manifest, encode of a value with no wire form. The Refuses checks pass
    #: only on these; any other exception counts as a crash. Declare them precisely.
    refusal_errors: tuple[type[BaseException], ...] = (ValueError,)
    #: Which OPTIONAL_CAPABILITIES this adapter offers. Checks ask ``supports()`` first and skip,
    #: naming what is missing, before doing any work (an in-process adapter offers them all).
    capabilities: frozenset[str] = OPTIONAL_CAPABILITIES

    def supports(self, what: str) -> bool:
        """Whether an optional capability (OPTIONAL_CAPABILITIES) or a transport is offered."""
        return what in self.capabilities or what in self.transports

    def classes(self) -> Mapping[str, type]:
        """Every struct and enum of the catalogue, by name."""
        return self._extracted()[1]

    def live_manifest(self) -> "Manifest":
        """The catalogue as the implementation defines it now (extracted from its classes)."""
        return self._extracted()[0]

    def _extracted(self) -> tuple:
        if self.catalogue_module is None:
            raise NotImplementedError(f"{type(self).__name__} sets no catalogue_module")
        if self._catalogue is None:
            from conformance.schema.manifest.extract import extract_with_classes

            self._catalogue = extract_with_classes(self.catalogue_module, **self.catalogue_options)
        return self._catalogue

    def message_types(self) -> Sequence[type]:
        """The types the top-level decoder accepts (the tagged union)."""
        raise NotImplementedError

    def encode(self, obj: Any, transport: str) -> bytes:
        """The wire encode of one message (a sender calls wrap first)."""
        raise NotImplementedError

    def wrap(self, obj: Any) -> Any:
        """Sender side: a copy whose PickleWrapper-typed fields hold PickleWrappers."""
        raise NotImplementedError

    def decode(self, data: bytes, transport: str) -> Any:
        raise NotImplementedError

    def unwrap(self, obj: Any) -> Any:
        raise NotImplementedError

    def receive(self, data: bytes, transport: str) -> Any:
        """The receive path for a peer that is NOT trusted: decode and whatever unwrapping
        the implementation does there. Must never hand wire bytes to pickle (msgpack)."""
        raise NotImplementedError

    def send(self, sock: Any, obj: Any, transport: str, *, zero_copy: bool = False) -> None:
        """Send one message on a ZeroMQ socket as the implementation does (optional)."""
        raise NotImplementedError

    def recv(self, sock: Any, transport: str) -> Any:
        """Receive one message from a ZeroMQ socket as the implementation does (optional)."""
        raise NotImplementedError

    def validate_http(self, struct: str, json_text: str) -> Any:
        """HTTP JSON -> struct through the implementation's pydantic bridge (optional)."""
        raise NotImplementedError

    # -- optional capabilities of a serving engine (checks skip without them) ----------
    def receive_paths(self) -> Mapping[str, ReceivePath]:
        """The engine's real receive paths, by name (optional; checks ``ReceivePath``). Each
        function sends obj through that path over real sockets under the transport and returns
        what the path hands downstream. The suite checks "controller" (the data-parallel
        controller: receive, unwrap, dispatch), "scheduler" (a scheduler rank's receive path
        after the controller's broadcast), and on the way back "detokenizer" (scheduler
        outputs) and "tokenizer_manager" (detokenizer outputs and engine errors); see
        spec/SPEC.md R-PW-3, R-DP-2. "unroutable" sends a request naming a rank the engine does
        not have to the controller and returns what it answered the tokenizer manager (R-DP-5).
        Paths an engine does not have are left out (skipped)."""
        raise NotImplementedError(f"{self.label} does not expose its receive paths")

    def opaque_value(self, struct: str, field: str) -> Any:
        """An object of the kind this implementation keeps in the PickleWrapper-typed field
        (e.g. its time stats): what the receive-path checks send, so the sender must wrap it."""
        return {"created": 1.5, "struct": struct, "field": field}

    def launch_server(self, transport: str, dp_size: int, workdir: Path) -> Any:
        """Start a server of this implementation with its IPC tap on (optional; checks ``E2E``).
        Returns it started and healthy, with the interface of reference_tools.e2e.ServerProcess
        (url, info, tap_dir, trace_dir, stop(), kill(), log_text()); raises, leaving nothing
        running, when it does not come up. The suite always stops it."""
        raise NotImplementedError(f"{self.label} cannot launch a server")

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"

    def manifest_id(self) -> Optional[str]:
        """The bundled manifest this implementation claims to match, if any."""
        return None
