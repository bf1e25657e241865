"""The pydantic bridge, re-exported: it lives in the public runtime (conformance.runtime.http_bridge),
which generated struct modules import, so a third party's code never depends on the reference."""

from conformance.runtime.http_bridge import STRICT_BASE64, Base64Bytes, struct_core_schema

__all__ = ["STRICT_BASE64", "Base64Bytes", "struct_core_schema"]
