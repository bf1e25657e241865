"""Adapter for this project's reference implementation."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .base import Adapter


class ReferenceAdapter(Adapter):
    name = "reference"

    def __init__(self) -> None:
        import reference_impl
        from reference_impl import codec, io_struct

        self._codec = codec
        self._module = io_struct
        self.version = getattr(reference_impl, "__version__", "0.1.0")
        self._extracted: Any = None

    def _extract(self) -> Any:
        from ..manifest.extract import extract_with_classes

        if self._extracted is None:
            self._extracted = extract_with_classes(self._module.__name__, union_attr="CUSTOM_MESSAGE_TYPES",
                                                   array_typecode="q")
        return self._extracted

    def classes(self) -> Mapping[str, type]:
        return self._extract()[1]

    def live_manifest(self) -> Any:
        return self._extract()[0]

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

    def pickle_residue(self) -> dict[str, int]:
        from reference_impl.pickle_wrapper import pickle_residue

        return dict(pickle_residue)

    def validate_http(self, struct: str, json_text: str) -> Any:
        from pydantic import TypeAdapter

        return TypeAdapter(getattr(self._module, struct)).validate_json(json_text)

    def manifest_id(self) -> str:
        return self._module.MANIFEST_ID
