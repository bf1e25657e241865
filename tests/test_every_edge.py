"""Every position of every field takes every edge value of each value class in the EveryEdge
checks (conformance/value_classes.py, conformance/every_edge.py, conformance.coverage's
value-class coverage), and those instances are valid messages of every bundled catalogue."""

from __future__ import annotations

import json
import math

import msgspec
import numpy as np
import pytest

from conformance.compare import differences
from conformance.coverage import edge_universe, measure_edges
from conformance.every_edge import EveryEdgeBuilder, as_received, edge_messages, edge_sends
from conformance.schema.golden import from_view, to_view
from conformance.schema.golden.catalogue import catalogue_for
from conformance.schema.manifest import load_manifest, wire_manifests
from conformance.schema.manifest.model import Manifest
from conformance.value_classes import CLASSES, by_name, identity

LOGPROBS = ("BatchStrOutput", "output_token_logprobs_val", "List[].List[].float")


@pytest.fixture(scope="module", params=wire_manifests())
def catalogue(request):
    return catalogue_for(load_manifest(request.param))


@pytest.fixture(scope="module")
def latest():
    return catalogue_for(load_manifest("sglang-0.5.23"))


def test_every_bundled_manifest_has_full_value_class_coverage(catalogue):
    result = measure_edges(catalogue.manifest, edge_sends(catalogue.manifest, catalogue.classes))
    assert not result.uncovered(), result.render(limit=30)
    assert result.counts()[1] > 2000  # the manifests have 2400-3000 quadruples: the walk found them
    assert set(result.by_class()) == {c.name for c in CLASSES}


def test_a_lost_edge_value_is_reported(latest):
    """Planted: the NonFinite instances with -inf missing from one nested logprob list."""
    sent = edge_sends(latest.manifest, latest.classes)
    for value in sent["NonFinite"]["BatchStrOutput"]:
        rows = value.output_token_logprobs_val or []
        value.output_token_logprobs_val = [[x for x in row if x != -math.inf] if row else row for row in rows]
    missing = {(m, *q) for m, q in measure_edges(latest.manifest, sent).uncovered()}
    assert missing == {("BatchStrOutput", *LOGPROBS, "NonFinite")}


def test_logprob_lists_carry_non_finite_floats_at_the_innermost_level(latest):
    builder = EveryEdgeBuilder(latest.manifest, latest.classes, by_name("NonFinite"))
    inner = [x for v in builder.instances("BatchTokenIDOutput") for row in v.input_token_logprobs_val or []
             for x in row or []]
    assert {identity(x) for x in inner} >= {identity(-math.inf), identity(math.inf), identity(math.nan)}
    assert None in inner  # the Optional's other arm, in the same list


def test_positions_of_other_kinds_take_their_simplest_value(latest):
    """A NonFinite instance holds no ndarrays or wrappers: a known defect there cannot fail it."""
    for value in EveryEdgeBuilder(latest.manifest, latest.classes, by_name("NonFinite")).instances("BatchStrOutput"):
        assert value.output_token_sampling_mask is None and value.time_stats is None and value.customized_info is None


def test_falsy_objects_stand_at_pickle_wrapper_positions(latest):
    builder = EveryEdgeBuilder(latest.manifest, latest.classes, by_name("PickleWrapperFalsy"))
    seen = {identity(v.time_stats) for v in builder.instances("BatchStrOutput")}
    assert seen == {identity(x) for x in ({}, [], 0, "", False, 0.0, None)}  # and the Optional's None
    assert builder.holds_objects


def test_numpy_scalars_arrive_as_python_values_over_msgpack_only(latest):
    builder = EveryEdgeBuilder(latest.manifest, latest.classes, by_name("NumpyScalar"))
    value = builder.instances("AbortReq")[0]
    assert type(value.abort_all) is np.bool_
    received = as_received(builder.instances("AbortReq")[0], "msgpack")
    assert not {type(getattr(received, f)) for f in received.__struct_fields__} & {np.bool_, np.int64, np.float32}
    assert not differences(builder.instances("AbortReq")[0], as_received(builder.instances("AbortReq")[0], "pickle"))


def test_identity_tells_edge_values_apart():
    assert identity(0.0) != identity(-0.0)
    assert identity(True) != identity(1) != identity(np.int64(1))
    assert identity(np.bool_(True)) != identity(True)
    assert identity(float("nan")) == identity(float("nan"))


def _oldest_and_newest() -> list[str]:
    """Of the bundled msgspec-era releases (derived: bundling a release needs no edit here)."""
    from conformance.schema.diff import _version_key
    from conformance.schema.evolution import bundled_pairs

    releases = sorted({m for pair in bundled_pairs() for m in pair}, key=lambda m: _version_key(m.split("-", 1)[1]))
    return [releases[0], releases[-1]]


