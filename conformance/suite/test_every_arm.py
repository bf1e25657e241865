"""Every field at every depth: each message's EveryArm instances round-trip identically.

The instances (conformance/every_arm.py) give every field of every struct a message can
carry, however deep, a value of each arm of its type (conformance/coverage.py), so a
field that does not travel fails here even when no canonical variant sets it.
"""

from __future__ import annotations

from conformance.compare import differences
from conformance.every_arm import EveryArmBuilder
from conformance.plugin import check
from conformance.suite.failure import Failure, raise_failure, round_trip_step

REQUIREMENT = "R-MSG-1 (R-VAL-*, R-EXT-*)"


@check("RoundTrip", per=("struct", "transport"), name="EveryArm")
def test_every_arm(ipc, struct, transport):
    # Built twice: the expected values stay untouched by whatever encode does to its input.
    sent = EveryArmBuilder(ipc.manifest, ipc.classes).instances(struct)
    expected = EveryArmBuilder(ipc.manifest, ipc.classes).instances(struct)
    for i, (value, want) in enumerate(zip(sent, expected)):
        where = f"{struct} EveryArm instance {i}/{len(sent)}"
        step = f"the implementation's encode over {transport}"
        try:
            data = ipc.adapter.encode(value, transport)
            step = f"the implementation's decode of its own encode output over {transport}"
            decoded = ipc.adapter.decode(data, transport)
        except Exception as exc:  # noqa: BLE001 - its own error names the field; the message adds which instance
            failure = Failure(f"{where} could not cross {transport}: {type(exc).__name__}: {exc}", REQUIREMENT,
                              f"{step} raised", value=want)
            try:
                raise_failure(failure, ipc)
            except AssertionError as error:
                raise error from exc
        diffs = differences(want, decoded)
        if diffs:
            raise_failure(Failure(f"{where} changed crossing {transport}", REQUIREMENT,
                                  round_trip_step(ipc, want, data, transport), diffs, data, want), ipc)
