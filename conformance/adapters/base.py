"""The adapter interface: what an implementation provides to be tested."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

if TYPE_CHECKING:
    from ..manifest import Manifest


class Adapter:
    """One implementation under test.

    Subclasses set ``name``/``version``/``transports`` and implement the methods.
    ``decode`` is the wire decode only (PickleWrappers stay wrapped); ``unwrap`` is
    the implementation's receive-side unwrap, as its trusted receive paths run it.
    """

    name: str = "?"
    version: str = "?"
    transports: Sequence[str] = ("pickle", "msgpack")

    def classes(self) -> Mapping[str, type]:
        """Every struct and enum of the catalogue, by name."""
        raise NotImplementedError

    def live_manifest(self) -> "Manifest":
        """The catalogue as the implementation defines it now (extracted from its classes)."""
        raise NotImplementedError

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

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"

    def manifest_id(self) -> Optional[str]:
        """The bundled manifest this implementation claims to match, if any."""
        return None
