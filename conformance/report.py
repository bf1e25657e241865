"""Reports of a conformance run: JSON records, a Markdown summary, an HTML page, a badge.

report.md reads in any Markdown viewer: the counts per area in one short table, then the
failures grouped by the first line of their message (Required areas first). report.html and the
badge are the report site's (conformance.site); the site never imports this module.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Optional

from conformance.records import CheckRecord, Counts, Outcome, Residue, Results, counts, encode_results
from conformance.site import single_run_html
from conformance.site.badge import endpoint
from conformance.site.model import Record, count, problem_groups, sort_areas

__all__ = ["badge", "compare", "counts", "html_report", "markdown", "results_json", "write_all"]


def _versions(meta: dict[str, Any]) -> list[str]:
    """The spec versions line of a report (results of runs before spec versions have none)."""
    if "spec_version" not in meta:
        return []
    newer = meta.get("newer_than_target") or {}
    tail = (f": {sum(newer.values())} checks are newer than the target ("
            + ", ".join(f"{family}: {n}" for family, n in newer.items()) + ")") if newer else ""
    return ["", f"Spec {meta['spec_version']}; the implementation targets spec {meta['target_spec_version']}{tail}."]


#: report.md's columns per area: (outcome, heading).
_COLUMNS = ((Outcome.PASSED, "✓ passed"), (Outcome.FAILED, "✗ failed"),
            (Outcome.XFAILED, "≈ listed"), (Outcome.RECOMMENDED_FAILED, "! recommended failed"),
            (Outcome.SKIPPED, "– not tested"))
#: Check ids shown per group of failures; results.json and report.html have them all.
SHOWN_IDS = 20


def _code(text: str) -> str:
    """Text as a Markdown code span, whatever backticks it holds."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}" if text else "(no message)"


def _area_table(records: list[Record]) -> list[str]:
    by_area: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        by_area[r.level, r.area].append(r)
    lines = ["| area | " + " | ".join(h for _, h in _COLUMNS) + " |", "|---|" + "--:|" * len(_COLUMNS)]

    def row(name: str, recs: list[Record]) -> str:
        c = count(recs)
        cells = [c[o] for o, _ in _COLUMNS]
        return f"| {name} | " + " | ".join(str(n) if n else "" for n in cells) + " |"

    lines += [row(f"{level}.{area}", by_area[level, area]) for level, area in sort_areas(by_area)]
    lines.append(row("**all**", records))
    return lines



def _groups(title: str, records: list[Record], outcomes: tuple[Outcome, ...], note: str) -> list[str]:
    """A section of grouped failures: per area (Required first) each group's count, outcome, first
    line, reasons and check ids."""
    by_area = problem_groups(records, outcomes)
    if not by_area:
        return []
    total = sum(len(g.records) for gs in by_area.values() for g in gs)
    n_groups = sum(len(gs) for gs in by_area.values())
    lines = ["", f"## {title} ({total} in {n_groups} group{'s' if n_groups != 1 else ''})", "", note]
    for (level, area), groups in by_area.items():
        lines += ["", f"### {level}.{area} ({sum(len(g.records) for g in groups)})", ""]
        for g in groups:
            lines.append(f"- **{len(g.records)} ×** {g.outcome.word}: {_code(g.first_line)}")
            lines += [f"  - listed because: {reason}" for reason in g.reasons]
            more = len(g.ids) - SHOWN_IDS
            lines.append("  - " + ", ".join(f"`{i}`" for i in g.ids[:SHOWN_IDS])
                         + (f" and {more} more (report.html, results.json)" if more > 0 else ""))
    return lines


