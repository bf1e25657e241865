"""The adapter that lets the suite test examples.minimal_impl.impl (docs/third-party.md).

Run: ipc-conformance run --impl examples.minimal_impl.adapter:MinimalAdapter \
         --expectations examples/minimal_impl/expectations.txt
"""

from __future__ import annotations

import pickle
from typing import Any, Mapping, Sequence

import msgspec

from conformance.adapters import Adapter
from conformance.schema.manifest.extract import extract_with_classes

from . import impl


class MinimalAdapter(Adapter):
    name = "minimal-example"
    version = "0.1"
    # msgspec's errors, its int and str encode errors, and the ValueError of its own refusals
    refusal_errors = (msgspec.DecodeError, msgspec.EncodeError, OverflowError, UnicodeError, ValueError)
    # What the methods below implement (conformance/adapters/base.py CAPABILITIES); no ZeroMQ here.
    capabilities = frozenset({"unwrap", "receive", "http", "define"})

    def __init__(self) -> None:
        self._manifest, self._classes = extract_with_classes(
            impl.structs.__name__, union_attr="CUSTOM_MESSAGE_TYPES", array_typecode="q")

    def classes(self) -> Mapping[str, type]:
        return self._classes

    def live_manifest(self) -> Any:
        return self._manifest

    def message_types(self) -> Sequence[type]:
        return impl._messages()

    def manifest_id(self) -> str:
        return impl.MANIFEST.id

    def encode(self, obj: Any, transport: str) -> bytes:
        return impl.encode(obj, transport)

    def decode(self, data: bytes, transport: str) -> Any:
        return impl.decode(data, transport)

    def wrap(self, obj: Any) -> Any:
        return self._map_wrappers(obj, lambda v: v if isinstance(v, impl.structs.PickleWrapper)
                                  else impl.structs.PickleWrapper(pickle.dumps(v)))

    def unwrap(self, obj: Any) -> Any:  # a trusted peer
        wrapper = impl.structs.PickleWrapper
        return self._map_wrappers(obj, lambda v: pickle.loads(v.data) if isinstance(v, wrapper) else v)

    def receive(self, data: bytes, transport: str) -> Any:  # an untrusted peer: never unpickle
        obj = self.decode(data, transport)
        fields = [getattr(obj, f, None) for f in getattr(obj, "__struct_fields__", ())]
        if transport == "msgpack" and any(isinstance(v, impl.structs.PickleWrapper) for v in [obj, *fields]):
            raise ValueError("PickleWrapper from an untrusted peer refused")
        return obj

    def validate_http(self, struct: str, json_text: str) -> Any:
        from pydantic import TypeAdapter

        return TypeAdapter(self._classes[struct]).validate_json(json_text)

    def _map_wrappers(self, obj: Any, fn: Any) -> Any:
        if not isinstance(obj, msgspec.Struct):
            return obj
        obj = msgspec.structs.replace(obj)
        for name in ("time_stats", "customized_info"):
            if getattr(obj, name, None) is not None:
                setattr(obj, name, fn(getattr(obj, name)))
        if isinstance(getattr(obj, "batch", None), list):  # a batched input: each sub-request has its own
            obj.batch = [self._map_wrappers(item, fn) for item in obj.batch]
        return obj
