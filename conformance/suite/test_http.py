"""HTTP JSON inputs, both directions (SPEC §7, R-HTTP-2): a body with a key the struct does not
know is refused, naming the key; a body that leaves out optional fields validates, and each one
left out takes its default, factory defaults included (a `list` or `dict` factory is the empty
container). The body holds a message's required fields only, as the minimal instance has them;
messages with a field that has no JSON form (a tensor, an ndarray, an array.array) are no HTTP
bodies and are not sent.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import pytest

from conformance.compare import differences
from conformance.http_json import to_http_json
from conformance.plugin import check, harness_error
from conformance.suite.capability import require
from conformance.suite.failure import HTTP, error_text, fail, json_input, view_of
from conformance.suite.fields import OPAQUE_DEFAULT, default_value, manifest_default

UNKNOWN_KEY = "no_such_field"


def _structs(ipc: Any) -> list[str]:
    """Every message that can be an HTTP JSON body: none of its fields, at any depth, reaches a
    tensor, an ndarray or an array.array (they have no JSON form, so a bridge need not build a
    schema for such a struct). From the manifest alone, so a broken implementation cannot hide a
    check."""
    return [spec.name for spec in ipc.manifest.messages
            if not any(_no_json_form(ipc.manifest, f.type_expr, set()) for f in spec.fields)]


def _body(ipc: Any, struct: str) -> dict[str, Any]:
    """The HTTP JSON body of the message's required fields, as its minimal instance has them."""
    value = ipc.instance(struct, "minimal")
    try:
        return {f.name: to_http_json(getattr(value, f.name)) for f in ipc.manifest.structs[struct].fields
                if f.default.kind == "required"}
    except TypeError as exc:
        pytest.skip(f"{struct}: a required field has no HTTP JSON form ({exc})")


def _no_json_form(manifest: Any, t: Any, seen: set[Any]) -> bool:
    """Whether a type reaches a tensor, an ndarray or an array.array (no JSON form, SPEC §7)."""
    for node in t.walk():
        if node.kind in ("Tensor", "NDArray", "Array"):
            return True
        if node.kind == "Ref" and node.name in manifest.structs and node.name not in seen:
            seen.add(node.name)
            if any(_no_json_form(manifest, f.type_expr, seen) for f in manifest.structs[node.name].fields):
                return True
    return False


def _validate(ipc: Any, struct: str, body: dict[str, Any]) -> tuple[Any, Optional[BaseException]]:
    try:
        return ipc.adapter.validate_http(struct, json.dumps(body)), None
    except Exception as exc:
        if harness_error(exc):
            raise
        return None, exc


@check("Http", per=("struct",), name="RejectsUnknownKey", cases={"struct": _structs})
def test_http_rejects_unknown_key(ipc, struct):
    require(ipc, "http")
    body = {**_body(ipc, struct), UNKNOWN_KEY: 1}
    got, refusal = _validate(ipc, struct, body)
    if refusal is None:
        fail(f"{struct} (HTTP JSON): a body with the unknown key {UNKNOWN_KEY!r} validated "
             f"(SPEC R-HTTP-2: unknown keys MUST be rejected); body {json.dumps(body)[:200]}", "R-HTTP-2",
             step=HTTP, notes=[json_input(json.dumps(body)), f"validated to: {view_of(got)}"], kind="Failed",
             ipc=ipc)
    if UNKNOWN_KEY not in str(refusal):
        fail(f"{struct} (HTTP JSON): the body with the unknown key {UNKNOWN_KEY!r} was refused, but the error does "
             f"not name the key (SPEC R-HTTP-2): {type(refusal).__name__}: {error_text(refusal)}", "R-HTTP-2",
             step=HTTP, notes=[json_input(json.dumps(body))], ipc=ipc)


@check("Http", per=("struct",), name="OmittedFieldsTakeDefaults", cases={"struct": _structs})
def test_http_omitted_fields_take_defaults(ipc, struct):
    require(ipc, "http")
    spec = ipc.manifest.structs[struct]
    body = _body(ipc, struct)
    omitted = [f for f in spec.fields if f.default.kind != "required"]
    if not omitted:
        pytest.skip(f"{struct} has no optional field")
    got, refusal = _validate(ipc, struct, body)
    if refusal is not None:
        kinds = sorted({f.default.kind for f in omitted})
        fail(f"{struct} (HTTP JSON): a body without its {len(omitted)} optional fields (defaults: "
             f"{', '.join(kinds)}) was refused; SPEC R-HTTP-2: missing keys take the field's default: "
             f"{type(refusal).__name__}: {error_text(refusal)}", "R-HTTP-2", step=HTTP,
             notes=[json_input(json.dumps(body))], kind="Failed", ipc=ipc)
    diffs = []
    for field in omitted:
        if manifest_default(field) is OPAQUE_DEFAULT:
            continue  # an opaque factory: the implementation's own object
        diffs += differences(default_value(ipc, field), getattr(got, field.name), f"{struct}.{field.name}")
    if diffs:
        fail(f"{struct} (HTTP JSON): an omitted field did not take the manifest's default", "R-HTTP-2", step=HTTP,
             differences=diffs, notes=[json_input(json.dumps(body)), f"validated to: {view_of(got)}"], ipc=ipc)
