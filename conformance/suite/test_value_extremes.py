"""Values at the edges of §3 that the canonical instances do not hold: the unsigned 64-bit
range of ints (R-VAL-1) and the bit pattern of every float64, NaN payloads and sign included
(§3, R-VAL-2). Each message's own int and float fields take them and travel both ways."""

from __future__ import annotations

import struct
import struct as struct_module  # the checks' own parameter is called struct

from conformance.compare import differences
from conformance.plugin import check
from conformance.suite.failure import Failure, raise_failure, round_trip_step

INT_FIELDS = ("int", "Optional[int]")
FLOAT_FIELDS = ("float", "Optional[float]")
INTS = (2**64 - 1, 2**63, -(2**63))
FLOATS = tuple(struct.unpack(">d", bytes.fromhex(h))[0] for h in (
    "7ff0000000000001",   # a signalling NaN with payload 1
    "fff8000000000123",   # a negative quiet NaN with a payload
    "8000000000000000",   # -0.0
    "0000000000000001",   # the smallest subnormal
))


def _structs(ipc) -> list[str]:
    """One message per kind of field is enough: every message shares the codec."""
    found = {}
    for spec in ipc.manifest.messages:
        for field in spec.fields:
            kind = "int" if field.type in INT_FIELDS else "float" if field.type in FLOAT_FIELDS else None
            if kind and kind not in found:
                found[kind] = spec.name
    return sorted(set(found.values()))


def _with_extremes(ipc, struct_name: str, index: int):
    value = ipc.instance(struct_name, "typical")
    for field in ipc.manifest.structs[struct_name].fields:
        if field.type in INT_FIELDS:
            setattr(value, field.name, INTS[index % len(INTS)])
        elif field.type in FLOAT_FIELDS:
            setattr(value, field.name, FLOATS[index % len(FLOATS)])
    return value


@check("Extremes", per=("struct", "transport"), name="RoundTrip", cases={"struct": _structs})
def test_value_extremes_round_trip(ipc, struct, transport):
    for index in range(max(len(INTS), len(FLOATS))):
        value = _with_extremes(ipc, struct, index)
        data = ipc.adapter.encode(value, transport)
        diffs = differences(_with_extremes(ipc, struct, index), ipc.adapter.decode(data, transport))
        if diffs:
            sent = _with_extremes(ipc, struct, index)
            field = diffs[0][2:].split(":")[0].split(".")[0].split("[")[0]  # '$.name: ...' -> name
            kind = ipc.manifest.structs[struct].field(field).type if field in sent.__struct_fields__ else ""
            requirement = "R-VAL-2 (float bits)" if kind in FLOAT_FIELDS else "R-VAL-1 (64-bit ints)"
            raise_failure(Failure(f"{struct} with 64-bit extremes changed crossing {transport}", requirement,
                                  round_trip_step(ipc, sent, data, transport), diffs, data, sent,
                                  notes=[f"extremes: ints {INTS[index % len(INTS)]}, floats "
                                         f"{FLOATS[index % len(FLOATS)]!r} (bits "
                                         f"{struct_module.pack('>d', FLOATS[index % len(FLOATS)]).hex()})"]), ipc)
