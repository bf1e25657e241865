"""The lines after a run, in the suite's vocabulary (records.Counts): why checks were not
tested, what failed without failing the run, then the conformance summary, always last."""

from __future__ import annotations

from typing import Sequence

from conformance.records import CheckRecord, Note, Outcome, counts

NOT_REPRODUCED = "listed generated failure not reproduced this run"
#: reasons the not-tested line names; the rest are counted together (results.json has them all)
SHOWN_REASONS = 4


def not_tested_line(records: Sequence[CheckRecord]) -> str:
    """Why checks were not tested, the commonest reasons first ('' when every check was tested)."""
    c = counts(records)
    if not c.skipped:
        return ""
    reasons = list(c.not_tested.items())
    shown = "; ".join(f"{reason}: {n}" for reason, n in reasons[:SHOWN_REASONS])
    rest = sum(n for _, n in reasons[SHOWN_REASONS:])
    if rest:
        shown += f"; {len(reasons) - SHOWN_REASONS} other reasons: {rest}"
    return f"not tested: {c.skipped} ({shown})"


def expected_line(records: Sequence[CheckRecord], strict_flag: str = "--strict") -> str:
    """The line before the summary: the failures that do not fail the run (strict_flag: the
    user's flag that makes Recommended failures fail it)."""
    c = counts(records)
    line = f"listed failures: {c.listed} (they do not fail the run)"
    unreproduced = sum(r.note is Note.NOT_REPRODUCED for r in records)
    if unreproduced:
        line += f", listed generated failures not reproduced: {unreproduced}"
    passing = sum(r.note is Note.LISTED_BUT_PASSED for r in records)
    if passing:
        line += f", listed checks that passed: {passing} (they fail the run: remove their lines or narrow their causes)"
    if c.recommended_failed:
        line += f", recommended checks failed: {c.recommended_failed} (fail the run with {strict_flag})"
    return line


#: listed checks named on the line of those that no longer fail; results.json has them all
SHOWN_IDS = 5


def unreproduced_line(records: Sequence[CheckRecord]) -> str:
    """The listed checks that did not fail this run, by id ('' when every listed check failed):
    those that passed (they fail the run) and the Generated ones whose search met nothing."""
    gone = [r.id for r in records if r.note in (Note.LISTED_BUT_PASSED, Note.NOT_REPRODUCED)]
    if not gone:
        return ""
    more = f" and {len(gone) - SHOWN_IDS} more" if len(gone) > SHOWN_IDS else ""
    return f"listed but not failing this run: {len(gone)} ({', '.join(gone[:SHOWN_IDS])}{more})"


def recommended_lines(records: Sequence[CheckRecord], strict_flag: str = "--strict") -> list[str]:
    """One line per Recommended check that failed: its id and its message's first line."""
    return [f"RECOMMENDED FAILED {r.id} - Recommended check failed (fails with {strict_flag}): "
            + (r.message.strip().splitlines() or [""])[0]
            for r in records if r.outcome is Outcome.RECOMMENDED_FAILED]


def summary_line(records: Sequence[CheckRecord]) -> str:
    """`conformance: P passed, F failed (L listed), R recommended failed, N not tested`: failed
    counts every failure, the listed ones too (they fail no run, but they are failures)."""
    return "conformance: " + counts(records).phrase()


def closing_lines(records: Sequence[CheckRecord], strict_flag: str = "--strict") -> list[str]:
    """What a run prints last: the not-tested line (when checks were not tested), the listed checks
    that did not fail (when there are any), the line of failures that do not fail the run, the
    summary line."""
    return [line for line in (not_tested_line(records), unreproduced_line(records), expected_line(records, strict_flag),
                              summary_line(records)) if line]


ERROR_PREFIX = "conformance: error: "


def error_line(problem: str) -> str:
    """The last line of a run that could not start (a usage error): it never reads as counts."""
    first = (problem.strip().splitlines() or ["the run could not start"])[0]
    return ERROR_PREFIX + first
