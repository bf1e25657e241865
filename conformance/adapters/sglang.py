"""Adapter for an installed SGLang (`sglang.srt.managers.io_struct` + `msgpack_utils`).

Calls upstream's own functions: `msgpack_encode` and its union decoder for
msgpack, `send_pyobj`'s pickle for pickle, and the structs' `unwrap_pickle_fields`
(plus `unwrap_from_pickle` at top level) for the receive side.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pickle
from typing import Any, Sequence

import msgspec

from conformance.adapters.base import IN_PROCESS, Adapter

MODULE = "sglang.srt.managers.io_struct"
# Importing this registers KvMetrics in the top-level union (hook_custom_types).
CUSTOM_TYPE_MODULES = ("sglang.srt.managers.scheduler_components.kv_events_publisher",)


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
    # No zero-copy send (SGLang 0.5.23 has none), no receive paths or server run of its own here.
    capabilities = IN_PROCESS

    def __init__(self) -> None:
        self._io = importlib.import_module(MODULE)
        for module in CUSTOM_TYPE_MODULES:
            importlib.import_module(module)
        self.version = importlib.metadata.version("sglang")


    def message_types(self) -> Sequence[type]:
        return [t for t in self._io._all_types if isinstance(t, type) and hasattr(t, "__struct_config__")]

    def encode(self, obj: Any, transport: str) -> bytes:
        if transport == "pickle":
            return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        return self._io.msgpack_encode(obj)

    def wrap(self, obj: Any) -> Any:
        return self._with_msgpack_mode(lambda: _wrapped_copy(obj, self._io))

    def decode(self, data: bytes, transport: str) -> Any:
        if transport == "pickle":
            return pickle.loads(data)
        return self._io._msgpack_decoder.decode(data)

    def unwrap(self, obj: Any) -> Any:
        def run() -> Any:
            value = self._io.unwrap_from_pickle(obj)
            if hasattr(value, "unwrap_pickle_fields"):
                value.unwrap_pickle_fields()
            elif _batch_of_requests(value):  # the scheduler's request receiver: each sub-request
                for sub_request in value.batch:
                    sub_request.unwrap_pickle_fields()
            else:  # outputs: receivers call unwrap_from_pickle on each such field
                for name in _wrapper_fields(type(value), self._io.PickleWrapper):
                    setattr(value, name, self._io.unwrap_from_pickle(getattr(value, name)))
            return value

        return self._with_msgpack_mode(run)

    def receive(self, data: bytes, transport: str) -> Any:
        # Upstream's receive path: sock_recv -> msgpack_decode, then the struct's unwrap.
        if transport == "pickle":
            return pickle.loads(data)
        return self.unwrap(self._io.msgpack_decode(data))

    def send(self, sock: Any, obj: Any, transport: str, *, zero_copy: bool = False) -> None:
        if zero_copy:
            raise ValueError("SGLang 0.5.23 has no zero-copy send (capability 'zero_copy' is not declared)")
        sock.send(self.encode(obj, transport))

    def recv(self, sock: Any, transport: str) -> Any:
        # sock_recv, then the receiver's unwrap of opaque fields (a trusted peer).
        return self.unwrap(self.decode(sock.recv(), transport))

    def validate_http(self, struct: str, json_text: str) -> Any:
        from pydantic import TypeAdapter

        return TypeAdapter(getattr(self._io, struct)).validate_json(json_text)

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
    if _batch_of_requests(clone):  # the tokenizer manager wraps each request, then batches them
        clone.batch = [_wrapped_copy(item, io) for item in clone.batch]
        return clone
    for name in _wrapper_fields(type(obj), io.PickleWrapper):
        value = getattr(clone, name)
        if value is not None and not isinstance(value, io.PickleWrapper):
            setattr(clone, name, io.wrap_as_pickle(value))
    return clone


def _batch_of_requests(obj: Any) -> bool:
    """A batched tokenized input: its sub-requests wrap and unwrap their own fields."""
    batch = getattr(obj, "batch", None)
    return isinstance(batch, list) and bool(batch) and all(hasattr(r, "wrap_pickle_fields") for r in batch)


def _wrapper_fields(cls: type, wrapper: type) -> list[str]:
    import msgspec
    import msgspec.inspect as mi

    if not (isinstance(cls, type) and issubclass(cls, msgspec.Struct)):
        return []
    names = []
    for field in mi.type_info(cls).fields:
        arms = field.type.types if isinstance(field.type, mi.UnionType) else (field.type,)
        if any(isinstance(a, mi.StructType) and a.cls is wrapper for a in arms):
            names.append(field.name)
    return names
