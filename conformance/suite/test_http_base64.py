"""HTTP JSON carries bytes as base64: the implementation's HTTP bridge decodes it into the struct,
and refuses malformed base64 naming the field."""

from __future__ import annotations

import json

from conformance.compare import differences
from conformance.http_json import to_http_json
from conformance.plugin import check, harness_error
from conformance.suite.capability import require
from conformance.suite.failure import HTTP, Failure, raise_failure
from conformance.suite.fields import structs_with_field

JSON_CHARS = 300


def _base64_structs(ipc):
    return structs_with_field(ipc, lambda f: "base64" in f.annotations)


def _json_note(text: str) -> str:
    return f"input: JSON {text if len(text) <= JSON_CHARS else text[:JSON_CHARS] + ' ...'}"


@check("HttpBase64", per=("struct",), name="Decodes", cases={"struct": _base64_structs})
def test_http_base64_decodes(ipc, struct):
    require(ipc, "http")
    expected = ipc.instance(struct, "typical")
    text = json.dumps(to_http_json(expected))
    got = ipc.adapter.validate_http(struct, text)
    diffs = differences(expected, got)
    if diffs:
        raise_failure(Failure(f"HTTP JSON for {struct} validated to a different struct", "R-HTTP-1", HTTP, diffs,
                              value=expected, notes=[_json_note(text)]), ipc)


@check("HttpBase64", per=("struct",), name="RejectsMalformed", cases={"struct": _base64_structs})
def test_http_base64_rejects_malformed(ipc, struct):
    require(ipc, "http")
    payload = to_http_json(ipc.instance(struct, "typical"))
    field = next(f.name for f in ipc.manifest.structs[struct].fields if "base64" in f.annotations)
    bad = ["not base64!"] if isinstance(payload[field], list) else "not base64!"
    payload[field] = bad
    text = json.dumps(payload)
    step = f"{HTTP} ({field} holds {bad!r}: not base64)"
    try:
        got = ipc.adapter.validate_http(struct, text)
    except Exception as exc:
        if harness_error(exc):
            raise  # a crash or a hang is no refusal
        if field not in str(exc):
            raise_failure(Failure(f"{struct}.{field}: malformed base64 was refused, but the error does not name "
                                  f"the field {field}: {type(exc).__name__}: {str(exc).splitlines()[0]}", "R-HTTP-2",
                                  step, notes=[_json_note(text)]), ipc)
        return
    held = getattr(got, field, got)
    raise_failure(Failure(f"{struct}.{field}: malformed base64 was accepted, not refused", "R-HTTP-2", step,
                          [f"$.{field}: expected a validation error naming {field}, got {held!r:.120}"],
                          notes=[_json_note(text)]), ipc)
