"""HTTP JSON carries bytes as base64: the implementation's HTTP bridge decodes it into the struct,
and refuses malformed base64 naming the field."""

from __future__ import annotations

import json

import pytest

from conformance.compare import differences
from conformance.http_json import to_http_json
from conformance.plugin import check
from conformance.suite.capability import require
from conformance.suite.fields import structs_with_field


def _base64_structs(ipc):
    return structs_with_field(ipc, lambda f: "base64" in f.annotations)


@check("HttpBase64", per=("struct",), name="Decodes", cases={"struct": _base64_structs})
def test_http_base64_decodes(ipc, struct):
    require(ipc, "http")
    expected = ipc.instance(struct, "typical")
    got = ipc.adapter.validate_http(struct, json.dumps(to_http_json(expected)))
    diffs = differences(expected, got)
    assert not diffs, f"HTTP JSON for {struct} validated to a different struct:\n  " + "\n  ".join(diffs[:10])


@check("HttpBase64", per=("struct",), name="RejectsMalformed", cases={"struct": _base64_structs})
def test_http_base64_rejects_malformed(ipc, struct):
    require(ipc, "http")
    payload = to_http_json(ipc.instance(struct, "typical"))
    field = next(f.name for f in ipc.manifest.structs[struct].fields if "base64" in f.annotations)
    payload[field] = ["not base64!"] if isinstance(payload[field], list) else "not base64!"
    with pytest.raises(Exception) as caught:
        ipc.adapter.validate_http(struct, json.dumps(payload))
    assert field in str(caught.value), f"the error does not name the field {field}: {caught.value}"
