"""The records of a conformance run, typed: the outcome of a check, one record per check, and
results.json (the document `ipc-conformance run --report/--report-dir` writes).

The one definition of the outcome vocabulary: the plugin makes records with it, the summary
lines, reports, badge and the proof tools count and show them through it. results.json is
the `Results` struct; its JSON Schema (spec/schemas/results.schema.json) is generated from it
(`python -m conformance.json_schemas --write`).
"""

from __future__ import annotations

import enum
import json
import re
from pathlib import Path
from typing import Annotated, Iterable, Optional, Protocol, TypeVar, Union, overload

import msgspec

from conformance.errors import UsageError, invalid_member


def _doc(text: str) -> msgspec.Meta:
    """A member's description in the published JSON Schema."""
    return msgspec.Meta(description=text)

__all__ = ["CheckIdentity", "CheckRecord", "Counts", "Note", "Outcome", "Residue", "Results", "ResultsFileError",
           "counts", "decode_results", "encode_results", "load_results", "not_tested_reason"]


class Outcome(str, enum.Enum):
    """What a check came to, after the expected-failure list and its level (its JSON spelling is the value)."""

    PASSED = "passed"
    FAILED = "failed"  # a Required check (or a harness error, or a Recommended one under --strict)
    XFAILED = "xfailed"  # a listed failure: failed as the expected-failure list says (a failure all the same)
    RECOMMENDED_FAILED = "recommended-failed"  # a Recommended check failed: reported, fails the run only with --strict
    SKIPPED = "skipped"

    @property
    def symbol(self) -> str:
        return _SYMBOL[self]

    @property
    def word(self) -> str:
        """How a report names one check of this outcome."""
        return _WORD[self]

    @property
    def problem(self) -> bool:
        """Whether a reader should see this check's message (failures of every kind)."""
        return self in PROBLEMS


_SYMBOL = {Outcome.PASSED: "✓", Outcome.FAILED: "✗", Outcome.XFAILED: "≈", Outcome.RECOMMENDED_FAILED: "!",
           Outcome.SKIPPED: "–"}
_WORD = {Outcome.PASSED: "passed", Outcome.FAILED: "failed", Outcome.XFAILED: "listed failure",
         Outcome.RECOMMENDED_FAILED: "recommended failed", Outcome.SKIPPED: "not tested"}
#: outcomes whose message a reader should see, worst first
PROBLEMS = (Outcome.FAILED, Outcome.RECOMMENDED_FAILED, Outcome.XFAILED)
LEGEND = "✓ passed · ✗ failed · ≈ listed failure · ! recommended failed · – not tested"


class Note(str, enum.Enum):
    """What the verdict adds to a record beside its outcome (typed, so no one reads it from the message)."""

    LISTED_BUT_PASSED = "listed-but-passed"  # failed: the expected-failure list names it, yet it passed
    NOT_REPRODUCED = "not-reproduced"  # a listed Generated check met no counterexample this run
    HARNESS_ERROR = "harness-error"  # failed: the testee crashed, hung or broke the protocol


class CheckIdentity(msgspec.Struct, omit_defaults=True, frozen=True):
    """What a check id is made of, as the check's declaration (`@check`) and its parameters give
    it: never read back from the id, whose parts may hold dots (a refusal case `Tensor.DtypeNotStr`,
    an accepted form `AbortReq.wide_ints`)."""

    level: Annotated[str, _doc("Required or Recommended")]
    area: Annotated[str, _doc("the check's area (RoundTrip, Refuses, ...)")]
    subject: Annotated[str, _doc("the value of the check's first axis (a struct, a case), or All")]
    name: Annotated[str, _doc("the check's name (Identical, Decode, ...)")]
    axes: Annotated[list[tuple[str, str]], _doc("(axis, value) of each further axis: transport, variant, ...")] = []

    @property
    def id(self) -> str:
        return ".".join([self.level, self.area, self.subject, self.name, *(value for _, value in self.axes)])

    @classmethod
    def parsed(cls, check_id: str) -> "CheckIdentity":
        """A record of a results.json written before identities were recorded: read off its id (a
        part holding a dot is misread; a newer run records the identity)."""
        parts = check_id.split(".")
        parts += [""] * (4 - len(parts))
        return cls(level=parts[0], area=parts[1], subject=parts[2], name=parts[3],
                   axes=[(f"axis{i}", v) for i, v in enumerate(parts[4:], 1)])


