"""The reference with defects planted where each check family looks, one known field each, so
tests/test_failure_messages.py can hold every failure message to the truth: the step it
names (encode or decode), the path it names (the planted field), the input it shows.

Each defect touches one message and one field of it (PLANTED lists them); everything else is
the reference. `NonFiniteAsNil` is the 0-d ndarray defect of SGLang (as
tests/sglang_like_adapter.py models it) plus a second, new one: non-finite floats in
logprob lists written as nil.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import msgspec
import torch
from sglang_like_adapter import SGLangLike

from reference_tools.adapter import ReferenceAdapter

#: defect -> (message, field, the side that is wrong)
PLANTED = {
    "decode": ("AbortReq", "abort_message", "decode"),  # msgpack decode writes a constant into the field
    "encode": ("FlushCacheReqInput", "timeout_s", "encode"),  # msgpack encode flips the float's sign
    "bytes": ("ActiveRanksOutput", "rid", "encode"),  # msgpack encode writes the str field as bin
    "logprobs": ("BatchTokenIDOutput", "input_token_logprobs_val", "encode"),  # an empty row written as nil
    "tensor": ("BatchEmbeddingOutput", "pooled_hidden_states", "encode"),  # bfloat16 sent as float32
    "refuses": ("AbortReq", "abort_all", "decode"),  # a refused AbortReq decodes to a default one
    "http": ("UpdateWeightsFromTensorReqInput", "serialized_named_tensors", "http"),  # base64 read leniently
}
PLANTED_TEXT = "planted"


def _replace(obj: Any, **fields: Any) -> Any:
    return msgspec.structs.replace(obj, **fields)


class Planted(ReferenceAdapter):
    name = "planted"

    def encode(self, obj: Any, transport: str) -> bytes:
        if transport == "msgpack":
            obj = self._planted_encode(obj)
        return super().encode(obj, transport)

    def _planted_encode(self, obj: Any) -> Any:
        kind = type(obj).__name__
        if kind == "FlushCacheReqInput" and isinstance(obj.timeout_s, float):
            return _replace(obj, timeout_s=-obj.timeout_s)
        if kind == "ActiveRanksOutput" and isinstance(obj.rid, str):
            return _replace(obj, rid=obj.rid.encode())
        if kind == "BatchTokenIDOutput" and obj.input_token_logprobs_val:
            return _replace(obj, input_token_logprobs_val=[None if row == [] else row
                                                           for row in obj.input_token_logprobs_val])
        if kind == "BatchEmbeddingOutput" and obj.pooled_hidden_states:
            return _replace(obj, pooled_hidden_states=[
                t.float() if isinstance(t, torch.Tensor) and t.dtype is torch.bfloat16 else t
                for t in obj.pooled_hidden_states])
        return obj

    def decode(self, data: bytes, transport: str) -> Any:
        try:
            value = super().decode(data, transport)
        except self.refusal_errors:
            if transport == "msgpack" and bytes(data[1:10]) == b"\xa8AbortReq":  # a refusal case of AbortReq
                return self.classes()["AbortReq"]()
            raise
        if transport == "msgpack" and type(value).__name__ == "AbortReq":
            value = _replace(value, abort_message=PLANTED_TEXT)
        return value

    def validate_http(self, struct: str, json_text: str) -> Any:
        """base64 read leniently: characters outside the alphabet are dropped, never refused."""
        def lenient(text: str) -> str:
            kept = "".join(c for c in text if c.isalnum() or c in "+/")
            return base64.b64encode(base64.b64decode(kept[:len(kept) // 4 * 4])).decode()

        raw = json.loads(json_text)
        for key, value in raw.items():
            if isinstance(value, str) and "!" in value:
                raw[key] = lenient(value)
            elif isinstance(value, list) and any(isinstance(v, str) and "!" in v for v in value):
                raw[key] = [lenient(v) if isinstance(v, str) else v for v in value]
        return super().validate_http(struct, json.dumps(raw))


def _nonfinite_as_nil(value: Any) -> Any:
    """Logprob lists with -inf / NaN written as nil (a sender's `x if isfinite(x) else None`)."""
    if not isinstance(value, msgspec.Struct):
        return value
    changed = {}
    for name in value.__struct_fields__:
        rows = getattr(value, name)
        if "logprobs_val" in name and isinstance(rows, list):
            changed[name] = [[None if isinstance(x, float) and not math.isfinite(x) else x for x in row]
                             if isinstance(row, list) else row for row in rows]
    return _replace(value, **changed) if changed else value


class PlantedTwice(Planted):
    """Planted, and a second decode defect in the same message: AbortReq's http_worker_ipc."""

    name = "planted-twice"

    def decode(self, data: bytes, transport: str) -> Any:
        value = super().decode(data, transport)
        if transport == "msgpack" and type(value).__name__ == "AbortReq":
            value = _replace(value, http_worker_ipc=PLANTED_TEXT)
        return value


class NonFiniteAsNil(SGLangLike):
    """SGLang's known 0-d ndarray defect (listed for it) and a new one in the same checks."""

    name = "nonfinite-as-nil"

    def encode(self, obj: Any, transport: str) -> bytes:
        return super().encode(_nonfinite_as_nil(obj) if transport == "msgpack" else obj, transport)
