"""The per-type plans of the msgpack path (reference_impl/_codec_plan.py) against the slow path
they replace (the deep skeleton copy and typed walk of pickle_wrapper, the full map-key scan of
_codec_keys), on every message struct of the reference catalogue with the EveryArm and EveryEdge
instances (every arm, every edge value, falsy objects at PickleWrapper positions) and the
engine's own step messages, plus a few values of our own at the wrapper positions."""

from __future__ import annotations

import copy
import enum
import pickle
from typing import Any, Optional

import msgspec
import pytest

from conformance.compare import differences
from conformance.every_arm import EveryArmBuilder
from conformance.every_edge import edge_sends
from reference_impl import _codec_fast, _codec_keys, _codec_plan, codec, io_struct, pickle_wrapper
from reference_impl._codec_limits import ARRAY_LIST_MIN
from reference_impl.errors import WireError
from reference_tools.adapter import ReferenceAdapter

_ADAPTER = ReferenceAdapter()
MANIFEST = _ADAPTER.live_manifest()  # the reference's own catalogue, extracted from its classes
CLASSES = _ADAPTER.classes()
MESSAGES = [s.name for s in MANIFEST.messages]


class Color(enum.Enum):
    RED = "red"


@pytest.fixture(scope="module")
def instances() -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {name: [] for name in MESSAGES}
    arm = EveryArmBuilder(MANIFEST, CLASSES)
    for name in MESSAGES:
        out[name] += arm.instances(name)
    for by_message in edge_sends(MANIFEST, CLASSES).values():
        for name, values in by_message.items():
            out[name] += values
    for name in MESSAGES:  # objects of our own at every PickleWrapper-typed position
        cls = CLASSES[name]
        plan = _codec_plan.plan_of(cls)
        if plan.direct and out[name]:
            base = out[name][0]
            for value in ({"k": [1, 2.5, None]}, [None, {"a": 1}], 0, "", ("t", b"x")):
                out[name].append(msgspec.structs.replace(base, **{f: value for f in plan.direct}))
    return out


def _slow_unwrap(obj: Any) -> Any:
    def open_wrapper(value: Any, struct: str, path: str) -> Any:
        if not isinstance(value, io_struct.PickleWrapper):
            return value
        return pickle_wrapper.unwrap_value(value, allow_pickle=True, transport="msgpack",
                                           where=(struct or "PickleWrapper", path))

    return pickle_wrapper.map_wrapped(obj, open_wrapper)


def _encoded(obj: Any) -> Optional[bytes]:
    try:
        return _codec_fast.plain_encoder.encode(obj)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        return None


