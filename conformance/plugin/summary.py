"""The two lines after a run: what failed without failing it, then the conformance summary."""

from __future__ import annotations

from typing import Any

NOT_REPRODUCED = "listed generated failure not reproduced this run"


def expected_line(records: list[dict[str, Any]], strict_flag: str = "--strict") -> str:
    """The line before the summary: what failed without failing the run (strict_flag: the
    user's flag that makes them fail it)."""
    line = f"expected failures: {sum(r['outcome'] == 'xfailed' for r in records)}"
    unreproduced = sum(r["message"] == NOT_REPRODUCED for r in records)
    if unreproduced:
        line += f", listed generated failures not reproduced: {unreproduced}"
    recommended = sum(r["outcome"] == "recommended-failed" for r in records)
    if recommended:
        line += f", recommended checks failed: {recommended} (fail the run with {strict_flag})"
    return line


def counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """passed / failed / skipped as the summary line counts them: expected failures and
    recommended checks that failed are none of these (the line before counts them)."""
    return {k: sum(r["outcome"] == k for r in records) for k in ("passed", "failed", "skipped")}


def summary_line(records: list[dict[str, Any]]) -> str:
    c = counts(records)
    return f"conformance: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"
