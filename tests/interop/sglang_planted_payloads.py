"""SGLang 0.5.23 with one real bug planted, for the EnginePayload proof (tests/interop/
test_sglang_engine_payloads.py; run the suite against one with
``ipc-conformance run --impl sglang_planted_payloads:<Class> -- -k EnginePayload`` and this folder on
PYTHONPATH). Each plants its bug into upstream's own module when the adapter is made, for the
life of the process (the suite runs in a process of its own), and calls nothing but upstream."""

from __future__ import annotations

from typing import Any

import msgspec

from conformance.adapters.sglang import SGLangAdapter


def _shallow_state(obj: Any) -> Any:
    """msgpack_utils._from_msgpack_state with the bug: a map's values that are maps themselves are
    not recursed into, so a dtype (or a torch.Size) in a nested map stays its marker map."""
    from sglang.srt.utils import msgpack_utils

    if isinstance(obj, dict):
        if any(key in obj for key in ("__torch_dtype__", "__torch_device__", "__np_dtype__", "__torch_size__",
                                      "__tuple__")):
            return msgpack_utils._from_msgpack_state(obj)
        return {key: value if isinstance(value, dict) else _shallow_state(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [_shallow_state(value) for value in obj]
    return obj


class ShmStateDecoderShallow(SGLangAdapter):
    """Bug (a): the state decoder of the shared-memory multimodal extension (code 4) stops
    recursing into dicts: the pointer's dtype and shape arrive as their marker maps (msgpack only;
    pickle calls the pointer's own __setstate__)."""

    def __init__(self) -> None:
        super().__init__()
        from sglang.srt.managers.mm_utils import ShmPointerMMData
        from sglang.srt.utils import msgpack_utils

        def decode(state: dict[str, object]) -> object:
            obj = ShmPointerMMData.__new__(ShmPointerMMData)
            obj.__setstate__(_shallow_state(state))
            return obj

        msgpack_utils._decode_shm_pointer_mm_data = decode


class MmItemSetterToDict(SGLangAdapter):
    """Bug (b): MultimodalDataItem's attribute setter writes processor data (any name that is not a
    field) into the instance __dict__ instead of model_specific_data; neither transport carries
    __dict__, so after transit the data is gone."""

    def __init__(self) -> None:
        super().__init__()
        from sglang.srt.managers.schedule_batch import MultimodalDataItem

        original = MultimodalDataItem.__setattr__

        def setattr_(self: Any, name: str, value: Any) -> None:
            if name in self.__struct_fields__:
                original(self, name, value)
            else:
                msgspec.Struct.__setattr__(self, name, value)

        MultimodalDataItem.__setattr__ = setattr_