def plan_disagreements(obj: Any) -> list[str]:
    """Where the plan's send, scan and receive differ from the slow path, for one message."""
    cls = type(obj)
    plan = _codec_plan.plan_of(cls)
    out: list[str] = []
    if set(plan.opaque) != set(pickle_wrapper.opaque_fields(cls)):
        out.append(f"opaque fields {plan.opaque} != {pickle_wrapper.opaque_fields(cls)}")
    if plan.maps != _codec_keys.map_fields(cls):
        out.append(f"map fields {plan.maps} != {_codec_keys.map_fields(cls)}")
    before = _encoded(obj)
    # send: the plan's copy and the slow path's give the same bytes
    fast = codec.wrap_fields(obj)
    slow = codec._wrap_walk(obj)
    if _encoded(fast) != _encoded(slow):
        out.append("wrap: the plan's message encodes differently from the slow path's")
    if _encoded(obj) != before:
        out.append("wrap: the caller's object was modified")
    # the checks written for the type say what their definitions say
    opaque_set = any(getattr(obj, n) is not None for n in plan.opaque)
    if plan.has_opaque_values(obj) != opaque_set:
        out.append(f"has_opaque_values: {plan.has_opaque_values(obj)}, a field is {'' if opaque_set else 'not '}set")
    long_arrays = any(type(v) is list and len(v) >= ARRAY_LIST_MIN for v in (getattr(obj, n) for n in plan.arrays))
    want = ((_codec_plan.WRAP if opaque_set else 0) | (_codec_plan.SCAN if plan.needs_key_scan(obj) else 0)
            | (_codec_plan.ARRAYS if long_arrays else 0))
    if plan.send_work(obj) != want:
        out.append(f"send_work: {plan.send_work(obj)} != {want}")
    # the collision scan is skipped only where the full scan finds nothing
    if not plan.needs_key_scan(obj) and _codec_keys.find_collision(obj) is not None:
        out.append("key scan skipped on a message with colliding keys")
    # encode as a whole: the bytes of the slow path (or both refuse)
    try:
        wire: Optional[bytes] = codec.encode(obj, "msgpack")
    except WireError:
        wire = None
    expected = None if _codec_keys.find_collision(obj) is not None else _encoded(slow)
    if wire != expected:
        out.append("encode: bytes differ from the slow path's")
    if wire is None:
        return out
    # receive: the plan's unwrap and the typed walk deliver the same values
    got = codec.unwrap(codec.decode(wire, "msgpack", unwrap_wrappers=False), allow_pickle=True)
    want = _slow_unwrap(codec.decode(wire, "msgpack", unwrap_wrappers=False))
    out += [f"unwrap: {d}" for d in differences(want, got)]
    return out


@pytest.mark.parametrize("name", MESSAGES)
def test_the_plan_agrees_with_the_slow_path(instances, name):
    assert instances[name], f"no instances of {name}"
    for i, obj in enumerate(instances[name]):
        found = plan_disagreements(obj)
        assert not found, f"{name} instance {i}: {found}"


def test_the_engine_step_messages():
    from reference_tools.bench import engine_samples

    for n in (1, 3, ARRAY_LIST_MIN):
        for obj in (engine_samples.scheduler_output(n), engine_samples.detokenizer_output(n)):
            assert obj.time_stats is not None
            assert not plan_disagreements(obj)
            for transport in ("pickle", "msgpack"):
                wire = engine_samples.engine_send(transport)(obj)
                assert engine_samples.same_delivery(engine_samples.engine_receive(transport)(wire), obj)


def test_nested_wrappers_take_the_slow_path(instances):
    """A batched request holds PickleWrapper positions one struct down: the walk wraps them."""
    req = msgspec.structs.replace(instances["TokenizedGenerateReqInput"][0], time_stats={"created": 1.0})
    batch = CLASSES["BatchTokenizedGenerateReqInput"](batch=[req])
    plan = _codec_plan.plan_of(type(batch))
    assert plan.nested == ("batch",) and not plan.simple(batch)
    wrapped = codec.wrap_fields(batch)
    assert isinstance(wrapped.batch[0].time_stats, io_struct.PickleWrapper)
    assert req.time_stats == {"created": 1.0}  # the caller's struct untouched
    assert not plan_disagreements(batch)


def test_a_map_with_colliding_keys_is_still_refused():
    cls = CLASSES["BatchTokenIDOutput"]
    obj = EveryArmBuilder(MANIFEST, CLASSES).instances("BatchTokenIDOutput")[0]
    obj = msgspec.structs.replace(obj, finished_reasons=[{Color.RED: 1, "red": 2}])
    assert _codec_plan.plan_of(cls).needs_key_scan(obj)
    with pytest.raises(WireError, match="R-VAL-6"):
        codec.encode(obj, "msgpack")


