"""SGLang's engine-built payloads (Adapter.engine_payloads, checks EnginePayload): objects built
by upstream's own classes the way its processes build them, with the state they then carry.

- ``sampling_params``: a request's ``sampling_params`` dict made a ``SamplingParams``, then
  ``normalize(tokenizer)`` and ``verify(vocab_size)``, as ``TokenizerManager`` does before it
  sends ``TokenizedGenerateReqInput`` (stop strings moved to ``stop_strs``, their token lengths,
  ``is_normalized``, which ``__post_init__`` then honours on the receiving side).
- ``mm_items``: ``MultimodalDataItem``s filled through their setter (``item.set(name, value)``)
  as ``BaseMultimodalProcessor.collect_mm_items_from_processor_output`` does with a processor's
  output (``pixel_values`` as ``feature``, ``image_grid_thw``, a dict of per-frame values), with
  offsets and ``set_pad_value()`` (hash, pad values), inside the ``MultimodalProcessorOutput``
  that ``TokenizedGenerateReqInput.mm_inputs`` carries.
- ``shm_pointer``: the same items after the tokenizer manager's shared-memory wrap
  (``mm_utils.wrap_shm_features``: each CPU feature, or each tensor of a list feature, becomes a
  ``ShmPointerMMData``, msgpack extension 4, whose state holds a ``torch.Size`` and a dtype as
  marker maps nested in its state map). ``wrap_shm_features`` itself reads the published server
  configuration, which no server publishes here, so its loop is run with its own
  ``_wrap_tensor_or_list``. The segments are unlinked after the check.
- ``cuda_ipc_proxy``: the same items after the processor's CUDA IPC wrap
  (``_prepare_mm_items_for_transport``: ``setattr(item, field, wrapped)``), each proxy
  (msgpack extension 5) made by ``CudaIpcTensorTransportProxy(...)`` with the arguments
  ``MmItemMemoryPool.wrap_tensor`` passes it (a pool slice, the feature, the pool's IPC handle,
  the lease's offsets and generation). The pool lives on a GPU; here the slice is a CPU tensor
  and the handle a tuple shaped like ``storage._share_cuda_()``'s: the proxy's state (its
  ``proxy_state`` map with shape, dtype, stride and the reconstruction dtype nested in
  ``ipc_extra``, and the consumer protocol's offsets) is what the engine builds.
- ``session_params``: ``SessionParams(**request.session_params)`` as the tokenizer manager builds it.
- ``lora_refs``: ``LoRARef``s made by ``LoadLoRAAdapterReqInput.to_ref()`` (the id as
  ``--lora-paths`` mints it, ``LoRARef.deterministic_id``) in the
  ``loaded_adapters`` of a ``LoRAUpdateOutput`` (its ``Union[str, LoRARef]`` values).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from conformance.adapters.base import EnginePayload

#: A request's sampling parameters as an HTTP client sends them (the generate API's dict).
REQUEST_SAMPLING_PARAMS: Mapping[str, Any] = {
    "max_new_tokens": 32, "min_new_tokens": 2, "stop": ["\n\n", "User:"], "stop_token_ids": [2, 7],
    "stop_regex": ["[0-9]+\\."], "temperature": 0.7, "top_p": 0.9, "top_k": 40, "frequency_penalty": 0.25,
    "logit_bias": {"5": -1.5}, "sampling_seed": 1234, "skip_special_tokens": False,
}
VOCAB_SIZE = 256


class ByteTokenizer:
    """What normalize() asks of a tokenizer: encode a stop string into token ids (UTF-8 bytes)."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(text.encode("utf-8"))


def sampling_params() -> Any:
    from sglang.srt.sampling.sampling_params import SamplingParams

    params = SamplingParams(**dict(REQUEST_SAMPLING_PARAMS))
    params.normalize(ByteTokenizer())
    params.verify(VOCAB_SIZE)
    return params


def _processor_items() -> list[Any]:
    """Two image items as the processor fills them: features and model-specific data set through
    the item's setter, offsets, then set_pad_value() (hash and pad values)."""
    from sglang.srt.managers.schedule_batch import Modality, MultimodalDataItem

    items = []
    for index, (frames, side) in enumerate(((1, 2), (2, 1))):
        output: dict[str, Any] = {
            "pixel_values": torch.linspace(-1, 1, frames * side * 6, dtype=torch.float32).reshape(frames * side, 6),
            "image_grid_thw": torch.tensor([[frames, side, 2]], dtype=torch.int64),
            "video_grid_info": {"second_per_grid": [0.5 * (index + 1)], "thw": torch.tensor([frames, side, 2]),
                                "patches": {"mask": torch.ones(2, dtype=torch.bool), "count": frames * side}},
        }
        item = MultimodalDataItem(modality=Modality.IMAGE)
        for name, value in output.items():  # collect_mm_items_from_processor_output's item.set
            item.set("feature" if name == "pixel_values" else name, value)
        item.offsets = [(1 + 8 * index, 4 + 8 * index)]
        item.set_pad_value()
        items.append(item)
    return items