@pytest.mark.parametrize("manifest_id", _oldest_and_newest())
def test_every_edge_instances_cross_a_manifests_codec(manifest_id):
    """The oldest and the newest manifest (the wrapper objects aside: this codec sends no objects)."""
    catalogue = catalogue_for(load_manifest(manifest_id))
    for vc in CLASSES:
        if vc.opaque:
            continue
        builder = EveryEdgeBuilder(catalogue.manifest, catalogue.classes, vc)
        for name in edge_messages(catalogue.manifest, vc):
            for i, value in enumerate(builder.instances(name)):
                diffs = differences(as_received(builder.instances(name)[i], "msgpack"),
                                    catalogue.decode(catalogue.encode(value)))
                assert not diffs, f"{vc.name} {name} instance {i}: {diffs[0]}"


def test_every_edge_instances_have_exact_json_views(latest):
    """A cmd: testee receives them as JSON views: each must read back identical (numpy scalars
    have no view of their own: their checks are skipped for testees)."""
    for vc in CLASSES:
        if vc.python_only:
            continue
        builder = EveryEdgeBuilder(latest.manifest, latest.classes, vc)
        for name in edge_messages(latest.manifest, vc):
            for i, value in enumerate(builder.instances(name)):
                back = from_view(json.loads(json.dumps(to_view(value))), latest.classes)
                assert not differences(value, back), f"{vc.name} {name} instance {i}"


def test_a_cycle_in_the_manifest_is_covered_and_ends():
    manifest = msgspec.json.decode(msgspec.json.encode({
        "implementation": "toy", "version": "1", "module": "toy.io", "union": ["Node"],
        "structs": {"Node": {
            "name": "Node", "module": "toy.io", "tag": "Node", "tag_field": "type", "role": "message",
            "options": {"array_like": True},
            "fields": [{"name": "value", "type": "float"}, {"name": "next", "type": "Optional[Node]"},
                       {"name": "children", "type": "List[Node]"}, {"name": "names", "type": "Dict[str, int]"}]}}}),
        type=Manifest)
    catalogue = catalogue_for(manifest)
    result = measure_edges(manifest, edge_sends(manifest, catalogue.classes))
    assert not result.uncovered(), result.render()
    assert {q[3] for q in edge_universe(manifest, "Node")} >= {"NonFinite", "EmptyContainer", "OneElement"}


#: Each planted bug, the check that must catch it, and where (mutants of reference_tools/proof,
#: --break modes of the reference testee).
PLANTED = [
    ("reference_tools.proof.mutants:NonFiniteInListsAsNil", "BatchTokenIDOutput", "NonFinite", "msgpack"),
    ("reference_tools.proof.mutants:FalsyOpaqueValuesSentAsNone", "BatchStrOutput", "PickleWrapperFalsy", "msgpack"),
    ("reference_tools.proof.mutants:NumpyBoolEncodedAsInt", "AbortReq", "NumpyScalar", "msgpack"),
    ("reference_tools.proof.mutants:NumpyFloatsRoundedToShortest", "FlushCacheReqInput", "NumpyScalar", "msgpack"),
    ("reference_tools.proof.mutants:ZeroDimAsShapeOne", "BatchStrOutput", "ZeroDim", "msgpack"),
    ("cmd:python -m reference_impl.testee --break nonfinite-nil", "BatchStrOutput", "NonFinite", "msgpack"),
    ("cmd:python -m reference_impl.testee --break falsy-wrap-nil", "BatchTokenIDOutput", "PickleWrapperFalsy",
     "msgpack"),
]


def _check(impl: str, struct: str, class_name: str, transport: str) -> None:
    from conformance.session import Session
    from conformance.suite.test_every_edge import _every_edge

    session = Session(impl=impl)
    try:
        _every_edge(session, struct, transport, class_name)
    finally:
        close = getattr(session.adapter, "close", None)
        if close:
            close()


@pytest.mark.parametrize("impl, struct, class_name, transport", PLANTED, ids=[p[0].rpartition(":")[2] for p in PLANTED])
def test_each_planted_bug_fails_its_check(impl, struct, class_name, transport):
    with pytest.raises(AssertionError) as failure:
        _check(impl, struct, class_name, transport)
    first = str(failure.value).splitlines()[0]
    assert struct in first and class_name in first and transport in first, first


@pytest.mark.parametrize("impl", ["reference", "cmd:python -m reference_impl.testee"])
def test_the_same_checks_pass_on_the_reference(impl):
    for _, struct, class_name, transport in PLANTED:
        if impl.startswith("cmd:") and class_name == "NumpyScalar":
            continue
        _check(impl, struct, class_name, transport)
