"""The spec versions (spec/SPEC.md §14) and the version that introduced each check.

A check's version is the newest version of the globs in ``INTRODUCED`` that match its id: a
family listed once at the version that added it, and a later line for a check that a later
version added to it (``Required.RoundTrip.*.EveryArm.*`` at 2.0 inside RoundTrip's 1.0).
A new check family needs one line here; tests/test_spec_versions.py fails for a collected
check that no line matches.

An implementation may declare the spec version it targets (``Adapter.spec_version``, a
testee's ``spec`` in its handshake, spec/testee.md §2.1). The run names the checks newer than
that target in its header and in each of their failures; they still run and still fail
(SPEC §15): the suite tests the current spec, and the target only tells the implementer which
failures come from what the CHANGELOG lists since then.
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional


@dataclass(frozen=True)
class SpecVersion:
    number: str   # "major.minor"
    date: str     # when this state of spec/SPEC.md was first committed
    summary: str  # what an implementer had to change for it (CHANGELOG.md has the list)


#: Every version, oldest first. Numbered after the fact for those before 3.0: SPEC.md said
#: "version 1" until then (§14 gives the rule).
VERSIONS: tuple[SpecVersion, ...] = (
    SpecVersion("1.0", "2026-11-29", "the first stated spec"),
    SpecVersion("1.1", "2026-11-29", "checks of the engine's receive paths and of a real server (existing MUSTs)"),
    SpecVersion("2.0", "2026-12-01", "new MUSTs (decode bounds, the complete dtype table, bitwise omission, float "
                                     "32 widening, duplicate keys, byte order, SHOULDs made MUST) and their checks"),
    SpecVersion("3.0", "unreleased", "every edge value at every field, the encoder's input domain, receive-path "
                                     "batches, map-encoded and HTTP inputs both ways, device strings"),
)
CURRENT: str = VERSIONS[-1].number

#: (check-id glob, version that introduced the checks it matches). Checks ids: SPEC §15.
INTRODUCED: tuple[tuple[str, str], ...] = (
    # 1.0: the areas of the first stated check index
    ("Required.Harness.*", "1.0"),  # the run itself (collection), not a spec requirement
    ("Required.Catalogue.*", "1.0"),
    ("Required.RoundTrip.*", "1.0"),
    ("Required.CrossTransport.*", "1.0"),
    ("Required.DoubleHop.*", "1.0"),
    ("Required.Primitive.*", "1.0"),
    ("Required.Generated.*", "1.0"),
    ("Required.Golden.*", "1.0"),
    ("Recommended.Golden.*", "1.0"),
    ("Required.HttpBase64.*", "1.0"),
    ("Required.Logprobs.*", "1.0"),
    ("Required.Tensor.*", "1.0"),
    ("Required.Unwrap.*", "1.0"),
    ("Required.Trace.*", "1.0"),
    ("Required.Socket.*", "1.0"),
    ("Required.ZeroCopy.*", "1.0"),
    # 1.1: the engine's receive paths and the end-to-end server
    ("Required.ReceivePath.*.Controller.*", "1.1"),
    ("Required.ReceivePath.*.Scheduler.*", "1.1"),
    ("Required.E2E.*", "1.1"),
    # 2.0
    ("Required.ReceivePath.*.Detokenizer.*", "2.0"),
    ("Required.ReceivePath.*.TokenizerManager.*", "2.0"),
    ("Required.ReceivePath.*.Unroutable.*", "2.0"),
    ("Required.RoundTrip.*.EveryArm.*", "2.0"),
    ("Required.Security.*", "2.0"),  # Recommended in 1.0 (NoPickleFromUntrustedPeer)
    ("Required.Bytes.*", "2.0"),
    ("Required.Refuses.*", "2.0"),
    ("Required.Accepts.*", "2.0"),
    ("Required.Extremes.*", "2.0"),
    ("Required.TensorDtype.*", "2.0"),
    ("Required.TensorMemory.*", "2.0"),
    ("Required.Omission.*", "2.0"),
    ("Required.FloatWidening.*", "2.0"),
    ("Required.ByteOrder.*", "2.0"),
    ("Recommended.Peer.*", "2.0"),
    # 3.0 (one line per family added for it)
    ("Required.EveryEdge.*", "3.0"),
    ("Required.Http.*", "3.0"),
    ("Required.Payload.*", "3.0"),
    ("Required.EnginePayload.*", "3.0"),
    ("Required.Pipeline.*", "3.0"),
    ("Required.ReceivePath.Batch*", "3.0"),  # the same ids, now three items with every one wrapped
    ("Required.Accepts.*.MapUnknownKey", "3.0"),
    ("Required.Accepts.*.MapDefaultsFilled", "3.0"),
    ("Required.Refuses.*.TupleTooShort.*", "3.0"),
    ("Required.Refuses.*.TupleTooLong.*", "3.0"),
    ("Required.Refuses.Tensor.DeviceIndexAbove127.*", "3.0"),
    ("Required.Tensor.*.DeviceKept", "3.0"),
    ("Required.TensorMemory.ndarray.*", "3.0"),
    ("Required.TensorMemory.array.*", "3.0"),
    ("Required.Accepts.*.CollidingKeysNotWritten", "3.0"),
    ("Required.Trace.*.OneLinkedTrace.*", "3.0"),
    ("Required.HttpBase64.*.Corpus.*", "3.0"),
    ("Required.Refuses.*.FloatKeyForInt.*", "3.0"),
    ("Required.Refuses.*.BoolKeyForInt.*", "3.0"),
    ("Required.Refuses.Tensor.DeviceIndexLeadingZero.*", "3.0"),
    ("Required.Refuses.Tensor.DeviceIndexPlusSign.*", "3.0"),
    ("Required.Refuses.Tensor.DeviceIndexNegative.*", "3.0"),
    ("Required.Refuses.Tensor.DeviceCpuIndexed.*", "3.0"),
    ("Required.Refuses.Tensor.DeviceUpperCase.*", "3.0"),
    ("Required.Accepts.*.CollidingKeysKeptOnce", "3.0"),
)

_NUMBER = re.compile(r"^(\d+)\.(\d+)$")


def parse(number: str) -> tuple[int, int]:
    """'2.0' -> (2, 0); a bare major ('1') means its .0. ValueError for anything else."""
    text = str(number).strip()
    if re.fullmatch(r"\d+", text):
        text += ".0"
    match = _NUMBER.match(text)
    if not match:
        raise ValueError(f"spec version {number!r} is not major.minor (e.g. {CURRENT})")
    return int(match.group(1)), int(match.group(2))


def normalize(number: str) -> str:
    """A declared version in the table's spelling ('1' -> '1.0'); ValueError for one the spec never had."""
    major, minor = parse(number)
    text = f"{major}.{minor}"
    if text not in {v.number for v in VERSIONS}:
        raise ValueError(f"spec version {number!r} does not exist; versions: {', '.join(v.number for v in VERSIONS)}")
    return text


