"""The requirement table: every MUST of spec/SPEC.md, the Required checks that test it, and
the planted violations that make those checks fail (docs/requirements.md).

``prove()`` collects the suite's checks (reference, E2E included), runs each planted
violation against exactly the checks it must fail (several per worker process, 2 workers)
and the reference against the same checks (they must pass there), and decides per
requirement: proven when every pattern names a collected Required check and at least one
violation fails checks that match the requirement's patterns.
"""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from dataclasses import dataclass
from typing import Mapping, Sequence

from conformance.paths import data_root
from reference_tools.proof.requirement_map import EXEMPT, REQUIREMENTS, VIOLATIONS, Violation
from reference_tools.proof.runs import FAILING, Job, run_batches
from reference_tools.proof.spec_requirements import Requirement, parse

REQUIREMENTS_DOC = data_root() / "docs" / "requirements.md"


@dataclass(frozen=True)
class Row:
    requirement: Requirement
    checks: tuple[str, ...]                 # check-id patterns
    unmatched: tuple[str, ...]              # patterns that name no collected Required check
    violations: tuple[str, ...]
    caught_by: Mapping[str, tuple[str, ...]]  # violation -> failing checks matching the patterns
    exempt: str = ""

    @property
    def proven(self) -> bool:
        return not self.exempt and bool(self.checks) and not self.unmatched and any(self.caught_by.values())