class CheckRecord(msgspec.Struct, omit_defaults=True, frozen=True):
    """One check of a run."""

    id: Annotated[str, _doc("the check id, Level.Area.Subject.Name[.axes...]")]
    outcome: Outcome
    message: Annotated[str, _doc("the failure's message ('' when it passed); expected-failure lists match line 1")]
    reason: Annotated[str, _doc("an expected failure: why the expected-failure list expects it")] = ""
    note: Optional[Note] = None
    check: Annotated[Optional[CheckIdentity], _doc("the parts of the id, as the check declared them (absent "
                                                   "from files of older versions of the suite)")] = None

    @property
    def identity(self) -> CheckIdentity:
        """The check's parts: recorded, else (an older file) read off the id."""
        return self.check if self.check is not None else CheckIdentity.parsed(self.id)


class Counts(msgspec.Struct, kw_only=True):
    """The one count of a run that every report reads (the summary lines, pytest's line, JUnit,
    results.json, report.md, the site, the badge, `report compare`): checks per outcome, each
    check counted once under its own outcome, and what the conformance figures derive from them.

    The vocabulary, the same on every surface: *passed*; *failed* (every failure, listed or not);
    *listed* (failures the expected-failure list names: they do not fail the run, but they are
    failures); *recommended failed*; *not tested* (skipped, with the reason)."""

    passed: int = 0
    failed: Annotated[int, _doc("failures that fail the run (a listed failure is not among them: see xfailed)")] = 0
    xfailed: Annotated[int, _doc("listed failures: failed as the expected-failure list says")] = 0
    recommended_failed: int = msgspec.field(default=0, name="recommended-failed")
    skipped: Annotated[int, _doc("not tested: skipped, each with its reason in not-tested")] = 0
    required_failed: Annotated[int, _doc("Required checks that failed, listed or not: the badge is green only "
                                         "when this is 0")] = msgspec.field(default=0, name="required-failed")
    not_tested: Annotated[dict[str, int], _doc("why checks were not tested (a capability not offered, ...) "
                                               "-> how many")] = msgspec.field(default_factory=dict,
                                                                               name="not-tested")

    def __getitem__(self, outcome: Union[Outcome, str]) -> int:
        return int(getattr(self, Outcome(outcome).name.lower()))

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.xfailed + self.recommended_failed + self.skipped

    @property
    def listed(self) -> int:
        """Failures the expected-failure list names (they do not fail the run)."""
        return self.xfailed

    @property
    def failures(self) -> int:
        """Every failure but a Recommended one, listed or not: what the figures call failed."""
        return self.failed + self.xfailed

    @property
    def ran(self) -> int:
        """Checks that were tested: every one but those not tested."""
        return self.total - self.skipped

    def phrase(self) -> str:
        """The run's counts in the suite's words, every number always present (the summary line,
        report.md, the site): `P passed, F failed (L listed), R recommended failed, N not tested`."""
        return (f"{self.passed} passed, {self.failures} failed ({self.listed} listed), "
                f"{self.recommended_failed} recommended failed, {self.skipped} not tested")

    def brief(self) -> str:
        """The same counts, short (the badge, `report compare`'s cells): `P/ran passed`, then each
        kind of failure and the checks not tested, where there are any."""
        if not self.total:
            return "no checks"
        if not self.ran:
            return f"{self.skipped} not tested"
        parts = [f"{self.passed}/{self.ran} passed"]
        if self.failures:
            parts.append(f"{self.failures} failed" + (f" ({self.listed} listed)" if self.listed else ""))
        if self.recommended_failed:
            parts.append(f"{self.recommended_failed} recommended failed")
        if self.skipped:
            parts.append(f"{self.skipped} not tested")
        return ", ".join(parts)


class HasOutcome(Protocol):
    """A record of one check, as any reader of results holds it."""

    @property
    def id(self) -> str: ...

    @property
    def outcome(self) -> Outcome: ...

    @property
    def message(self) -> str: ...


C = TypeVar("C", bound=Counts)

_SKIPPED = re.compile(r"^Skipped: ")
_NOT_OFFERED = re.compile(r" does not offer (?='[\w.:-]+' \()")
_CAPABILITY = re.compile(r"(?:^|, )'([\w.:-]+)' \(")