def introducing_line(check_id: str) -> Optional[tuple[str, str]]:
    """The line of INTRODUCED that decides a check's version (glob, version): the newest that
    matches; None when none does."""
    found = [(glob, version) for glob, version in INTRODUCED if fnmatch.fnmatchcase(check_id, glob)]
    return max(found, key=lambda line: parse(line[1])) if found else None


def introduced_in(check_id: str) -> Optional[str]:
    """The version that introduced a check, or None when no line of INTRODUCED matches it."""
    line = introducing_line(check_id)
    return line[1] if line else None


def newer_than(check_id: str, target: str) -> Optional[str]:
    """The check's version when it is newer than `target`, else None."""
    version = introduced_in(check_id)
    return version if version is not None and parse(version) > parse(target) else None


def newer_checks(check_ids: Iterable[str], target: str) -> Counter[str]:
    """family (the INTRODUCED glob that dates it) -> how many of these checks are newer than `target`."""
    found: Counter[str] = Counter()
    for check_id in check_ids:
        line = introducing_line(check_id)
        if line and parse(line[1]) > parse(target):
            found[f"{line[0]} ({line[1]})"] += 1
    return found


def family_hint(check_id: str) -> str:
    """A glob for the family of a check no line dates, to suggest its line: 'Required.Area.*.Check.*'."""
    parts = check_id.split(".")
    return ".".join(parts[:2]) + (f".*.{parts[3]}.*" if len(parts) > 4 else ".*")


def header_line(check_ids: Iterable[str], target: str, families: int = 6) -> str:
    """The run's line about versions: the spec the suite tests, the implementation's target and
    which of the selected checks are newer than it (they run and count like any other)."""
    ids = list(check_ids)
    line = f"spec {CURRENT}; the implementation targets spec {target}"
    newer = newer_checks(ids, target)
    if not newer:
        return line + ": no selected check is newer"
    shown = ", ".join(f"{f}: {n}" for f, n in sorted(newer.items(), key=lambda kv: (-kv[1], kv[0]))[:families])
    more = f", {len(newer) - families} more families" if len(newer) > families else ""
    return (f"{line}: {sum(newer.values())} of {len(ids)} selected checks are newer and count like any other "
            f"(CHANGELOG.md, the spec sections after {target}): {shown}{more}")


def failure_note(check_id: str, target: str) -> str:
    """What a failure of a check newer than the target says after its message ('' otherwise)."""
    version = newer_than(check_id, target)
    if version is None:
        return ""
    return (f"(this check is new in spec {version}, newer than the {target} the implementation targets: "
            f"CHANGELOG.md, section 'Spec {version}', says what to change)")