def collected_checks() -> list[str]:
    """Every check id of the reference run, E2E included (collection only)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", str(data_root() / "conformance" / "suite"), "--collect-only",
                           "-q", "-p", "no:cacheprovider", "--ipc-e2e", "--rootdir", str(data_root() / "conformance")],
                          capture_output=True, text=True, cwd=str(data_root()), timeout=600)
    ids = [line.rpartition("[")[2].rstrip("]") for line in proc.stdout.splitlines() if line.endswith("]")]
    return [i for i in ids if i.startswith(("Required.", "Recommended."))]


def matches(check_id: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(check_id, p) for p in patterns)


def _jobs(violation: Violation) -> Job:
    return Job(violation.impl, " or ".join(violation.must_fail), violation.transport, violation.e2e)


def run_violations(names: Sequence[str], workers: int = 2) -> dict[str, dict[str, str]]:
    """violation -> {check id: outcome}; plus "reference" -> outcomes of every selected check
    on the reference (they must pass there: the failures are the violations')."""
    todo = [VIOLATIONS[n] for n in names]
    batches: list[list[tuple[str, Job]]] = [[] for _ in range(workers)]
    # E2E violations take the longest: each gets the lightest batch first.
    for v in sorted(todo, key=lambda v: not v.e2e):
        min(batches, key=lambda b: sum(30 if j.e2e else 1 for _, j in b)).append((v.name, _jobs(v)))
    plain = sorted({c for v in todo if not v.e2e for c in v.must_fail})
    e2e = sorted({c for v in todo if v.e2e for c in v.must_fail})
    min(batches, key=len).append(("reference", Job("reference", " or ".join(plain))))
    if e2e:
        min(batches, key=len).append(("reference-e2e", Job("reference", " or ".join(e2e), "msgpack", True)))
    outcomes = run_batches([[j for _, j in b] for b in batches if b], workers=workers)
    found: dict[str, dict[str, str]] = {}
    for batch, result in zip([b for b in batches if b], outcomes):
        for (name, _), outcome in zip(batch, result):
            found[name] = outcome
    found["reference"] = {**found.pop("reference", {}), **found.pop("reference-e2e", {})}
    return found


def prove(run: bool = True) -> list[Row]:
    collected = [c for c in collected_checks() if c.startswith("Required.")]
    outcomes = run_violations(sorted({v for entry in REQUIREMENTS.values() for v in entry.violations})) if run else {}
    reference = outcomes.get("reference", {})
    rows = []
    for req in parse():
        entry = REQUIREMENTS.get(req.id)
        checks = entry.checks if entry else ()
        names = entry.violations if entry else ()
        caught: dict[str, tuple[str, ...]] = {}
        for name in names:
            got = outcomes.get(name, {})
            v = VIOLATIONS[name]
            # every check the violation must fail fails on it and passes on the reference
            complete = all(got.get(c) in FAILING and reference.get(c) == "passed" for c in v.must_fail)
            caught[name] = tuple(c for c in v.must_fail if matches(c, checks)) if complete else ()
        rows.append(Row(req, checks, tuple(p for p in checks if not any(fnmatch.fnmatchcase(c, p) for c in collected)),
                        names, caught, EXEMPT.get(req.id, "")))
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def render(rows: Sequence[Row]) -> str:
    musts = [r for r in rows if r.requirement.must]
    proven = sum(r.proven for r in musts)
    exempt = sum(bool(r.exempt) for r in musts)
    lines = [
        "# Requirements: every MUST of the spec, its checks and the violations that prove them",
        "",
        "Generated by `python -m reference_tools.proof table` from `spec/SPEC.md` and "
        "`reference_tools/proof/requirement_map.py`; `tests/test_requirement_table.py` fails when this file is "
        "stale or a MUST is unproven. A requirement is **proven** when its checks (check-id patterns) match "
        "Required checks of the suite and at least one planted violation — a mutant "
        "(`reference_tools/proof/mutants.py`), a defective adapter (`tests/defective_adapters.py`), an engine with "
        "a receive path that skips its unwrap (`tests/engine/receive_path_adapters.py`) or a broken testee "
        "(`python -m reference_impl.testee --break MODE`) — fails exactly the listed checks, which pass on the "
        "reference.",
        "",
        f"**{proven} of {len(musts)} MUST requirements proven**"
        + (f"; {exempt} are not properties of an implementation's wire behaviour (see the table)" if exempt else "")
        + ".",
        "",
        "| requirement | what it says | Required checks | planted violations (failing checks) | proven |",
        "|---|---|---|---|---|",
    ]
    for r in musts:
        checks = "<br>".join(f"`{p}`" + (" (no such check)" if p in r.unmatched else "") for p in r.checks) or "–"
        violations = "<br>".join(
            f"`{n}`" + (f": `{r.caught_by[n][0]}`" + (f" +{len(r.caught_by[n]) - 1}" if len(r.caught_by[n]) > 1 else "")
                        if r.caught_by.get(n) else ": not caught")
            for n in r.violations) or "–"
        verdict = "yes" if r.proven else f"n/a: {r.exempt}" if r.exempt else "**no**"
        lines.append(f"| {r.requirement.id} | {_cell(r.requirement.summary)} | {checks} | {violations} | {verdict} |")
    others = [r.requirement.id for r in rows if not r.requirement.must]
    lines += ["", "Requirements without MUST (SHOULD, MAY or descriptive), not in the table: "
              + ", ".join(others) + "."]
    return "\n".join(lines) + "\n"


def main(check: bool = False, run: bool = True) -> int:
    """Write docs/requirements.md (or, with check, fail when it is stale); exit 1 while a MUST
    is unproven."""
    rows = prove(run=run)
    text = render(rows)
    unproven = [r.requirement.id for r in rows if r.requirement.must and not r.proven and not r.exempt]
    if check:
        current = REQUIREMENTS_DOC.read_text() if REQUIREMENTS_DOC.exists() else ""
        if current != text:
            print(f"{REQUIREMENTS_DOC} is stale: run `python -m reference_tools.proof table`", file=sys.stderr)
            return 1
    else:
        REQUIREMENTS_DOC.write_text(text)
        print(f"wrote {REQUIREMENTS_DOC}")
    if unproven:
        print(f"unproven MUST requirements: {', '.join(unproven)}", file=sys.stderr)
        return 1
    return 0
