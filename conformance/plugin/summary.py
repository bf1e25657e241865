"""The two lines after a run: what failed without failing it, then the conformance summary."""

from __future__ import annotations

from typing import Sequence

from conformance.records import CheckRecord, Note, Outcome, counts

NOT_REPRODUCED = "listed generated failure not reproduced this run"


def expected_line(records: Sequence[CheckRecord], strict_flag: str = "--strict") -> str:
    """The line before the summary: what failed without failing the run (strict_flag: the
    user's flag that makes them fail it)."""
    c = counts(records)
    line = f"expected failures: {c.xfailed}"
    unreproduced = sum(r.note is Note.NOT_REPRODUCED for r in records)
    if unreproduced:
        line += f", listed generated failures not reproduced: {unreproduced}"
    if c.recommended_failed:
        line += f", recommended checks failed: {c.recommended_failed} (fail the run with {strict_flag})"
    return line


def recommended_lines(records: Sequence[CheckRecord], strict_flag: str = "--strict") -> list[str]:
    """One line per Recommended check that failed: its id and its message's first line."""
    return [f"RECOMMENDED FAILED {r.id} - Recommended check failed (fails with {strict_flag}): "
            + (r.message.strip().splitlines() or [""])[0]
            for r in records if r.outcome is Outcome.RECOMMENDED_FAILED]


def summary_line(records: Sequence[CheckRecord]) -> str:
    """passed / failed / skipped: expected failures and recommended checks that failed are none
    of these (the line before counts them)."""
    c = counts(records)
    return f"conformance: {c.passed} passed, {c.failed} failed, {c.skipped} skipped"