def markdown(meta: dict[str, Any], records: list[CheckRecord], residue: Optional[dict[str, Any]] = None) -> str:
    """report.md: the run's counts, a table per area, then the failures grouped by first line."""
    recs = [Record.of(r) for r in records]
    c = counts(records)
    lines = [
        f"# Conformance of {meta['impl']} against {meta['manifest']}",
        "",
        f"{c.phrase()} (transports: {meta['transport']}).",
        *_versions(meta),
        *(["", "Not tested: " + "; ".join(f"{reason}: {n}" for reason, n in c.not_tested.items()) + "."]
          if c.not_tested else []),
        "",
        "## Per area",
        "",
        *_area_table(recs),
    ]
    lines += _groups("Failures", recs, (Outcome.FAILED, Outcome.RECOMMENDED_FAILED),
                     "Required areas first; in each, the failures whose messages start with the same line are one "
                     "group, the biggest first. report.html has the whole messages and a command to run each again.")
    lines += _groups("Listed failures", recs, (Outcome.XFAILED,),
                     "Listed in the implementation's expectations file, with their reasons: they do not fail the run, "
                     "and they are failures in every figure.")
    if residue:
        lines += ["", "## Pickle residue", "", "Fields that still travel as PickleWrapper or `Any`:", ""]
        lines += [f"- `{f}`: `{t}`" for f, t in residue.get("fields", [])]
        if residue.get("wrapped"):
            lines += ["", "Objects wrapped in PickleWrapper during this run:", ""]
            lines += [f"- `{name}`: {n}" for name, n in sorted(residue["wrapped"].items())]
    return "\n".join(lines) + "\n"


def html_report(meta: dict[str, Any], records: list[CheckRecord],
                residue: Optional[dict[str, Any]] = None) -> str:
    """report.html: the report site's page for one implementation, in one file."""
    return single_run_html(meta, records, residue)


def badge(records: list[CheckRecord]) -> dict[str, Any]:
    """badge.json, a shields.io endpoint: red on any Required failure, listed or not; orange on
    Recommended ones only; grey when nothing was tested."""
    return endpoint(records)


def results_json(meta: dict[str, Any], records: list[CheckRecord],
                 residue: Optional[dict[str, Any]] = None) -> Results:
    """results.json: the run's metadata, its count per outcome, the pickle residue, one record per check."""
    kept = None
    if residue:  # wrapped counts sorted: workers of a parallel run report them in any order
        kept = Residue(fields=[(str(f), str(t)) for f, t in residue.get("fields", [])],
                       wrapped=dict(sorted(residue.get("wrapped", {}).items())))
    known = {k: v for k, v in meta.items() if k in Results.__struct_fields__}
    return Results(**known, counts=counts(records), residue=kept, results=list(records))


def write_all(folder: Path, meta: dict[str, Any], records: list[CheckRecord],
              residue: Optional[dict[str, Any]] = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(encode_results(results_json(meta, records, residue)))
    # A failure message may quote a str the implementation was sent on purpose (a lone surrogate):
    # the pages show it escaped rather than lose the report.
    for name, text in (("report.md", markdown(meta, records, residue)),
                       ("report.html", html_report(meta, records, residue))):
        (folder / name).write_text(text, encoding="utf-8", errors="backslashreplace")
    (folder / "badge.json").write_text(json.dumps(badge(records)))


def compare(reports: list[Results]) -> str:
    """Markdown: one row per check area, one column per implementation, each cell the counts as the
    badge says them (records.Counts.brief: listed failures are failures), then each run's counts."""
    areas: dict[str, dict[int, list[CheckRecord]]] = defaultdict(lambda: defaultdict(list))
    for n, rep in enumerate(reports):
        for r in rep.results:
            areas[f"{r.identity.level}.{r.identity.area}"][n].append(r)
    impls = [rep.impl for rep in reports]
    lines = ["| checks | " + " | ".join(impls) + " |", "|---|" + "---|" * len(impls)]

    def cell(c: Counts) -> str:
        return c.brief() if c.total else "–"

    for area in sorted(areas):
        lines.append(f"| {area} | " + " | ".join(cell(counts(areas[area].get(n, []))) for n in range(len(reports)))
                     + " |")
    totals = [counts(rep.results) for rep in reports]
    lines.append("| **all** | " + " | ".join(f"**{cell(t)}**" for t in totals) + " |")
    lines.append("")
    lines += [f"- {impl}: {t.phrase()}" for impl, t in zip(impls, totals)]
    return "\n".join(lines) + "\n"
