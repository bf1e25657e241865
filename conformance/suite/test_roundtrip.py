"""Round trips: decode(encode(x)) is exactly x, under each transport and across them."""

from __future__ import annotations

from conformance.compare import differences
from conformance.plugin import PRIMITIVE_SAMPLES, check, failure_message


@check("RoundTrip", per=("struct", "transport", "variant"), name="Identical")
def test_roundtrip(ipc, struct, transport, variant):
    value = ipc.instance(struct, variant)
    decoded = ipc.adapter.decode(ipc.adapter.encode(value, transport), transport)
    diffs = differences(ipc.instance(struct, variant), decoded)
    assert not diffs, failure_message(f"{struct} ({variant}) changed crossing {transport}", diffs)


@check("CrossTransport", per=("struct", "variant"), name="SameValue")
def test_cross_transport(ipc, struct, variant):
    if len(ipc.transports) < 2:
        import pytest

        pytest.skip("needs both transports")
    got = {t: ipc.adapter.decode(ipc.adapter.encode(ipc.instance(struct, variant), t), t) for t in ipc.transports}
    diffs = differences(got["pickle"], got["msgpack"])
    assert not diffs, failure_message(f"{struct} ({variant}) differs between pickle and msgpack", diffs)


@check("DoubleHop", per=("struct", "transport"), name="Stable")
def test_double_hop(ipc, struct, transport):
    first = ipc.adapter.encode(ipc.instance(struct, "edge"), transport)
    hop = ipc.adapter.decode(first, transport)
    second = ipc.adapter.decode(ipc.adapter.encode(hop, transport), transport)
    diffs = differences(hop, second)
    assert not diffs, failure_message(f"{struct} changed on its second hop over {transport}", diffs)
    if transport == "msgpack":
        assert ipc.adapter.encode(hop, transport) == first, f"{struct}: re-encoding a decoded message changed its bytes"


@check("Primitive", per=("primitive", "transport"), name="TopLevel")
def test_top_level_primitive(ipc, primitive, transport):
    value = PRIMITIVE_SAMPLES[primitive]
    decoded = ipc.adapter.decode(ipc.adapter.encode(value, transport), transport)
    assert not differences(value, decoded), f"top-level {primitive} {value!r} came back as {decoded!r}"
