"""What the site shows, read from the results.json files of conformance runs.

A check id reads Level.Area.Subject.Name[.axes...]; the site groups records by (level, area)
for the overview and the matrices, and by (level, area, name) for the per-check pages, reading
each part from the record (CheckRecord.check), since a part may hold dots.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import msgspec

from conformance import records as results_file
from conformance.records import PROBLEMS, CheckIdentity, CheckRecord, Outcome
from conformance.requirements import Proven, index

LEVELS = ("Required", "Recommended")


@dataclass(frozen=True)
class Record:
    """One check of a run, with its parts (level, area, subject, name, axes) as the run recorded
    them (CheckRecord.check), never split off its id; a results.json of an older suite, which has
    no parts, is read off the id."""

    id: str
    outcome: Outcome
    message: str = ""
    reason: str = ""
    check: Optional[CheckIdentity] = None

    @classmethod
    def of(cls, check: CheckRecord) -> "Record":
        return cls(id=check.id, outcome=check.outcome, message=check.message, reason=check.reason,
                   check=check.identity)

    @property
    def identity(self) -> CheckIdentity:
        return self.check if self.check is not None else CheckIdentity.parsed(self.id)

    @property
    def level(self) -> str:
        return self.identity.level

    @property
    def area(self) -> str:
        return self.identity.area

    @property
    def subject(self) -> str:
        return self.identity.subject

    @property
    def name(self) -> str:
        return self.identity.name

    @property
    def axes(self) -> str:
        return ".".join(value for _, value in self.identity.axes)

    @property
    def instance(self) -> str:
        """The check id less level, area and name: what tells two runs of one check apart."""
        return ".".join(p for p in (self.subject, self.axes) if p)

    @property
    def check_key(self) -> tuple[str, str, str]:
        return self.level, self.area, self.name

    @property
    def first_line(self) -> str:
        """What groups failures: the first line of the message (a defect names itself there)."""
        lines = self.message.strip().splitlines()
        return lines[0].strip() if lines else ""

    def first_lines(self, n: int = 4) -> str:
        return "\n".join(self.message.strip().splitlines()[:n])

    @property
    def longer_than_first_lines(self) -> bool:
        return len(self.message.strip().splitlines()) > 4


class Counts(results_file.Counts):
    """The checks per outcome (conformance.records.counts), as the site colours and lists them."""

    @property
    def state(self) -> str:
        """The cell's colour, as the badge's: fail (a Required failure, listed or not), warn
        (Recommended failures only), pass, skip (nothing tested), none."""
        if self.failed or self.required_failed:
            return "fail"
        if self.xfailed or self.recommended_failed:
            return "warn"
        if self.passed:
            return "pass"
        return "skip" if self.skipped else "none"

    def parts(self) -> list[tuple[str, str, int, str]]:
        """(state, symbol, count, word) of each non-zero outcome, in reading order."""
        out = [(STATE[o], o.symbol, self[o], word) for o, word in (
            (Outcome.PASSED, "passed"), (Outcome.FAILED, "failed"),
            (Outcome.RECOMMENDED_FAILED, "recommended failed"),
            (Outcome.XFAILED, "failed (listed)"), (Outcome.SKIPPED, "not tested"))]
        return [p for p in out if p[2]]


@dataclass
class FailureGroup:
    """Records of one area, with one outcome, whose messages start with the same line."""

    outcome: Outcome
    first_line: str
    records: list[Record]

    @property
    def first(self) -> Record:
        return self.records[0]

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.records]

    @property
    def reasons(self) -> list[str]:
        return list(dict.fromkeys(r.reason for r in self.records if r.reason))


def group(records: Iterable[Record], outcomes: tuple[Outcome, ...] = PROBLEMS) -> list[FailureGroup]:
    """Records with these outcomes grouped by (outcome, first line): worst outcome first, then the
    biggest group, then by the first check id."""
    rank = {o: i for i, o in enumerate(outcomes)}
    found: dict[tuple[Outcome, str], list[Record]] = defaultdict(list)
    for r in sorted((r for r in records if r.outcome in rank), key=lambda r: r.id):
        found[r.outcome, r.first_line].append(r)
    groups = [FailureGroup(outcome, line, recs) for (outcome, line), recs in found.items()]
    return sorted(groups, key=lambda g: (rank[g.outcome], -len(g.records), g.first.id))


#: The colour (CSS class) of a cell or chip for each outcome.
STATE = {Outcome.PASSED: "pass", Outcome.FAILED: "fail", Outcome.XFAILED: "warn", Outcome.RECOMMENDED_FAILED: "warn",
         Outcome.SKIPPED: "skip"}
# (a listed Required failure is one ≈ among the chips, and its cell or badge is red all the same:
# Counts.state and badge.colour read the level)


def count(records: Iterable[Record]) -> Counts:
    return results_file.counts(records, Counts)


def slugify(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


@dataclass
class Run:
    """One conformance run: its metadata and one record per check."""

    source: Path
    impl: str
    manifest: str
    transport: str
    records: list[Record]
    meta: dict[str, Any] = field(default_factory=dict)
    slug: str = ""
    title: str = ""
    _by_area: Optional[dict[tuple[str, str], list[Record]]] = field(default=None, repr=False)

    # Metadata that newer results.json files carry; older ones show a dash.
    @property
    def impl_version(self) -> str:
        return str(self.meta.get("impl_version") or "")

    @property
    def suite_version(self) -> str:
        return str(self.meta.get("suite_version") or "")

    @property
    def date(self) -> str:
        return str(self.meta.get("date") or "")

    @property
    def impl_spec(self) -> str:
        return str(self.meta.get("impl_spec") or "")

    @property
    def transports(self) -> list[str]:
        listed = self.meta.get("transports")
        if listed:
            return [str(t) for t in listed]
        return ["pickle", "msgpack"] if self.transport == "both" else [self.transport]

    @property
    def residue(self) -> Optional[dict[str, Any]]:
        return self.meta.get("residue")

    @property
    def counts(self) -> Counts:
        return count(self.records)

    def by_area(self) -> dict[tuple[str, str], list[Record]]:
        if self._by_area is None:
            out: dict[tuple[str, str], list[Record]] = defaultdict(list)
            for r in self.records:
                out[r.level, r.area].append(r)
            self._by_area = dict(out)
        return self._by_area

    def groups(self, outcomes: tuple[Outcome, ...] = PROBLEMS) -> dict[tuple[str, str], list[FailureGroup]]:
        """The problems of each area (Required areas first) grouped by their message's first line."""
        return problem_groups(self.records, outcomes)

    def anchor(self, key: tuple[str, str]) -> str:
        """Where a link about one area of this run lands: its failures, else its expected failures, else its matrix."""
        c = count(self.by_area().get(key, []))
        place = "area" if c.failed or c.recommended_failed else "expected" if c.xfailed else "matrix"
        return f"{place}-{key[0]}-{key[1]}"

    def reproducer(self, *records: Record) -> str:
        """A command that runs these checks again."""
        impl = self.impl_spec or "IMPL"
        words = ["ipc-conformance", "run", "--impl", _quote(impl), "--manifest", _quote(self.manifest)]
        if self.transport != "both":
            words += ["--transport", self.transport]
        if any(r.area == "E2E" for r in records):
            words.append("--e2e")
        words += ["--", "-k", _quote(" or ".join(r.id for r in records))]
        return " ".join(words)


