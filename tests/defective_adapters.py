"""Deliberately defective implementations: one per defect class (docs/defect-classes.md).

Each is the reference adapter with exactly one defect, so tests/test_defects.py can
show the suite reports the matching check as failed.
"""

from __future__ import annotations

import pickle
import sys
import types
from typing import Any, Callable, Union

import msgspec
import torch

from conformance.schema.codegen import generate
from conformance.schema.manifest import load_manifest
from reference_impl import ext
from reference_tools.adapter import ReferenceAdapter


class NoBase64(ReferenceAdapter):
    """http-base64: HTTP JSON base64 strings are taken as UTF-8 text, not decoded."""

    def validate_http(self, struct: str, json_text: str) -> Any:
        import json

        cls = self.classes()[struct]
        raw = json.loads(json_text)
        return cls(**{k: [v.encode() for v in val] if isinstance(val, list) and val and isinstance(val[0], str)
                      and k == "serialized_named_tensors" else val for k, val in raw.items()})


class ForgetsUnwrap(ReferenceAdapter):
    """missing-unwrap: a receive path (the data-parallel controller's) does not unwrap PickleWrapper."""

    def unwrap(self, obj: Any) -> Any:
        return obj


class DropsTraceUnderMsgpack(ReferenceAdapter):
    """trace-lost: opaque fields (time stats with the trace context) are dropped under msgpack."""

    def encode(self, obj: Any, transport: str) -> bytes:
        if transport == "msgpack" and isinstance(obj, msgspec.Struct):
            clean = {f: None for f in ("time_stats", "customized_info") if hasattr(obj, f)}
            obj = msgspec.structs.replace(obj, **clean)
        return super().encode(obj, transport)


class NoTopLevelStr(ReferenceAdapter):
    """top-level-primitive: a top-level str cannot be sent."""

    def encode(self, obj: Any, transport: str) -> bytes:
        if isinstance(obj, str):
            raise TypeError("Cannot serialize object of type <class 'str'> over msgpack IPC")
        return super().encode(obj, transport)


class UnpicklesWireBytes(ReferenceAdapter):
    """pickle-sink: the msgpack receive path calls pickle.loads on PickleWrapper bytes from the wire."""

    def receive(self, data: bytes, transport: str) -> Any:
        obj = self._codec.decode(data, transport, unwrap_wrappers=False)
        if type(obj).__name__ == "PickleWrapper":
            return pickle.loads(obj.data)
        for name in getattr(obj, "__struct_fields__", ()):
            value = getattr(obj, name)
            if type(value).__name__ == "PickleWrapper":
                setattr(obj, name, pickle.loads(value.data))
        return obj


class UpcastsBfloat16(ReferenceAdapter):
    """tensor-fidelity: msgpack sends bfloat16 tensors as float32 (dtype not preserved)."""

    def encode(self, obj: Any, transport: str) -> bytes:
        if transport == "msgpack" and hasattr(obj, "pooled_hidden_states") and obj.pooled_hidden_states:
            obj = msgspec.structs.replace(obj, pooled_hidden_states=[
                t.float() if isinstance(t, torch.Tensor) and t.dtype is torch.bfloat16 else t
                for t in obj.pooled_hidden_states])
        return super().encode(obj, transport)


class KeepsRequiresGradUnderPickle(ReferenceAdapter):
    """tensor-fidelity: pickle keeps requires_grad, msgpack drops it: the transports disagree."""

    def encode(self, obj: Any, transport: str) -> bytes:
        if transport == "pickle":
            return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        return super().encode(obj, transport)


class _ModuleAdapter(ReferenceAdapter):
    """The reference codec's layout over a catalogue generated from an edited manifest."""

    def __init__(self, edit: Callable[[Any], None]) -> None:
        super().__init__()
        manifest = load_manifest("sglang-0.5.23")
        edit(manifest)
        name = f"defective_{type(self).__name__.lower()}"
        module = types.ModuleType(name)
        sys.modules[name] = module
        exec(compile(generate(manifest), name, "exec"), module.__dict__)
        self._defective = module
        self.catalogue_module = name
        union = Union[self.message_types() + (int, float, bool, bytes, None)]  # type: ignore[misc]
        self._encoder = msgspec.msgpack.Encoder(enc_hook=ext.enc_hook)
        self._decoder = msgspec.msgpack.Decoder(union, dec_hook=ext.dec_hook, ext_hook=ext.make_ext_hook())

    def message_types(self) -> tuple:
        return tuple(c for c in self.classes().values() if c.__name__ in {
            s.name for s in self.live_manifest().messages} | {"PickleWrapper"})

    def encode(self, obj: Any, transport: str) -> bytes:
        return pickle.dumps(obj) if transport == "pickle" else self._encoder.encode(obj)

    def decode(self, data: bytes, transport: str) -> Any:
        return pickle.loads(data) if transport == "pickle" else self._decoder.decode(data)


