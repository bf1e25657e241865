"""A reference implementation with one defect deep inside a message, for tests/test_field_coverage.py.

Its encoder loses MultimodalDataItem.offsets (sends None): a field at depth 4 of
BatchTokenizedGenerateReqInput (batch[i].mm_inputs.mm_items[j].offsets) that no
canonical variant sets, so only checks that reach every field at every depth see it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from reference_tools.adapter import ReferenceAdapter


def _without_offsets(value: Any) -> Any:
    """A copy of value in which every MultimodalDataItem has offsets=None (the caller's object is kept)."""
    if isinstance(value, msgspec.Struct):
        changes = {f: _without_offsets(getattr(value, f)) for f in value.__struct_fields__}
        if type(value).__name__ == "MultimodalDataItem":
            changes["offsets"] = None
        return msgspec.structs.replace(value, **changes)
    if isinstance(value, list):
        return [_without_offsets(v) for v in value]
    if isinstance(value, dict):
        return {k: _without_offsets(v) for k, v in value.items()}
    return value


class DropsDeepOffsets(ReferenceAdapter):
    """Encodes every message with MultimodalDataItem.offsets lost, whatever its depth."""

    def encode(self, obj: Any, transport: str) -> bytes:
        return super().encode(_without_offsets(obj), transport)