def not_tested_reason(message: str) -> str:
    """Why a check was not tested, from its skip message, as the counts group them: a capability
    the implementation does not offer (suite/capability.py) by the capability's name, any other
    reason by its first line."""
    line = _SKIPPED.sub("", (message.strip().splitlines() or [""])[0]).strip()
    found = _NOT_OFFERED.search(line)
    names = _CAPABILITY.findall(line[found.end():]) if found else []
    if names:
        return ", ".join(names) + " not offered"
    return line or "no reason given"


@overload
def counts(records: Iterable[HasOutcome]) -> Counts: ...
@overload
def counts(records: Iterable[HasOutcome], into: type[C]) -> C: ...


def counts(records: Iterable[HasOutcome], into: type[Counts] = Counts) -> Counts:
    """The one count of these records (`Counts`); `into` a subclass that shows them (the site's)."""
    out = {o: 0 for o in Outcome}
    required_failed = 0
    reasons: dict[str, int] = {}
    for r in records:
        out[r.outcome] += 1
        if r.outcome in (Outcome.FAILED, Outcome.XFAILED) and r.id.startswith("Required."):
            required_failed += 1
        elif r.outcome is Outcome.SKIPPED:
            reason = not_tested_reason(r.message)
            reasons[reason] = reasons.get(reason, 0) + 1
    not_tested = dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    return into(**{o.name.lower(): n for o, n in out.items()}, required_failed=required_failed,
                not_tested=not_tested)


class Residue(msgspec.Struct):
    """Fields that still travel as PickleWrapper or Any, and the objects wrapped during the run."""

    fields: Annotated[list[tuple[str, str]], _doc("(Struct.field, its type) of each field that may still carry pickle")]
    wrapped: Annotated[dict[str, int], _doc("type name -> objects of it pickled into a PickleWrapper")] = {}


class Results(msgspec.Struct, omit_defaults=True, kw_only=True):
    """results.json: the run's metadata, its count per outcome, the pickle residue, one record per check.
    Members other than `impl` and `results` are absent from files of older versions of the suite."""

    impl: Annotated[str, _doc("the implementation's label (name-version)")]
    manifest: Annotated[Optional[str], _doc("the id of the manifest the run checked against")] = None
    transport: Annotated[Optional[str], _doc("the run's --transport: msgpack, pickle or both")] = None
    impl_spec: Annotated[Optional[str], _doc("the --impl the run was given (what a reproducer command names)")] = None
    impl_version: Annotated[Optional[str], _doc("the implementation's version")] = None
    transports: Annotated[Optional[list[str]], _doc("the transports that ran")] = None
    suite_version: Annotated[Optional[str], _doc("the version of ipc-conformance that ran")] = None
    spec_version: Annotated[Optional[str], _doc("the SPEC.md version of the suite")] = None
    target_spec_version: Annotated[Optional[str], _doc("the SPEC.md version the implementation targets")] = None
    date: Annotated[Optional[str], _doc("when the run ended, UTC, YYYY-MM-DDTHH:MMZ")] = None
    newer_than_target: Annotated[Optional[dict[str, int]], _doc("check family -> checks newer than the target")] = None
    counts: Optional[Counts] = None
    residue: Optional[Residue] = None
    results: list[CheckRecord]


class ResultsFileError(UsageError):
    """A file that is not a results.json of `ipc-conformance run`; the message names the file and field."""


def encode_results(results: Results) -> str:
    """results.json's text. Through the standard json module: a failure message may quote a str
    with a lone surrogate (sent on purpose), which it escapes where msgspec's encoder refuses it."""
    return json.dumps(msgspec.to_builtins(results), indent=1)


def decode_results(text: Union[str, bytes], source: str = "results.json") -> Results:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ResultsFileError(f"{source}: cannot read results: not JSON ({exc})") from None
    try:
        return msgspec.convert(data, Results)
    except msgspec.ValidationError as exc:
        problem = invalid_member(exc)
        raise ResultsFileError(f"{source}: {problem} (is this a results.json of `ipc-conformance run`?)") from None


def load_results(path: Union[str, Path]) -> Results:
    """One results.json, or the folder (a --report-dir) holding it."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot read results: {exc.strerror or exc}") from None
    return decode_results(text, str(path))