def _mm_inputs(items: list[Any]) -> Any:
    from sglang.srt.managers.schedule_batch import MultimodalProcessorOutput

    return MultimodalProcessorOutput(mm_items=items, input_ids=list(range(16)), im_token_id=151655,
                                     mrope_positions=torch.arange(48, dtype=torch.int64).reshape(3, 16),
                                     mrope_position_delta=torch.tensor([[-4]]))


def mm_items() -> Any:
    return _mm_inputs(_processor_items())


def shm_pointer() -> Any:
    """The items after wrap_shm_features: the first item's feature one pointer, the second's a
    list of pointers (a list feature is wrapped tensor by tensor)."""
    from sglang.srt.managers import mm_utils

    items = _processor_items()
    items[1].feature = list(items[1].feature.unbind(0))
    for item in items:  # wrap_shm_features' loop
        item.feature = mm_utils._wrap_tensor_or_list(item.feature, precomputed_hash=item.hash)
    if not any(isinstance(p, mm_utils.ShmPointerMMData) for p in [items[0].feature, *items[1].feature]):
        raise RuntimeError("no shared memory segment could be made (/dev/shm full?): nothing to check")
    return _mm_inputs(items)


def release_shm(obj: Any) -> None:
    """Unlink every shared-memory segment the object's pointers name (materialize()'s cleanup)."""
    from sglang.srt.managers import mm_utils

    for item in getattr(obj, "mm_items", None) or []:
        feature = item.feature
        for pointer in feature if isinstance(feature, list) else [feature]:
            if isinstance(pointer, mm_utils.ShmPointerMMData):
                pointer.close_and_unlink()


#: What storage._share_cuda_() returns, in shape: device, handle, size, offset, ref-counter handle
#: and offset, event handle, event sync required.
POOL_IPC_HANDLE = (0, b"\x01" * 64, 1 << 20, 0, b"/torch_ref_counter", 0, b"\x02" * 64, True)


def cuda_ipc_proxy() -> Any:
    """The items after _prepare_mm_items_for_transport: each feature a CudaIpcTensorTransportProxy
    made as MmItemMemoryPool.wrap_tensor makes it (the lease of one slice per feature)."""
    from sglang.srt.multimodal.transport.cuda_ipc import CudaIpcTensorTransportProxy

    items = _processor_items()
    start = 0
    for generation, item in enumerate(items, 1):
        feature = item.feature
        destination = torch.empty_like(feature).copy_(feature)  # the pool slice the feature was copied to
        proxy = CudaIpcTensorTransportProxy(
            data=destination, info_data=feature, pool_ipc_handle=POOL_IPC_HANDLE, pool_byte_offset=start,
            ready_byte_offset=start + 4096, ack_byte_offset=start + 4104, generation=generation,
            total_consumer_count=2, use_pool_handle_cache=True)
        item.feature = proxy  # _prepare_mm_items_for_transport: setattr(item, field, wrapped)
        start += 8192
    return _mm_inputs(items)


def session_params() -> Any:
    from sglang.srt.managers.io_struct import SessionParams

    request = {"id": "session-1", "rid": "turn-2", "offset": 12, "replace": True, "drop_previous_output": False}
    return SessionParams(**request)


def lora_refs() -> Any:
    from sglang.srt.lora.lora_registry import LoRARef
    from sglang.srt.managers.io_struct import LoadLoRAAdapterReqInput

    refs = {name: LoadLoRAAdapterReqInput(lora_name=name, lora_path=f"/models/{name}", pinned=pinned,
                                          lora_id=LoRARef.deterministic_id(name, f"/models/{name}")).to_ref()
            for name, pinned in (("sql", True), ("chat", False))}
    return {**refs, "base": "/models/base"}


def engine_payloads() -> dict[str, EnginePayload]:
    generate = "TokenizedGenerateReqInput"
    return {
        "sampling_params": EnginePayload(f"{generate}.sampling_params", sampling_params),
        "mm_items": EnginePayload(f"{generate}.mm_inputs", mm_items),
        "shm_pointer": EnginePayload(f"{generate}.mm_inputs", shm_pointer, release_shm),
        "cuda_ipc_proxy": EnginePayload(f"{generate}.mm_inputs", cuda_ipc_proxy),
        "session_params": EnginePayload(f"{generate}.session_params", session_params),
        "lora_refs": EnginePayload("LoRAUpdateOutput.loaded_adapters", lora_refs),
    }
