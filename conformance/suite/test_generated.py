"""Generated values: hypothesis draws instances of every struct from its own field types."""

from __future__ import annotations

import pytest
from hypothesis import given

from conformance.compare import differences
from conformance.plugin import check


def _strategy(ipc, struct):
    if struct not in ipc.live_manifest.structs:
        pytest.fail(f"{ipc.adapter.label} has no struct {struct}: no generated example can cover it")
    return ipc.strategies.for_struct(struct)


@check("Generated", per=("live_struct", "transport"), name="RoundTrip")
def test_generated_roundtrip(ipc, live_struct, transport):
    adapter = ipc.adapter

    @ipc.hypothesis_settings
    @given(_strategy(ipc, live_struct))
    def roundtrip(value):
        decoded = adapter.decode(adapter.encode(value, transport), transport)
        diffs = differences(value, decoded)
        assert not diffs, f"{live_struct} changed crossing {transport}:\n  " + "\n  ".join(diffs[:10])

    roundtrip()


@check("Generated", per=("live_struct",), name="CrossTransport")
def test_generated_cross_transport(ipc, live_struct):
    if len(ipc.transports) < 2:
        pytest.skip("needs both transports")
    adapter = ipc.adapter

    @ipc.hypothesis_settings
    @given(_strategy(ipc, live_struct))
    def cross(value):
        got = [adapter.decode(adapter.encode(value, t), t) for t in ("pickle", "msgpack")]
        diffs = differences(*got)
        assert not diffs, f"{live_struct} differs between pickle and msgpack:\n  " + "\n  ".join(diffs[:10])

    cross()
