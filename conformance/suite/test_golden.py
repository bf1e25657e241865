"""Golden vectors: the implementation decodes every vector golden/<manifest>/index.json lists (SPEC R-VEC-1),
encodes each canonical message in the vector's byte form (SPEC R-VEC-3: only integer and length
header widths may differ) and, recommended, to exactly the vector's bytes (SPEC R-VEC-2).

This is how a third party proves byte-level compatibility: the bytes were written by the
reference encoder, and the expected value is the canonical instance the vector was built from.
"""

from __future__ import annotations

import hashlib

from conformance.compare import differences
from conformance.plugin import check
from conformance.schema import wire_form
from conformance.suite.failure import DECODE_RUNNER_BYTES, Failure, raise_failure
from conformance.suite.vectors import golden_vector, golden_vector_name


def _vector(ipc, struct: str, variant: str) -> str:
    return f"{golden_vector_name(ipc, struct, variant)} ({ipc.manifest.id} {struct}.{variant})"


@check("Golden", per=("struct", "variant"), name="DecodesVector")
def test_decodes_vector(ipc, struct, variant):
    data = golden_vector(ipc, struct, variant)
    decoded = ipc.adapter.decode(data, "msgpack")
    diffs = differences(ipc.instance(struct, variant), decoded)
    if diffs:
        raise_failure(Failure(f"{_vector(ipc, struct, variant)} decodes to another value", "R-VEC-1",
                              f"{DECODE_RUNNER_BYTES} (the golden vector; expected: the {variant} instance)",
                              diffs, data, ipc.instance(struct, variant)), ipc)


@check("Golden", per=("struct", "variant"), level="Recommended", name="EncodesVector")
def test_encodes_vector(ipc, struct, variant):
    want = golden_vector(ipc, struct, variant)
    got = ipc.adapter.encode(ipc.instance(struct, variant), "msgpack")
    if got != want:
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        try:
            forms = wire_form.form_differences(wire_form.parse(got), wire_form.parse(want), set())
        except wire_form.FormError as exc:
            forms = [f"not one msgpack object: {exc}"]
        where = f"byte form differences: {'; '.join(forms[:5])}" if forms else "same byte form, other header widths"
        raise_failure(Failure(
            f"{struct} ({variant}) encodes to other bytes than {_vector(ipc, struct, variant)} "
            f"(SPEC R-VEC-2): {len(got)} bytes vs {len(want)}, first difference at byte {first} "
            f"(got {got[first:first + 8].hex()}, golden {want[first:first + 8].hex()}; "
            f"sha256 {hashlib.sha256(got).hexdigest()[:16]})", "R-VEC-2",
            "the implementation's encode over msgpack of the vector's instance (its bytes shown as input)",
            data=got, value=ipc.instance(struct, variant), notes=[where], kind="Failed"), ipc)


@check("Bytes", per=("struct", "variant"), name="MatchesVector")
def test_matches_vector(ipc, struct, variant):
    """The byte rules every encoder MUST follow (float 64, every field, tag first, ext layouts,
    enum values), checked on the implementation's own bytes, whatever their decoded value."""
    want = wire_form.parse(golden_vector(ipc, struct, variant))
    data = ipc.adapter.encode(ipc.instance(struct, variant), "msgpack")
    step = "the implementation's encode over msgpack (its bytes, read as msgpack forms, against the vector's)"
    try:
        got = wire_form.parse(data)
    except wire_form.FormError as exc:
        raise_failure(Failure(f"{struct} ({variant}) encodes to bytes that are not one msgpack object: {exc} "
                              "(SPEC R-MSG-11)", "R-MSG-11", step, data=data, value=ipc.instance(struct, variant),
                              kind="Failed"), ipc)
    problems = wire_form.form_differences(got, want, wire_form.unordered_paths(ipc.manifest, struct, want))
    if problems:
        raise_failure(Failure(f"{struct} ({variant}) differs from the vector's byte form", "R-VEC-3 (and the rule "
                              "each difference names)", step, problems, data, ipc.instance(struct, variant),
                              notes=[f"vector: {_vector(ipc, struct, variant)} (paths: msgpack array positions, "
                                     "$[0] the tag)"], kind="Failed"), ipc)
