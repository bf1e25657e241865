"""Pages of the site from the model, through the Jinja2 templates beside this module."""

from __future__ import annotations

import datetime
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

import jinja2

from conformance import __version__
from conformance.records import LEGEND, CheckRecord, Outcome
from conformance.requirements import Proven, index
from conformance.site import badge
from conformance.site.model import (
    LEVELS,
    STATE,
    CheckView,
    FailureGroup,
    Record,
    Run,
    area_keys,
    check_page,
    checks,
    count,
    load_all,
    matrix,
)

HERE = Path(__file__).resolve().parent
CSS = HERE / "style.css"


@dataclass
class CellItem:
    symbol: str
    text: str  # the axes the check ran under, or a count
    state: str
    href: Optional[str]  # to the failure's message, for a problem
    title: str


def matrix_cell(records: list[Record], fail_href: str = "") -> tuple[str, list[CellItem]]:
    """A matrix cell: one tick when every axis passed, else one item per axis that did not."""
    if not records:
        return "none", []
    c = count(records)
    if c.passed == len(records):
        axes = ", ".join(r.axes for r in records if r.axes)
        return "pass", [CellItem("✓", "", "pass", None, f"passed{': ' + axes if axes else ''}")]
    items = [CellItem(r.outcome.symbol, r.axes, STATE[r.outcome],
                      f"{fail_href}#f-{r.id}" if r.outcome.problem else None, f"{r.axes or r.id}: {r.outcome.word}")
             for r in records if r.outcome != Outcome.PASSED]
    if c.passed:
        items.insert(0, CellItem("✓", str(c.passed), "pass", None, f"{c.passed} passed"))
    return c.state, items


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.globals.update(STATE=STATE, LEVELS=LEVELS, LEGEND=LEGEND, matrix_cell=matrix_cell,
                       count=count, matrix=matrix)
    return env


def _verdict(view: CheckView, runs: list[Run]) -> str:
    """What a check came to across the runs. It 'passes' only where no instance failed, listed or
    not; a run whose failures of it are all listed is named with '(listed)'."""
    ran = [r for r in runs if view.counts[r.slug].ran]
    failing = [r for r in runs if r.slug in view.failing_runs()]
    if not failing:
        return "passes everywhere it ran" if ran else "was not tested"

    def name(run: Run) -> str:
        c = view.counts[run.slug]
        return run.title + (" (listed)" if c.xfailed and not c.failed and not c.recommended_failed else "")

    if len(failing) == len(ran) and len(ran) > 1:
        return f"fails in all {len(ran)} implementations: " + ", ".join(name(r) for r in failing)
    return f"fails in {len(failing)} of {len(ran)}: " + ", ".join(name(r) for r in failing)


def _residue(run: Run) -> Optional[dict[str, Any]]:
    residue = run.residue
    if not isinstance(residue, dict):
        return None
    return {"fields": [tuple(f) for f in residue.get("fields", [])],
            "wrapped": sorted((residue.get("wrapped") or {}).items())}


def _common(runs: list[Run]) -> dict[str, Any]:
    return {"suite_version": __version__,
            "built": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def implementation_page(env: jinja2.Environment, run: Run, *, root: str, standalone: bool,
                        inline_css: str = "", common: Optional[dict[str, Any]] = None) -> str:
    by_area = run.by_area()
    keys = area_keys([run])
    failures = run.groups((Outcome.FAILED, Outcome.RECOMMENDED_FAILED))
    expected = run.groups((Outcome.XFAILED,))
    return env.get_template("implementation.html").render(
        run=run, root=root, standalone=standalone, inline_css=inline_css, areas=keys, by_area=by_area,
        failures=failures, expected=expected,
        residue=_residue(run), badge_svg=badge.svg(run.records),
        check_page=lambda r: check_page(r.check_key), proves=_proves,
        **(common or _common([run])))


def _proves(g: FailureGroup) -> list[Proven]:
    """The requirements a group of failures breaks: those its checks test."""
    return index().proves(g.ids)


def single_run_html(meta: dict[str, Any], records: list[CheckRecord],
                    residue: Optional[dict[str, Any]] = None) -> str:
    """report.html of one run: the site's page for one implementation, in one file (style inlined)."""
    run = Run(source=Path("results.json"), impl=str(meta.get("impl", "?")), manifest=str(meta.get("manifest", "?")),
              transport=str(meta.get("transport", "both")),
              records=[Record.of(r) for r in records],
              meta={**meta, **({"residue": residue} if residue else {})}, slug="run", title=str(meta.get("impl", "?")))
    return implementation_page(environment(), run, root="", standalone=True, inline_css=CSS.read_text())


@dataclass
class RequirementView:
    """One requirement of spec/SPEC.md on the requirements page: its text, its clauses, the checks
    of these runs that test it."""

    proven: Proven             # the requirement and all its clauses
    views: list[CheckView]     # checks of these runs that test it


def _requirements(views: list[CheckView]) -> list[RequirementView]:
    idx = index()
    tested: dict[str, list[CheckView]] = {}
    for view in views:
        for p in view.proves:
            tested.setdefault(p.requirement.id, []).append(view)
    return [RequirementView(Proven(r, tuple(idx.checks_of(r.id))), tested.get(r.id, []))
            for r in idx.requirements.values()]


def _write(path: Path, text: str) -> None:
    """UTF-8; a failure message quoting a lone surrogate (sent on purpose) is escaped, never a lost page."""
    path.write_text(text, encoding="utf-8", errors="backslashreplace")


def build_site(results: Iterable[Path], out: Path) -> Path:
    """Write the site for these results.json files into `out`; returns its index.html."""
    runs = load_all(results)
    env = environment()
    common = _common(runs)
    out.mkdir(parents=True, exist_ok=True)
    for sub in ("impl", "checks", "badges"):
        (out / sub).mkdir(exist_ok=True)
    shutil.copyfile(CSS, out / "style.css")
    views = checks(runs)
    verdicts = {v.key: _verdict(v, runs) for v in views}
    for run in runs:
        _write(out / "badges" / f"{run.slug}.svg", badge.svg(run.records))
        _write(out / "badges" / f"{run.slug}.json", json.dumps(badge.endpoint(run.records)))
        _write(out / "impl" / f"{run.slug}.html",
               implementation_page(env, run, root="../", standalone=False, common=common))
    for view in views:
        _write(out / "checks" / view.page, env.get_template("check.html").render(
            view=view, runs=runs, verdict=verdicts[view.key], root="../", standalone=False, inline_css="",
            **common))
    _write(out / "checks.html", env.get_template("checks.html").render(
        views=views, runs=runs, verdicts=verdicts, root="", standalone=False, inline_css="", **common))
    _write(out / "requirements.html", env.get_template("requirements.html").render(
        requirements=_requirements(views), root="", standalone=False, inline_css="", **common))
    areas = area_keys(runs)
    differs = {key for key in areas if len({count(run.by_area().get(key, [])).state for run in runs}) > 1}
    home = out / "index.html"
    _write(home, env.get_template("overview.html").render(
        runs=runs, areas=areas, differs=differs, by_area={run.slug: run.by_area() for run in runs},
        root="", standalone=False, inline_css="", **common))
    return home