def test_a_broken_plan_is_caught(instances, monkeypatch):
    """Planted: the plan of BatchTokenIDOutput forgets its customized_info field."""
    cls = CLASSES["BatchTokenIDOutput"]
    plan = copy.copy(_codec_plan.plan_of(cls))
    assert "customized_info" in plan.direct
    broken = _codec_plan.Plan(cls)
    broken.direct = tuple(f for f in plan.direct if f != "customized_info")
    broken.direct_values = _codec_plan._tuple_getter(broken.direct)
    monkeypatch.setitem(_codec_plan._plans, cls, broken)
    obj = msgspec.structs.replace(instances["BatchTokenIDOutput"][0], customized_info={"k": [1]})
    found = plan_disagreements(obj)
    assert any(f.startswith("wrap:") for f in found), found


def test_checks_written_from_a_broken_plan_are_caught(instances, monkeypatch):
    """Planted: the checks of BatchTokenIDOutput are written without its finished_reasons field, so
    a finished request's reason is never scanned for colliding keys."""
    cls = CLASSES["BatchTokenIDOutput"]
    broken = _codec_plan.Plan(cls)
    broken.maps = tuple(f for f in broken.maps if f != "finished_reasons")
    broken.has_opaque_values, broken.send_work = _codec_plan._written_checks(broken)
    monkeypatch.setitem(_codec_plan._plans, cls, broken)
    obj = msgspec.structs.replace(instances["BatchTokenIDOutput"][0], finished_reasons=[{"type": "stop"}],
                                  beam_search_output=None, cached_tokens_details=None)
    assert any(f.startswith("send_work:") for f in plan_disagreements(obj))


def test_the_logging_switch_is_read_once(monkeypatch):
    pickle_wrapper.reset_log_switch()
    monkeypatch.setenv("IPC_LOG_PICKLE_OBJECTS", "1")
    assert pickle_wrapper._log_objects()
    monkeypatch.setenv("IPC_LOG_PICKLE_OBJECTS", "0")
    assert pickle_wrapper._log_objects()  # read once per process
    pickle_wrapper.reset_log_switch()
    assert not pickle_wrapper._log_objects()
    monkeypatch.delenv("IPC_LOG_PICKLE_OBJECTS")
    pickle_wrapper.reset_log_switch()


def test_wrapped_values_still_count_their_types():
    before = pickle_wrapper.pickle_residue["builtins.dict"]
    wrapper = pickle_wrapper.wrap({"a": 1})
    assert pickle_wrapper.pickle_residue["builtins.dict"] == before + 1
    assert wrapper is not None and pickle.loads(wrapper.data) == {"a": 1}


def test_a_requests_sampling_parameters_are_scanned_only_when_they_hold_a_map():
    """The scan looks into a struct-valued field through that struct's own map-capable fields:
    a request whose sampling parameters set no map is not scanned; one whose logit_bias or
    custom_params holds colliding keys is, and is refused."""
    from array import array

    S = io_struct  # noqa: N806 - reads like the struct tables

    def request(params: Any) -> Any:
        return S.TokenizedGenerateReqInput(
            rid="r", input_text="hi", input_ids=array("q", [1, 2]), input_embeds=None, mm_inputs=None,
            token_type_ids=None, sampling_params=params, return_logprob=False, logprob_start_len=-1,
            top_logprobs_num=0, token_ids_logprob=None, stream=False, return_hidden_states=False)

    plan = _codec_plan.plan_of(S.TokenizedGenerateReqInput)
    plain = request(S.SamplingParams(max_new_tokens=8, stop=["a"]))
    assert not plan.needs_key_scan(plain) and _codec_keys.find_collision(plain) is None
    for params in (S.SamplingParams(logit_bias={Color.RED: 1.0, "red": 2.0}),
                   S.SamplingParams(custom_params={"k": {Color.RED: 1, "red": 2}})):
        obj = request(params)
        assert plan.needs_key_scan(obj) and _codec_keys.find_collision(obj) is not None
        with pytest.raises(WireError, match="R-VAL-6"):
            codec.encode(obj, "msgpack")
    assert plan.needs_key_scan(request(S.SamplingParams(logit_bias={"1": 0.5})))  # a map: scanned, nothing found
