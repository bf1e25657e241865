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
from pathlib import Path
from typing import Annotated, Iterable, Optional, Protocol, TypeVar, Union, overload

import msgspec

from conformance.errors import UsageError, invalid_member


def _doc(text: str) -> msgspec.Meta:
    """A member's description in the published JSON Schema."""
    return msgspec.Meta(description=text)

__all__ = ["CheckRecord", "Counts", "Note", "Outcome", "Residue", "Results", "ResultsFileError", "counts",
           "decode_results", "encode_results", "load_results"]


class Outcome(str, enum.Enum):
    """What a check came to, after the expected-failure list and its level (its JSON spelling is the value)."""

    PASSED = "passed"
    FAILED = "failed"  # a Required check (or a harness error, or a Recommended one under --strict)
    XFAILED = "xfailed"  # failed as the expected-failure list says
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
_WORD = {Outcome.PASSED: "passed", Outcome.FAILED: "failed", Outcome.XFAILED: "expected failure",
         Outcome.RECOMMENDED_FAILED: "recommended check failed", Outcome.SKIPPED: "skipped"}
#: outcomes whose message a reader should see, worst first
PROBLEMS = (Outcome.FAILED, Outcome.RECOMMENDED_FAILED, Outcome.XFAILED)
LEGEND = "✓ passed · ✗ failed · ≈ expected failure · ! recommended check failed · – skipped"


class Note(str, enum.Enum):
    """What the verdict adds to a record beside its outcome (typed, so no one reads it from the message)."""

    LISTED_BUT_PASSED = "listed-but-passed"  # failed: the expected-failure list names it, yet it passed
    NOT_REPRODUCED = "not-reproduced"  # a listed Generated check met no counterexample this run
    HARNESS_ERROR = "harness-error"  # failed: the testee crashed, hung or broke the protocol


class CheckRecord(msgspec.Struct, omit_defaults=True, frozen=True):
    """One check of a run."""

    id: Annotated[str, _doc("the check id, Level.Area.Subject.Name[.axes...]")]
    outcome: Outcome
    message: Annotated[str, _doc("the failure's message ('' when it passed); expected-failure lists match line 1")]
    reason: Annotated[str, _doc("an expected failure: why the expected-failure list expects it")] = ""
    note: Optional[Note] = None


class Counts(msgspec.Struct):
    """Checks per outcome, each check counted once, under its own outcome."""

    passed: int = 0
    failed: int = 0
    xfailed: int = 0
    recommended_failed: int = msgspec.field(default=0, name="recommended-failed")
    skipped: int = 0

    def __getitem__(self, outcome: Union[Outcome, str]) -> int:
        return int(getattr(self, Outcome(outcome).name.lower()))

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.xfailed + self.recommended_failed + self.skipped


class HasOutcome(Protocol):
    """A record of one check, as any reader of results holds it."""

    @property
    def outcome(self) -> Outcome: ...


C = TypeVar("C", bound=Counts)


@overload
def counts(records: Iterable[HasOutcome]) -> Counts: ...
@overload
def counts(records: Iterable[HasOutcome], into: type[C]) -> C: ...


def counts(records: Iterable[HasOutcome], into: type[Counts] = Counts) -> Counts:
    """Checks per outcome (the one count: summary line, reports, site, badge and results.json use it);
    `into` a subclass that shows them (the site's)."""
    out = {o: 0 for o in Outcome}
    for r in records:
        out[r.outcome] += 1
    return into(**{o.name.lower(): n for o, n in out.items()})


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
