"""Round trips: decode(encode(x)) is exactly x, under each transport and across them."""

from __future__ import annotations

from conformance.compare import differences
from conformance.plugin import PRIMITIVE_SAMPLES, check
from conformance.suite.failure import Failure, raise_failure, round_trip_step
from conformance.transport import TRANSPORTS


@check("RoundTrip", per=("struct", "transport", "variant"), name="Identical")
def test_roundtrip(ipc, struct, transport, variant):
    value = ipc.instance(struct, variant)
    data = ipc.adapter.encode(value, transport)
    diffs = differences(ipc.instance(struct, variant), ipc.adapter.decode(data, transport))
    if diffs:
        sent = ipc.instance(struct, variant)
        raise_failure(Failure(f"{struct} ({variant}) changed crossing {transport}", "R-MSG-1 (R-VAL-*, R-EXT-*)",
                              round_trip_step(ipc, sent, data, transport), diffs, data, sent), ipc)


@check("CrossTransport", per=("struct", "variant"), name="SameValue")
def test_cross_transport(ipc, struct, variant):
    if len(ipc.transports) < 2:
        import pytest

        pytest.skip("needs both transports")
    got = {t: ipc.adapter.decode(ipc.adapter.encode(ipc.instance(struct, variant), t), t) for t in ipc.transports}
    diffs = differences(got["pickle"], got["msgpack"])
    if diffs:
        sent = ipc.instance(struct, variant)
        steps = {t: round_trip_step(ipc, sent, ipc.adapter.encode(ipc.instance(struct, variant), t), t)
                 for t in TRANSPORTS}
        raise_failure(Failure(f"{struct} ({variant}) differs between pickle and msgpack", "R-NORM-1",
                              "the implementation's encode and decode over each transport, the two results compared "
                              f"(expected: the pickle result; msgpack: {steps['msgpack']})",
                              diffs, value=sent), ipc)


@check("DoubleHop", per=("struct", "transport"), name="Stable")
def test_double_hop(ipc, struct, transport):
    first = ipc.adapter.encode(ipc.instance(struct, "edge"), transport)
    hop = ipc.adapter.decode(first, transport)
    again = ipc.adapter.encode(hop, transport)
    diffs = differences(hop, ipc.adapter.decode(again, transport))
    if diffs:
        raise_failure(Failure(f"{struct} changed on its second hop over {transport}", "R-MSG-9",
                              "the implementation's second hop: its encode of a value it decoded, then its decode "
                              "(expected: the value after the first hop)", diffs, again, hop), ipc)
    if transport == "msgpack" and again != first:
        at = next((i for i, (a, b) in enumerate(zip(again, first)) if a != b), min(len(again), len(first)))
        raise_failure(Failure(f"{struct}: re-encoding a decoded message changed its bytes", "R-MSG-9",
                              f"the implementation's encode of a value it decoded: {len(again)} bytes vs "
                              f"{len(first)} of the first hop, first difference at byte {at} (first hop there: "
                              f"{first[at:at + 8].hex(' ') or 'its end'})", data=again, value=hop), ipc)


@check("Primitive", per=("primitive", "transport"), name="TopLevel")
def test_top_level_primitive(ipc, primitive, transport):
    value = PRIMITIVE_SAMPLES[primitive]
    data = ipc.adapter.encode(value, transport)
    decoded = ipc.adapter.decode(data, transport)
    diffs = differences(value, decoded)
    if diffs:
        raise_failure(Failure(f"top-level {primitive} {value!r} came back as {decoded!r}", "R-MSG-6",
                              round_trip_step(ipc, value, data, transport), diffs, data, value), ipc)
