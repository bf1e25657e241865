"""Every edge value at every field: each value class's instances (conformance/every_edge.py)
cross each transport exactly, one check per (message, value class, transport).

One value class per check id (`Required.EveryEdge.<Struct>.<ValueClass>.<transport>`), so a
known defect of one class (a 0-d ndarray's shape) never hides a new one of another (-inf lost
inside a nested logprob list). The round trip is the implementation's own: its wrap before the
send where a PickleWrapper position holds an object, its decode, its unwrap on receipt. Values
compare exactly (conformance.compare: floats by their bits, True is not 1); a numpy scalar is
expected as SPEC §3.1 maps it over msgpack, as itself over pickle.
"""

from __future__ import annotations

import pytest

from conformance.compare import differences
from conformance.every_edge import EveryEdgeBuilder, as_received, edge_messages
from conformance.plugin import check
from conformance.suite.capability import require
from conformance.suite.failure import Failure, raise_failure, round_trip_step
from conformance.value_classes import by_name


def _messages(class_name: str):
    return {"struct": lambda ipc: edge_messages(ipc.manifest, by_name(class_name))}


_BUILDERS: dict[tuple[int, str], tuple[object, EveryEdgeBuilder]] = {}


def _builder(ipc, class_name: str) -> EveryEdgeBuilder:
    """One builder per session and class: its width caches serve every message."""
    key = (id(ipc), class_name)
    cached = _BUILDERS.get(key)
    if cached is None or cached[0] is not ipc:
        cached = _BUILDERS[key] = (ipc, EveryEdgeBuilder(ipc.manifest, ipc.classes, by_name(class_name)))
    return cached[1]


def _every_edge(ipc, struct: str, transport: str, class_name: str) -> None:
    value_class = by_name(class_name)
    if value_class.python_only:
        from conformance.testee.adapter import SubprocessAdapter

        if isinstance(ipc.adapter, SubprocessAdapter):
            pytest.skip(f"{class_name}: numpy scalars are values of a Python encoder's input domain (SPEC 3.1); "
                        "the testee protocol's JSON view carries only the value they stand for")
    sender = _builder(ipc, class_name)
    sender.holds_objects = False
    sent = sender.instances(struct)
    # Built again: the expected values stay untouched by whatever the send does to its input.
    expected = [as_received(v, transport) for v in sender.instances(struct)]
    if sender.holds_objects:
        require(ipc, "unwrap")
    requirement = ", ".join(value_class.requirements)
    for i, (value, want) in enumerate(zip(sent, expected)):
        where = f"{struct} EveryEdge {class_name} instance {i}/{len(sent)}"
        step = "the implementation's wrap and encode" if sender.holds_objects else "the implementation's encode"
        data = None
        try:
            out = ipc.adapter.wrap(value) if sender.holds_objects else value
            data = ipc.adapter.encode(out, transport)
            step = f"the implementation's decode of its own encode output over {transport}"
            got = ipc.adapter.decode(data, transport)
            if sender.holds_objects:
                step = "the implementation's unwrap of what it decoded"
                got = ipc.adapter.unwrap(got)
        except Exception as exc:  # noqa: BLE001 - its own error names the field; the message adds which instance
            failure = Failure(f"{where} could not cross {transport}: {type(exc).__name__}: {exc}", requirement,
                              f"{step} raised", data=data, value=want)
            try:
                raise_failure(failure, ipc)
            except AssertionError as error:
                raise error from exc
        diffs = differences(want, got)
        if diffs:
            step = (f"the implementation's wrap, encode, decode and unwrap over {transport}" if sender.holds_objects
                    else round_trip_step(ipc, want, data, transport))
            raise_failure(Failure(f"{where} changed crossing {transport}", requirement, step, diffs, data, want), ipc)


@check("EveryEdge", per=("struct", "transport"), name="NonFinite", cases=_messages("NonFinite"))
def test_non_finite(ipc, struct, transport):
    """+inf, -inf and NaN at every float position, innermost logprob lists included (R-VAL-2, R-NONE-1)."""
    _every_edge(ipc, struct, transport, "NonFinite")


@check("EveryEdge", per=("struct", "transport"), name="SignedZero", cases=_messages("SignedZero"))
def test_signed_zero(ipc, struct, transport):
    _every_edge(ipc, struct, transport, "SignedZero")


@check("EveryEdge", per=("struct", "transport"), name="Subnormal", cases=_messages("Subnormal"))
def test_subnormal(ipc, struct, transport):
    _every_edge(ipc, struct, transport, "Subnormal")


@check("EveryEdge", per=("struct", "transport"), name="Float32Origin", cases=_messages("Float32Origin"))
def test_float32_origin(ipc, struct, transport):
    _every_edge(ipc, struct, transport, "Float32Origin")


@check("EveryEdge", per=("struct", "transport"), name="IntEdges", cases=_messages("IntEdges"))
def test_int_edges(ipc, struct, transport):
    _every_edge(ipc, struct, transport, "IntEdges")


@check("EveryEdge", per=("struct", "transport"), name="EmptyText", cases=_messages("EmptyText"))
def test_empty_text(ipc, struct, transport):
    _every_edge(ipc, struct, transport, "EmptyText")


@check("EveryEdge", per=("struct", "transport"), name="NonAscii", cases=_messages("NonAscii"))
def test_non_ascii(ipc, struct, transport):
    _every_edge(ipc, struct, transport, "NonAscii")


@check("EveryEdge", per=("struct", "transport"), name="EmptyBytes", cases=_messages("EmptyBytes"))
def test_empty_bytes(ipc, struct, transport):
    _every_edge(ipc, struct, transport, "EmptyBytes")


@check("EveryEdge", per=("struct", "transport"), name="EmptyContainer", cases=_messages("EmptyContainer"))
def test_empty_container(ipc, struct, transport):
    _every_edge(ipc, struct, transport, "EmptyContainer")


@check("EveryEdge", per=("struct", "transport"), name="OneElement", cases=_messages("OneElement"))
def test_one_element(ipc, struct, transport):
    _every_edge(ipc, struct, transport, "OneElement")


@check("EveryEdge", per=("struct", "transport"), name="ZeroDim", cases=_messages("ZeroDim"))
def test_zero_dim(ipc, struct, transport):
    _every_edge(ipc, struct, transport, "ZeroDim")


@check("EveryEdge", per=("struct", "transport"), name="PickleWrapperFalsy", cases=_messages("PickleWrapperFalsy"))
def test_pickle_wrapper_falsy(ipc, struct, transport):
    """{}, [], 0, "", False and 0.0 as the object of a PickleWrapper position: wrapped by the
    implementation's own send, unwrapped by its receive, they arrive as themselves (R-PW-1, R-PW-3)."""
    _every_edge(ipc, struct, transport, "PickleWrapperFalsy")


@check("EveryEdge", per=("struct", "transport"), name="NumpyScalar", cases=_messages("NumpyScalar"))
def test_numpy_scalar(ipc, struct, transport):
    """np.bool_, np.float32/np.float64 and np.int64/np.int32 where engine code holds them (SPEC 3.1)."""
    _every_edge(ipc, struct, transport, "NumpyScalar")
