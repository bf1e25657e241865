"""The reference engine's engine-built payloads (ReferenceAdapter.engine_payloads, checks
``EnginePayload``): its own classes, built the way its processes build them.

- ``sampling_params``: a generate request's ``sampling_params`` dict through the engine's request
  validation (``reference_impl.engine.protocol.generate_specs`` with the engine's byte tokenizer:
  strict validation, greedy normalization, stop strings moved to ``stop_strs`` with their byte
  length, ``is_normalized``), as the tokenizer manager then sends it in ``TokenizedGenerateReqInput``.
- ``time_stats``: a request's ``ReqTimeStats`` as the tokenizer manager's ``_new_state`` makes
  it: the client's trace header, the ``created`` stamp, and the carrier of the request's span
  from the engine's own ``Tracing`` (a real OpenTelemetry span, exported to a temporary folder),
  in the PickleWrapper field ``time_stats``.
- ``mm_items``: the reference engine has no multimodal processor; its own ``MultimodalDataItem``s
  (reference_impl/io_struct.py, a struct with a ``__dict__``) filled the way upstream's processor
  fills them, through ``processor_set`` below (the reference's equivalent of upstream's item
  setter: a field by its name, anything else into ``model_specific_data``), with a tensor
  feature, an image grid and a map holding tensors and lists at nested depth, inside the
  ``MultimodalProcessorOutput`` at ``TokenizedGenerateReqInput.mm_inputs``.
- ``shm_pointer``: the same items whose features are upstream's shared-memory pointers as an
  upstream tokenizer manager sends them (extension 4: a map of the pointer's state with its shape
  and dtype as marker maps nested in it). The reference does not share the engine's memory: it
  carries them as opaque extensions, forwarded byte for byte (SPEC R-EXT-4).
"""

from __future__ import annotations

from typing import Any, Mapping

import msgspec

from conformance.adapters.base import EnginePayload

REQUEST_SAMPLING_PARAMS: Mapping[str, Any] = {
    "max_new_tokens": 24, "min_new_tokens": 2, "stop": ["\n\n", "User:"], "stop_token_ids": [2, 7],
    "temperature": 0.0, "top_p": 0.9, "top_k": 40, "frequency_penalty": 0.25, "logit_bias": {"5": -1.5},
    "sampling_seed": 1234, "skip_special_tokens": False,
}


def sampling_params() -> Any:
    from reference_impl.engine.protocol import GenerateRequest, generate_specs
    from reference_impl.engine.tokenizer import ByteTokenizer

    tokenizer = ByteTokenizer()
    request = GenerateRequest(text="Count: 1. 2.", sampling_params=dict(REQUEST_SAMPLING_PARAMS))
    specs, _ = generate_specs(request, tokenizer, tokenizer.vocab_size, context_length=512)
    return specs[0].sampling_params


TRACE_HEADER = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}


def time_stats() -> Any:
    import tempfile

    from reference_impl.engine.tracing import ReqTimeStats, Tracing

    rid = "engine-built-0"
    stats = ReqTimeStats(rid=rid, external_trace_header=dict(TRACE_HEADER), trace_carrier=dict(TRACE_HEADER))
    stats.mark("created")
    with tempfile.TemporaryDirectory() as folder:
        tracing = Tracing("tokenizer_manager", folder)
        span = tracing.start_span("tokenizer_manager.request", TRACE_HEADER, rid=rid, kind="generate")
        stats.trace_carrier = Tracing.carrier(span, TRACE_HEADER)
        if span is not None:
            span.end()
    return stats


def processor_set(item: Any, name: str, value: Any) -> None:
    """Upstream's MultimodalDataItem.set: a field by its name, any other name into
    model_specific_data (the struct's __dict__ travels under neither transport)."""
    if name in type(item).__struct_fields__:
        setattr(item, name, value)
    else:
        item.model_specific_data[name] = value


def shm_pointer_ext(shape: list[int], dtype: str, name: str) -> msgspec.msgpack.Ext:
    """An upstream shared-memory pointer as its tokenizer manager encodes it: extension 4, the
    msgpack map of its __getstate__ with torch.Size and dtype as marker maps."""
    state = {"shm_name": name, "shape": {"__torch_size__": shape}, "dtype": {"__torch_dtype__": dtype},
             "precomputed_hash": 0x2A}
    return msgspec.msgpack.Ext(4, msgspec.msgpack.encode(state))


def _items(*, pointers: bool) -> Any:
    import torch  # here, not at import: listing the payloads (at collection) needs no torch

    from reference_impl.io_struct import Modality, MultimodalDataItem, MultimodalProcessorOutput

    items = []
    for index, (frames, side) in enumerate(((1, 2), (2, 1))):
        feature: Any = torch.linspace(-1, 1, frames * side * 6, dtype=torch.float32).reshape(frames * side, 6)
        if pointers:
            feature = shm_pointer_ext(list(feature.shape), "float32", f"sgl_shm_mm_{index}")
        output: dict[str, Any] = {
            "feature": feature,
            "image_grid_thw": torch.tensor([[frames, side, 2]], dtype=torch.int64),
            "video_grid_info": {"second_per_grid": [0.5 * (index + 1)], "thw": torch.tensor([frames, side, 2]),
                                "patches": {"mask": torch.ones(2, dtype=torch.bool), "count": frames * side}},
        }
        item = MultimodalDataItem(modality=Modality.IMAGE)
        for name, value in output.items():
            processor_set(item, name, value)
        item.offsets = [(1 + 8 * index, 4 + 8 * index)]
        item.hash, item.pad_value = 1000 + index, 2000 + index
        items.append(item)
    return MultimodalProcessorOutput(mm_items=items, input_ids=list(range(16)), im_token_id=151655,
                                     mrope_positions=torch.arange(48, dtype=torch.int64).reshape(3, 16))


def mm_items() -> Any:
    return _items(pointers=False)


def shm_pointer() -> Any:
    return _items(pointers=True)


def engine_payloads() -> dict[str, EnginePayload]:
    generate = "TokenizedGenerateReqInput"
    return {
        "sampling_params": EnginePayload(f"{generate}.sampling_params", sampling_params),
        "time_stats": EnginePayload(f"{generate}.time_stats", time_stats),
        "mm_items": EnginePayload(f"{generate}.mm_inputs", mm_items),
        "shm_pointer": EnginePayload(f"{generate}.mm_inputs", shm_pointer),
    }
