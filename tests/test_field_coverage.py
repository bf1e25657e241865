"""Every field of every struct a message can carry, at any depth, takes each arm of its type
in the suite's deterministic checks (conformance/coverage.py, conformance/every_arm.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from summary_lines import summary

from conformance.compare import differences
from conformance.coverage import arms, measure
from conformance.every_arm import EveryArmBuilder, deterministic_sends
from conformance.schema.golden import from_view, to_view
from conformance.schema.golden.catalogue import catalogue_for
from conformance.schema.manifest import load_manifest, parse, wire_manifests
from conformance.schema.manifest.model import Manifest

HERE = Path(__file__).resolve().parent
DEEP = ("MultimodalDataItem", "offsets")  # depth 4 in BatchTokenizedGenerateReqInput


@pytest.fixture(scope="module", params=wire_manifests())
def catalogue(request):
    return catalogue_for(load_manifest(request.param))


def test_every_bundled_manifest_is_fully_covered(catalogue):
    result = measure(catalogue.manifest, deterministic_sends(catalogue.manifest, catalogue.classes))
    assert not result.uncovered(), result.render(per_message=False, limit=30)
    assert result.counts()[1] > 1500  # the manifests have ~2000 triples: the walk found them


def test_canonical_variants_alone_leave_deep_fields_uncovered():
    # What the suite sent before the EveryArm checks: the measure must see the gap.
    manifest = load_manifest("sglang-0.5.23")
    result = measure(manifest, deterministic_sends(manifest, catalogue_for(manifest).classes, every_arm=False))
    missing = {(m, s, f, a) for m, (s, f, a) in result.uncovered()}
    assert ("BatchTokenizedGenerateReqInput", *DEEP, "List[].Tuple[0].int") in missing
    assert result.percent() < 90


def test_a_deep_field_without_a_value_is_reported(catalogue):
    """Planted: the EveryArm instances with MultimodalDataItem.offsets always None."""
    manifest = catalogue.manifest
    if DEEP[0] not in manifest.structs:
        pytest.skip(f"{manifest.id} has no {DEEP[0]}: its mm_inputs travel in a PickleWrapper")
    sent = deterministic_sends(manifest, catalogue.classes)
    for instances in sent.values():
        for i, value in enumerate(instances):
            instances[i] = _set_everywhere(value, *DEEP, None)
    missing = {(m, s, f, a) for m, (s, f, a) in measure(manifest, sent).uncovered()}
    assert missing == {(m, *DEEP, arm) for m in ("BatchTokenizedGenerateReqInput", "TokenizedGenerateReqInput",
                                                 "BatchTokenizedEmbeddingReqInput", "TokenizedEmbeddingReqInput")
                       for arm in ("List[].Tuple[0].int", "List[].Tuple[1].int")}


def _set_everywhere(value, struct: str, field: str, new):
    if isinstance(value, msgspec.Struct):
        changes = {f: _set_everywhere(getattr(value, f), struct, field, new) for f in value.__struct_fields__}
        if type(value).__name__ == struct:
            changes[field] = new
        return msgspec.structs.replace(value, **changes)
    if isinstance(value, list):
        return [_set_everywhere(v, struct, field, new) for v in value]
    return value


@pytest.mark.parametrize("text, expected", [
    ("Optional[List[Optional[int]]]", ["List[].int", "List[].None", "None"]),
    ("Dict[str, Union[float, int]]", ["Dict{key}.str", "Dict{value}.float", "Dict{value}.int"]),
    ("Union[Literal[\"last\"], bool]", ["Literal=\"last\"", "bool=True", "bool=False"]),
    ("Tuple[int, str]", ["Tuple[0].int", "Tuple[1].str"]),
    ("Optional[Modality]", ["Modality=IMAGE", "Modality=VIDEO", "Modality=AUDIO", "None"]),
    ("List[MultimodalDataItem]", ["List[].MultimodalDataItem"]),
])
def test_arms_of_a_type(text, expected):
    assert arms(parse(text), load_manifest("sglang-0.5.23")) == expected


def test_every_arm_instances_cross_each_manifests_codec(catalogue):
    """Older manifests too: the instances are valid messages of their catalogue."""
    builder = EveryArmBuilder(catalogue.manifest, catalogue.classes)
    for spec in catalogue.manifest.messages:
        for i, value in enumerate(builder.instances(spec.name)):
            diffs = differences(value, catalogue.decode(catalogue.encode(value)))
            assert not diffs, f"{spec.name} instance {i}: {diffs[0]}"


def test_every_arm_instances_have_exact_json_views():
    """A cmd: testee receives them as JSON views: each must read back identical."""
    manifest = load_manifest("sglang-0.5.23")
    classes = catalogue_for(manifest).classes
    builder = EveryArmBuilder(manifest, classes)
    for spec in manifest.messages:
        for i, value in enumerate(builder.instances(spec.name)):
            back = from_view(json.loads(json.dumps(to_view(value))), classes)
            assert not differences(value, back), f"{spec.name} instance {i}"


def test_instances_are_deterministic():
    manifest = load_manifest("sglang-0.5.23")
    classes = catalogue_for(manifest).classes
    first, second = (EveryArmBuilder(manifest, classes).instances("BatchTokenizedGenerateReqInput") for _ in "ab")
    assert not differences(first, second)


@pytest.mark.slow
def test_only_every_arm_catches_a_field_lost_at_depth_four(tmp_path):
    """Planted: an encoder that loses MultimodalDataItem.offsets (tests/deep_field_adapters.py).
    Every other deterministic check of the messages that carry it passes (EveryEdge, which also
    reaches every position, aside); EveryArm fails, naming the path."""
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", "deep_field_adapters:DropsDeepOffsets",
         "--manifest", "sglang-0.5.23", "--expectations", os.devnull, "--report", str(report),
         "--", "-k", "TokenizedGenerateReqInput or TokenizedEmbeddingReqInput"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(report.read_text())["results"]
    failed = {r["id"]: r["message"] for r in results if r["outcome"] == "failed"}
    every_arm = {f"Required.RoundTrip.{m}.EveryArm.{t}" for t in ("pickle", "msgpack")
                 for m in ("TokenizedGenerateReqInput", "BatchTokenizedGenerateReqInput",
                           "TokenizedEmbeddingReqInput", "BatchTokenizedEmbeddingReqInput")}
    # Generated checks draw at random: one may happen to draw offsets. EveryEdge puts its value
    # classes at every position too, so it may catch the lost field as well; every other check passes.
    assert {i for i in failed if ".Generated." not in i and ".EveryEdge." not in i} == every_arm, sorted(failed)
    assert "$.batch[0].mm_inputs.mm_items[0].offsets" in failed[
        "Required.RoundTrip.BatchTokenizedGenerateReqInput.EveryArm.msgpack"]
    assert len(results) > 100  # the other checks of these messages ran, and passed


def test_a_cycle_in_the_manifest_is_covered_and_ends():
    """A struct that holds itself: one nested turn covers the recursive arms, then it stops."""
    manifest = msgspec.json.decode(msgspec.json.encode({
        "implementation": "toy", "version": "1", "module": "toy.io", "union": ["Node"],
        "structs": {"Node": {
            "name": "Node", "module": "toy.io", "tag": "Node", "tag_field": "type", "role": "message",
            "options": {"array_like": True},
            "fields": [{"name": "value", "type": "int"}, {"name": "next", "type": "Optional[Node]"},
                       {"name": "children", "type": "List[Node]"}, {"name": "flag", "type": "Optional[bool]"}]}}}),
        type=Manifest)
    catalogue = catalogue_for(manifest)
    instances = EveryArmBuilder(manifest, catalogue.classes).instances("Node")
    result = measure(manifest, {"Node": instances})
    assert not result.uncovered(), result.render()
    for value in instances:
        assert not differences(value, catalogue.decode(catalogue.encode(value)))


def test_any_as_a_dict_key_or_set_item_gets_a_hashable_value():
    """A bare `dict` field (Dict[Any, Any]), common in catalogues from before the msgspec
    migration, and a Set[Any]: their keys and items must be hashable to exist at all."""
    manifest = msgspec.json.decode(msgspec.json.encode({
        "implementation": "toy", "version": "1", "module": "toy.io", "union": ["Bag"],
        "structs": {"Bag": {
            "name": "Bag", "module": "toy.io", "tag": "Bag", "tag_field": "type", "role": "message",
            "options": {"array_like": True},
            "fields": [{"name": "extra", "type": "Dict[Any, Any]"}, {"name": "seen", "type": "Set[Any]"}]}}}),
        type=Manifest)
    catalogue = catalogue_for(manifest)
    instances = EveryArmBuilder(manifest, catalogue.classes).instances("Bag")
    assert instances and all(value.extra and value.seen for value in instances)
    for value in instances:
        assert not differences(value, catalogue.decode(catalogue.encode(value)))


@pytest.mark.slow
def test_every_arm_through_a_cmd_testee():
    """Every instance travels as a JSON view to a subprocess testee and back."""
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", "cmd:python -m reference_impl.testee",
         "--", "-k", "EveryArm and (BatchTokenizedGenerateReqInput or BatchStrOutput)"],
        capture_output=True, text=True, cwd=HERE.parent, timeout=300,
    )
    assert proc.stdout.strip().splitlines()[-1] == summary(4, 0), proc.stdout[-3000:]