def _quote(word: str) -> str:
    return word if re.fullmatch(r"[A-Za-z0-9_.:/=@+-]+", word) else "'" + word.replace("'", "'\\''") + "'"


def run_of(results: results_file.Results, source: Path) -> Run:
    """A run of the site from a results.json's struct."""
    # Every member but the records and their counts (converted alone: a run has thousands of records).
    meta = {name: msgspec.to_builtins(value) for name in results.__struct_fields__
            if name not in ("results", "counts") and (value := getattr(results, name)) is not None}
    return Run(source=source, impl=results.impl, manifest=results.manifest or "?",
               transport=results.transport or "both", records=[Record.of(r) for r in results.results], meta=meta)


def load(path: Path) -> Run:
    """One results.json (as `ipc-conformance run --report-dir` writes it), or the folder holding it;
    ResultsFileError (one line naming the file and the field) when it is not one."""
    path = Path(path)
    return run_of(results_file.load_results(path), path / "results.json" if path.is_dir() else path)


def load_all(paths: Iterable[Path]) -> list[Run]:
    """Runs in the order given, each with a unique slug and a title that tells it from the others."""
    runs = [load(Path(p)) for p in paths]
    if not runs:
        raise results_file.ResultsFileError("no results.json given")
    seen: dict[str, int] = defaultdict(int)
    for run in runs:
        run.title = run.impl
        twins = [r for r in runs if r.impl == run.impl]
        if len(twins) > 1:  # one label twice: tell the runs apart by their --impl, else by folder
            specs = [r.impl_spec for r in twins]
            by_spec = run.impl_spec and specs.count(run.impl_spec) == 1
            run.title = f"{run.impl} ({run.impl_spec if by_spec else run.source.resolve().parent.name})"
        base = slugify(run.title)
        seen[base] += 1
        run.slug = base if seen[base] == 1 else f"{base}-{seen[base]}"
    return runs


