"""Reports of a conformance run: JSON records, a Markdown table, an HTML page, a badge.

The table has one row per subject (struct) and one column per check (Area.Name);
a cell shows the outcome for each transport/variant the check ran under.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Optional

SYMBOL = {"passed": "✓", "failed": "✗", "xfailed": "≈", "skipped": "–", "recommended-failed": "!"}
LEGEND = "✓ passed · ✗ failed · ≈ expected failure · ! recommended check failed · – skipped"


def split_id(check_id: str) -> tuple[str, str, str, str]:
    """(subject, 'Area.Name', axes, level) from Level.Area.Subject.Name[.axes...]."""
    level, area, subject, name, *axes = check_id.split(".")
    return subject, f"{area}.{name}", ".".join(axes), level


Cells = dict[tuple[str, str], list[tuple[str, str]]]  # (subject, Area.Name) -> [(axes, outcome)]


def table(records: Iterable[dict[str, Any]]) -> tuple[list[str], list[str], Cells]:
    cells: Cells = defaultdict(list)
    for r in records:
        subject, column, axes, _ = split_id(r["id"])
        cells[subject, column].append((axes, r["outcome"]))
    subjects = sorted({s for s, _ in cells})
    columns = sorted({c for _, c in cells})
    return subjects, columns, cells


def _cell(entries: list[tuple[str, str]]) -> str:
    if all(o == "passed" for _, o in entries):
        return SYMBOL["passed"]
    return " ".join(f"{SYMBOL.get(o, o)}{axes and ' ' + axes}" for axes, o in entries if o != "passed")


OUTCOMES = ("passed", "failed", "xfailed", "recommended-failed", "skipped")


def counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """Checks per outcome. Each outcome is counted once, under its own name: a recommended
    check that failed is never counted as skipped (nor as passed)."""
    out: dict[str, int] = defaultdict(int)
    for r in records:
        out[r["outcome"]] += 1
    return dict(out)


def _versions(meta: dict[str, Any]) -> list[str]:
    """The spec versions line of a report (results of runs before spec versions have none)."""
    if "spec_version" not in meta:
        return []
    newer = meta.get("newer_than_target") or {}
    tail = (f": {sum(newer.values())} checks are newer than the target ("
            + ", ".join(f"{family}: {n}" for family, n in newer.items()) + ")") if newer else ""
    return ["", f"Spec {meta['spec_version']}; the implementation targets spec {meta['target_spec_version']}{tail}."]


def markdown(meta: dict[str, Any], records: list[dict[str, Any]], residue: Optional[dict[str, Any]] = None) -> str:
    subjects, columns, cells = table(records)
    c = counts(records)
    lines = [
        f"# Conformance of {meta['impl']} against {meta['manifest']}",
        "",
        f"{c.get('passed', 0)} passed, {c.get('failed', 0)} failed, {c.get('xfailed', 0)} expected failures, "
        f"{c.get('recommended-failed', 0)} recommended checks failed, {c.get('skipped', 0)} skipped "
        f"(transports: {meta['transport']}).",
        *_versions(meta),
        "",
        LEGEND,
        "",
        "| struct | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for s in subjects:
        lines.append(f"| {s} | " + " | ".join(_cell(cells.get((s, col), [])) if (s, col) in cells else ""
                                               for col in columns) + " |")
    problems = [r for r in records if r["outcome"] in ("failed", "xfailed", "recommended-failed")]
    if problems:
        lines += ["", "## Failures", ""]
        for r in problems:
            first = (r.get("message") or "").strip().splitlines()[:1]
            lines.append(f"- `{r['id']}` ({r['outcome']}): {first[0] if first else ''}"
                         + (f" — {r['reason']}" if r.get("reason") else ""))
    if residue:
        lines += ["", "## Pickle residue", "", "Fields that still travel as PickleWrapper or `Any`:", ""]
        lines += [f"- `{f}`: `{t}`" for f, t in residue.get("fields", [])]
        if residue.get("wrapped"):
            lines += ["", "Objects wrapped in PickleWrapper during this run:", ""]
            lines += [f"- `{name}`: {n}" for name, n in sorted(residue["wrapped"].items())]
    return "\n".join(lines) + "\n"


def html_report(meta: dict[str, Any], records: list[dict[str, Any]],
                residue: Optional[dict[str, Any]] = None) -> str:
    """report.html: the report site's page for one implementation, in one file."""
    from conformance.site import single_run_html

    return single_run_html(meta, records, residue)


def badge(records: list[dict[str, Any]]) -> dict[str, Any]:
    """shields.io endpoint JSON."""
    c = counts(records)
    ran = len(records) - c.get("skipped", 0)
    ok = c.get("passed", 0) + c.get("xfailed", 0)  # a recommended check that failed is not ok
    recommended = c.get("recommended-failed", 0)
    if c.get("failed"):  # any Required failure (or harness error) fails the run: the badge says so
        color = "red"
    else:
        color = "yellowgreen" if recommended else "brightgreen"
    message = f"{ok}/{ran}" + (f", {recommended} recommended failing" if recommended else "")
    return {"schemaVersion": 1, "label": "ipc conformance", "message": message, "color": color}


def results_json(meta: dict[str, Any], records: list[dict[str, Any]],
                 residue: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """results.json: the run's metadata, its count per outcome, the pickle residue, one record per check."""
    c = counts(records)
    if residue:  # wrapped counts sorted: workers of a parallel run report them in any order
        residue = {**residue, "wrapped": dict(sorted(residue.get("wrapped", {}).items()))}
    return {**meta, "counts": {k: c.get(k, 0) for k in OUTCOMES}, **({"residue": residue} if residue else {}),
            "results": records}


def write_all(folder: Path, meta: dict[str, Any], records: list[dict[str, Any]],
              residue: Optional[dict[str, Any]] = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(results_json(meta, records, residue), indent=1))
    # A failure message may quote a str the implementation was sent on purpose (a lone surrogate):
    # the pages show it escaped rather than lose the report.
    for name, text in (("report.md", markdown(meta, records, residue)),
                       ("report.html", html_report(meta, records, residue))):
        (folder / name).write_text(text, encoding="utf-8", errors="backslashreplace")
    (folder / "badge.json").write_text(json.dumps(badge(records)))


def compare(reports: list[dict[str, Any]]) -> str:
    """Markdown: one row per check area, one column per implementation (passed / failing)."""
    areas: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    for rep in reports:
        for r in rep["results"]:
            level, area = r["id"].split(".")[:2]
            areas[f"{level}.{area}"][rep["impl"]][r["outcome"]] += 1
    impls = [rep["impl"] for rep in reports]
    lines = ["| checks | " + " | ".join(impls) + " |", "|---|" + "---|" * len(impls)]

    def cell(c: dict[str, int]) -> str:
        ran = sum(v for k, v in c.items() if k != "skipped")
        bad = ran - c.get("passed", 0)
        return f"{c.get('passed', 0)}/{ran}" + (f" ({bad} failing)" if bad else "") if ran else "–"

    for area in sorted(areas):
        lines.append(f"| {area} | " + " | ".join(cell(areas[area].get(i, {})) for i in impls) + " |")
    totals = [counts(rep["results"]) for rep in reports]
    lines.append("| **all** | " + " | ".join(cell(t) for t in totals) + " |")
    return "\n".join(lines) + "\n"
