"""Golden vectors: the implementation decodes every vector of golden/<manifest>/ (SPEC R-VEC-1),
encodes each canonical message in the vector's byte form (SPEC R-VEC-3: only integer and length
header widths may differ) and, recommended, to exactly the vector's bytes (SPEC R-VEC-2).

This is how a third party proves byte-level compatibility: the bytes were written by the
reference encoder, and the expected value is the canonical instance the vector was built from.
"""

from __future__ import annotations

import hashlib

import pytest

from conformance.compare import differences
from conformance.plugin import check
from conformance.schema import wire_form
from conformance.suite.vectors import golden_vector


@check("Golden", per=("struct", "variant"), name="DecodesVector")
def test_decodes_vector(ipc, struct, variant):
    data = golden_vector(ipc, struct, variant)
    decoded = ipc.adapter.decode(data, "msgpack")
    diffs = differences(ipc.instance(struct, variant), decoded)
    assert not diffs, (
        f"golden/{ipc.manifest.id}/{struct}.{variant}.msgpack decodes to another value (SPEC R-VEC-1):\n  "
        + "\n  ".join(diffs[:10])
    )


@check("Golden", per=("struct", "variant"), level="Recommended", name="EncodesVector")
def test_encodes_vector(ipc, struct, variant):
    want = golden_vector(ipc, struct, variant)
    got = ipc.adapter.encode(ipc.instance(struct, variant), "msgpack")
    if got != want:
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        pytest.fail(
            f"{struct} ({variant}) encodes to other bytes than golden/{ipc.manifest.id}/{struct}.{variant}.msgpack "
            f"(SPEC R-VEC-2): {len(got)} bytes vs {len(want)}, first difference at byte {first} "
            f"(got {got[first:first + 8].hex()}, golden {want[first:first + 8].hex()}; "
            f"sha256 {hashlib.sha256(got).hexdigest()[:16]})"
        )


@check("Bytes", per=("struct", "variant"), name="MatchesVector")
def test_matches_vector(ipc, struct, variant):
    """The byte rules every encoder MUST follow (float 64, every field, tag first, ext layouts,
    enum values), checked on the implementation's own bytes, whatever their decoded value."""
    want = wire_form.parse(golden_vector(ipc, struct, variant))
    data = ipc.adapter.encode(ipc.instance(struct, variant), "msgpack")
    try:
        got = wire_form.parse(data)
    except wire_form.FormError as exc:
        pytest.fail(f"{struct} ({variant}) encodes to bytes that are not one msgpack object: {exc} (SPEC R-MSG-11)")
    problems = wire_form.form_differences(got, want, wire_form.unordered_paths(ipc.manifest, struct, want))
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        pytest.fail(f"{struct} ({variant}) differs from the vector's byte form at {problems[0]}{more}; "
                    f"golden/{ipc.manifest.id}/{struct}.{variant}.msgpack (SPEC R-VEC-3):\n  "
                    + "\n  ".join(problems[:10]))