def _level_rank(level: str) -> int:
    return LEVELS.index(level) if level in LEVELS else len(LEVELS)


def sort_areas(keys: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """(level, area) keys, Required first, areas alphabetical."""
    return sorted(set(keys), key=lambda k: (_level_rank(k[0]), k[0], k[1]))


def area_keys(runs: list[Run]) -> list[tuple[str, str]]:
    """(level, area) of every run, Required first, areas alphabetical."""
    return sort_areas(k for run in runs for k in run.by_area())


def problem_groups(records: Iterable[Record], outcomes: tuple[Outcome, ...] = PROBLEMS
                   ) -> dict[tuple[str, str], list[FailureGroup]]:
    """Records with these outcomes by (level, area), Required areas first, each area's grouped by
    (outcome, first line)."""
    by_area: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        if r.outcome in outcomes:
            by_area[r.level, r.area].append(r)
    return {key: group(by_area[key], outcomes) for key in sort_areas(by_area)}


def check_page(key: tuple[str, str, str]) -> str:
    """File name of a check's page under checks/."""
    return slugify(".".join(key)) + ".html"


@dataclass
class CheckView:
    """One check (Level.Area.Name) across the runs: counts per run, and its instances where runs differ."""

    key: tuple[str, str, str]
    counts: dict[str, Counts]  # run slug -> counts
    rows: list[tuple[str, dict[str, Optional[Record]]]]  # (instance, run slug -> record) for instances to show
    proves: list[Proven] = field(default_factory=list)  # the requirements it tests (spec/clauses.md, SPEC §15)

    @property
    def label(self) -> str:
        return ".".join(self.key)

    @property
    def page(self) -> str:
        return check_page(self.key)

    def failing_runs(self) -> list[str]:
        """The runs in which the check failed: listed failures are failures too."""
        return [slug for slug, c in self.counts.items() if c.failed or c.xfailed or c.recommended_failed]

    @property
    def state(self) -> str:
        states = {c.state for c in self.counts.values()}
        for s in ("fail", "warn", "pass", "skip"):
            if s in states:
                return s
        return "none"


def checks(runs: list[Run]) -> list[CheckView]:
    """Every check across the runs; an instance is listed when it is a problem anywhere or runs disagree."""
    grouped: dict[tuple[str, str, str], dict[str, dict[str, Record]]] = defaultdict(lambda: defaultdict(dict))
    for run in runs:
        for r in run.records:
            grouped[r.check_key][r.instance][run.slug] = r
    views = []
    for key in sorted(grouped, key=lambda k: (_level_rank(k[0]), k)):  # Required checks first
        instances = grouped[key]
        counts = {run.slug: count(instances[i][run.slug] for i in instances if run.slug in instances[i])
                  for run in runs}
        rows = []
        for instance in sorted(instances):
            cells = {run.slug: instances[instance].get(run.slug) for run in runs}
            outcomes: set[Optional[Outcome]] = {c.outcome if c else None for c in cells.values()}
            if outcomes & set(PROBLEMS) or len(outcomes) > 1:
                rows.append((instance, cells))
        ids = {r.id for cells in instances.values() for r in cells.values()}
        views.append(CheckView(key=key, counts=counts, rows=rows, proves=index().proves(sorted(ids))))
    return views


@dataclass
class Matrix:
    """One area of one run as a struct x check table; a cell holds every axis the check ran under."""

    subjects: list[str]
    names: list[str]
    cells: dict[tuple[str, str], list[Record]]

    def cell(self, subject: str, name: str) -> list[Record]:
        return self.cells.get((subject, name), [])


def matrix(records: list[Record]) -> Matrix:
    cells: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        cells[r.subject, r.name].append(r)
    return Matrix(subjects=sorted({s for s, _ in cells}), names=sorted({n for _, n in cells}), cells=dict(cells))
