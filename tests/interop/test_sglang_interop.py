"""Interop proof against the real SGLang package (run in `tox -e upstream`).

For canonical instances of every message of the manifest: the reference's bytes
decode in SGLang to an equal object and vice versa, and the bytes are identical
except for the divergences listed below (each with its reason).
"""

from __future__ import annotations

import pickle

import pytest

from conformance.adapters import load_adapter
from conformance.compare import differences
from conformance.schema.manifest import load_manifest
from conformance.schema.values import VARIANTS, ValueBuilder

pytest.importorskip("sglang.srt.managers.io_struct", reason="needs SGLang: tox -e upstream")
pytestmark = pytest.mark.sglang

MANIFEST = load_manifest("sglang-0.5.23")
CASES = [(s.name, v) for s in MANIFEST.messages for v in VARIANTS]

# Where SGLang 0.5.23 and the reference knowingly produce different bytes, and what
# SGLang then decodes from the reference's bytes: its own object, or exactly ours.
BYTE_DIVERGENCES = {
    ("AbortReq", "minimal"): "upstream __post_init__ turns rid=None into '' on construction and decode",
    ("BatchStrOutput", "edge"): "upstream msgpack sends a 0-d ndarray with shape [1] (np.ascontiguousarray)",
}
SGLANG_DECODES_AS_ITS_OWN = {("AbortReq", "minimal")}


@pytest.fixture(scope="module")
def ref():
    return load_adapter("reference")


@pytest.fixture(scope="module")
def sgl():
    return load_adapter("sglang")


@pytest.fixture(scope="module")
def pairs(ref, sgl):
    rc, sc = ref.classes(), sgl.classes()
    return {
        case: (ValueBuilder(MANIFEST, rc, case[1]).instance(case[0]),
               ValueBuilder(MANIFEST, sc, case[1]).instance(case[0]))
        for case in CASES
    }


def test_sglang_catalogue_matches_manifest(sgl):
    from conformance.schema.manifest.extract import extract

    live = extract("sglang.srt.managers.io_struct", imports=[
        "sglang.srt.managers.scheduler_components.kv_events_publisher"], array_typecode="q")
    assert live.structs == MANIFEST.structs
    assert live.union == MANIFEST.union


@pytest.mark.parametrize("case", CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_bytes_identical(case, ref, sgl, pairs):
    if case in BYTE_DIVERGENCES:
        pytest.xfail(BYTE_DIVERGENCES[case])
    ours, theirs = pairs[case]
    assert ref.encode(ours, "msgpack") == sgl.encode(theirs, "msgpack")


@pytest.mark.parametrize("case", CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_sglang_decodes_reference_bytes(case, ref, sgl, pairs):
    ours, theirs = pairs[case]
    decoded = sgl.decode(ref.encode(ours, "msgpack"), "msgpack")
    expected = ours if case in BYTE_DIVERGENCES and case not in SGLANG_DECODES_AS_ITS_OWN else theirs
    assert differences(expected, decoded) == []


@pytest.mark.parametrize("case", CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_reference_decodes_sglang_bytes(case, ref, sgl, pairs):
    ours, theirs = pairs[case]
    decoded = ref.decode(sgl.encode(theirs, "msgpack"), "msgpack")
    if case in BYTE_DIVERGENCES:
        pytest.xfail(BYTE_DIVERGENCES[case])
    assert differences(ours, decoded) == []


@pytest.mark.parametrize("name", ["TokenizedGenerateReqInput", "BatchTokenIDOutput"])
def test_wrapped_fields_open_on_the_other_side(name, ref, sgl):
    """Each side wraps opaque fields its own way; the other side (trusted) unwraps them."""
    payload = {"created": 1.5, "stages": ["tokenize", "schedule"]}
    field = "time_stats"
    ours = ValueBuilder(MANIFEST, ref.classes(), "typical").instance(name)
    theirs = ValueBuilder(MANIFEST, sgl.classes(), "typical").instance(name)
    setattr(ours, field, payload)
    setattr(theirs, field, payload)
    from_ref = sgl.unwrap(sgl.decode(ref.encode(ref.wrap(ours), "msgpack"), "msgpack"))
    from_sgl = ref.unwrap(ref.decode(sgl.encode(sgl.wrap(theirs), "msgpack"), "msgpack"))
    assert getattr(from_ref, field) == payload
    assert getattr(from_sgl, field) == payload


def test_upstream_cannot_send_top_level_str(sgl, ref):
    """SGLang 0.5.23 has defect class: top-level-primitive: a top-level str is refused (the reference sends it)."""
    with pytest.raises(TypeError):
        sgl.encode("hello", "msgpack")
    assert ref.decode(ref.encode("hello", "msgpack"), "msgpack") == "hello"


def test_upstream_wrap_is_not_idempotent(sgl):
    """Wrapping an already-wrapped field wraps it again: a forwarder that re-wraps (the data
    parallel controller's path) delivers a PickleWrapper downstream after one unwrap."""
    obj = ValueBuilder(MANIFEST, sgl.classes(), "typical").instance("TokenizedGenerateReqInput")
    obj.time_stats = {"created": 1.5}
    twice = sgl.wrap(sgl.wrap(obj))
    opened = sgl.unwrap(sgl.decode(sgl.encode(twice, "msgpack"), "msgpack"))
    assert type(opened.time_stats).__name__ == "PickleWrapper"
    assert pickle.loads(opened.time_stats.data) == {"created": 1.5}