def _retype(struct: str, fields: dict[str, str]) -> Callable[[Any], None]:
    """Change field types in `struct` and in every struct that inherits those fields."""
    def edit(manifest: Any) -> None:
        for spec in manifest.structs.values():
            lineage, base = [spec.name], spec.base
            while base:
                lineage.append(base)
                base = manifest.structs[base].base
            if struct in lineage:
                spec.fields = [msgspec.structs.replace(f, type=fields.get(f.name, f.type)) for f in spec.fields]
    return edit


class NarrowLogprobs(_ModuleAdapter):
    """narrow-logprobs: logprob fields typed List[List[float]]: None entries fail to decode."""

    def __init__(self) -> None:
        narrow = {n: "Optional[List[List[float]]]" for n in (
            "input_token_logprobs_val", "output_token_logprobs_val")}
        super().__init__(lambda m: (_retype("BatchTokenIDOutput", narrow)(m), _retype("BatchStrOutput", narrow)(m)))


class NoLateSubclasses(ReferenceAdapter):
    """struct-discovery: the top-level union is built once, from direct subclasses only."""

    def __init__(self) -> None:
        super().__init__()
        roots = self._module.MESSAGE_ROOTS
        direct = tuple(c for r in roots for c in r.__subclasses__()) + (self._module.PickleWrapper,)
        self._frozen = direct + tuple(self._module.CUSTOM_MESSAGE_TYPES)
        self._decoder = msgspec.msgpack.Decoder(Union[self._frozen + (int, float, bool, bytes, None)],
                                                dec_hook=ext.dec_hook, ext_hook=ext.make_ext_hook())

    def message_types(self) -> tuple:
        return self._frozen

    def decode(self, data: bytes, transport: str) -> Any:
        if transport == "pickle" or data[:1] and data[0] in range(0xA0, 0xC0):
            return super().decode(data, transport)
        return self._decoder.decode(data)


class NarrowRids(_ModuleAdapter):
    """narrow-rid: BaseBatchReq.rids typed str, not a list of str."""

    def __init__(self) -> None:
        super().__init__(_retype("BaseBatchReq", {"rids": "Optional[str]"}))


class UntypedDecode(ReferenceAdapter):
    """msgpack-changes-values: msgpack decodes fields as plain data: tuples, sets, enums, int keys change."""

    def decode(self, data: bytes, transport: str) -> Any:
        if transport == "pickle":
            return super().decode(data, transport)
        raw = msgspec.msgpack.decode(data, ext_hook=ext.make_ext_hook())
        if not (isinstance(raw, list) and raw and isinstance(raw[0], str)):
            return raw
        cls = self.classes()[raw[0]]
        return cls(**dict(zip(cls.__struct_fields__, raw[1:])))


class UnsafeZeroCopy(ReferenceAdapter):
    """buffer-reuse: a zero-copy send returns while ZeroMQ still reads the caller's buffers."""

    def send(self, sock: Any, obj: Any, transport: str, *, zero_copy: bool = False) -> None:
        from reference_impl import codec

        if not zero_copy:
            return super().send(sock, obj, transport)
        sock.send_multipart(codec.encode_frames(obj, transport), copy=False)


class ReorderedFields(_ModuleAdapter):
    """field-inserted: a field inserted in the middle of an array_like struct (old peers read garbage)."""

    def __init__(self) -> None:
        def edit(manifest: Any) -> None:
            from conformance.schema.manifest import Field

            spec = manifest.structs["FlushCacheReqInput"]
            spec.fields.insert(len(spec.fields) - 1, Field(name="priority", type="Optional[int]"))
            out = manifest.structs["BatchTokenIDOutput"]
            a, b = out.fields.index(out.field("decoded_texts")), out.fields.index(out.field("decode_ids"))
            out.fields[a], out.fields[b] = out.fields[b], out.fields[a]

        super().__init__(edit)


# -- the capability contract: declared and failing vs not declared ---------------------------
def _not_written_yet(what: str) -> None:
    raise NotImplementedError(f"{what}: not written yet")  # a genuine gap deep in an implementation


class SendNotImplemented(ReferenceAdapter):
    """Declares 'socket' and 'zero_copy' (as the reference does), but its send path raises
    NotImplementedError inside: the Socket and ZeroCopy checks must fail, not skip."""

    def send(self, sock: Any, obj: Any, transport: str, *, zero_copy: bool = False) -> None:
        _not_written_yet("multipart send")


class ControllerPathNotImplemented(ReferenceAdapter):
    """Declares 'receive_path.controller', whose path raises NotImplementedError inside: the
    ReceivePath.Controller checks must fail, not skip."""

    def receive_paths(self) -> Any:
        return {**super().receive_paths(), "controller": lambda obj, transport: _not_written_yet("controller")}


class NoSocketNoEngine(ReferenceAdapter):
    """The reference declaring neither ZeroMQ nor its engine (nor its traced chain): those checks skip,
    naming what is missing."""

    capabilities = frozenset(c for c in ReferenceAdapter.capabilities
                             if c not in ("socket", "zero_copy", "e2e", "trace") and not c.startswith("receive_path."))


class MisspelledCapability(ReferenceAdapter):
    """Declares 'sockets' (not in the vocabulary): refused when it loads, instead of skipping quietly."""

    capabilities = ReferenceAdapter.capabilities | {"sockets"}
