"""Pydantic bridge: HTTP JSON validates straight into msgspec structs.

JSON has no bytes type, so bytes fields marked ``Base64Bytes`` arrive as base64
strings and are decoded strictly (SPEC R-HTTP-3: RFC 4648 §4, the standard alphabet,
padded, nothing else), in JSON mode and in Python mode alike (a FastAPI server
validates the parsed body in Python mode); a malformed string fails validation
with the field's location. (defect class: http-base64, docs/defect-classes.md: the struct
migration once lost this.)
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

import msgspec
from pydantic import PydanticSchemaGenerationError
from pydantic_core import PydanticCustomError, core_schema


class Base64Bytes:
    """Annotated marker: in HTTP JSON this bytes field (or list of bytes) is base64 text."""

    def __get_pydantic_core_schema__(self, source_type: Any, handler: Any) -> core_schema.CoreSchema:
        # looked up at each call, so a planted bug (a test, the reference's proof) reaches built schemas too
        return core_schema.no_info_before_validator_function(lambda v: _from_base64(v), handler(source_type))

    def __repr__(self) -> str:
        return "Base64Bytes()"


#: RFC 4648 §4 base64, padded: whole quanta, then at most one padded one. (binascii's strict mode
#: still takes "QUJD=", padding after a whole quantum, and CPython's b64decode(validate=True) too.)
STRICT_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def _from_base64(value: Any) -> Any:
    if isinstance(value, str):
        if not STRICT_BASE64.fullmatch(value):
            raise PydanticCustomError("base64", "invalid base64 text: not RFC 4648 base64 with padding "
                                      "(standard alphabet, no whitespace)")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise PydanticCustomError("base64", "invalid base64 text: {reason}", {"reason": str(exc)}) from None
    if isinstance(value, (list, tuple)):
        return type(value)(_from_base64(v) for v in value)
    return value


def _no_json_form(tp: Any) -> Any:
    def refuse(value: Any) -> Any:
        if value is None:
            return None
        raise PydanticCustomError("no_json_form", "{type} values cannot come from HTTP JSON", {"type": repr(tp)})

    return refuse


def _field_schema(handler: Any, field: msgspec.structs.FieldInfo) -> core_schema.CoreSchema:
    try:
        schema: core_schema.CoreSchema = handler.generate_schema(field.type)
    except PydanticSchemaGenerationError:
        # Tensors, ndarrays and array.array have no JSON form: Python callers may pass the
        # object itself, HTTP JSON is refused here rather than failing later on the wire.
        schema = core_schema.json_or_python_schema(
            json_schema=core_schema.no_info_plain_validator_function(_no_json_form(field.type)),
            python_schema=core_schema.any_schema(),
        )
    if field.default is not msgspec.NODEFAULT:
        return core_schema.with_default_schema(schema, default=field.default)
    if field.default_factory is not msgspec.NODEFAULT:
        return core_schema.with_default_schema(schema, default_factory=field.default_factory)
    return schema


def struct_core_schema(cls: type, source: Any, handler: Any) -> core_schema.CoreSchema:
    """``__get_pydantic_core_schema__`` for a msgspec Struct: a typed dict built from its
    fields (unknown keys rejected), then the struct constructed from the validated values."""
    fields = {
        f.name: core_schema.typed_dict_field(
            _field_schema(handler, f),
            required=f.default is msgspec.NODEFAULT and f.default_factory is msgspec.NODEFAULT,
        )
        for f in msgspec.structs.fields(cls)
    }
    # (no cls_name: pydantic-core before 2.25 does not take it; errors name the field anyway)
    as_dict = core_schema.typed_dict_schema(fields, extra_behavior="forbid")
    from_dict = core_schema.no_info_after_validator_function(lambda v: cls(**v), as_dict)
    return core_schema.json_or_python_schema(
        json_schema=from_dict,
        python_schema=core_schema.union_schema([core_schema.is_instance_schema(cls), from_dict]),
    )
