"""The HTTP JSON form of a struct: a JSON object per struct, bytes as base64 text."""

from __future__ import annotations

import base64
import enum
from typing import Any

import msgspec


def to_http_json(value: Any) -> Any:
    """Builtins that json.dumps accepts; structs become objects keyed by field name."""
    if isinstance(value, msgspec.Struct):
        return {name: to_http_json(getattr(value, name)) for name in value.__struct_fields__}
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_http_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_http_json(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"{type(value).__name__} has no HTTP JSON form")
