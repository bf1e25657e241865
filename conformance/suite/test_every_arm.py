"""Every field at every depth: each message's EveryArm instances round-trip identically.

The instances (conformance/every_arm.py) give every field of every struct a message can
carry, however deep, a value of each arm of its type (conformance/coverage.py), so a
field that does not travel fails here even when no canonical variant sets it.
"""

from __future__ import annotations

from conformance.compare import differences
from conformance.every_arm import EveryArmBuilder
from conformance.plugin import check, failure_message


@check("RoundTrip", per=("struct", "transport"), name="EveryArm")
def test_every_arm(ipc, struct, transport):
    # Built twice: the expected values stay untouched by whatever encode does to its input.
    sent = EveryArmBuilder(ipc.manifest, ipc.classes).instances(struct)
    expected = EveryArmBuilder(ipc.manifest, ipc.classes).instances(struct)
    for i, (value, want) in enumerate(zip(sent, expected)):
        where = f"{struct} EveryArm instance {i}/{len(sent)}"
        try:
            decoded = ipc.adapter.decode(ipc.adapter.encode(value, transport), transport)
        except Exception as exc:  # the implementation's own error names the field; add which instance
            raise AssertionError(f"{where} could not cross {transport}: {type(exc).__name__}: {exc}") from exc
        diffs = differences(want, decoded)
        assert not diffs, failure_message(f"{where} changed crossing {transport}", diffs)
