"""The requirement table: every clause of every MUST of spec/SPEC.md, the Required checks that
test it, and the planted violations, in-process and behind the testee protocol, that make those
checks fail (docs/requirements.md).

``prove()`` collects the suite's checks (reference, E2E included), runs each planted
violation against exactly the checks it must fail (several per worker process, 2 workers)
and the reference against the same checks (they must pass there), and decides per
clause: proven when every pattern names a collected Required check and, on each path
(in-process, testee), at least one violation fails checks that match the clause's patterns.
"""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from conformance.paths import data_root
from conformance.records import Outcome
from reference_tools.proof.requirement_map import CLAUSES, EXEMPT, NO_TESTEE_PATH, VIOLATIONS, Clause, Violation
from reference_tools.proof.runs import FAILING, Job, run_batches
from reference_tools.proof.spec_requirements import Requirement, parse

REQUIREMENTS_DOC = data_root() / "docs" / "requirements.md"


@dataclass(frozen=True)
class Row:
    """One clause of a MUST (or a whole exempt requirement) and what proves it."""

    requirement: Requirement
    clause: Optional[Clause]                 # None for an exempt requirement
    unmatched: tuple[str, ...]               # patterns that name no collected Required check
    caught_by: Mapping[str, tuple[str, ...]]  # violation -> failing checks matching the patterns
    exempt: str = ""

    @property
    def checks(self) -> tuple[str, ...]:
        return self.clause.checks if self.clause else ()

    def _caught(self, names: Sequence[str]) -> bool:
        return any(self.caught_by.get(n) for n in names)

    def missing(self) -> list[str]:
        """What the clause still lacks; empty when proven (or exempt)."""
        if self.exempt or self.clause is None:
            return []
        c, out = self.clause, []
        if c.pending:
            return [f"pending: {c.pending}"]
        if not c.checks:
            out.append("no Required check")
        if self.unmatched:
            out.append(f"patterns that match no collected Required check: {', '.join(self.unmatched)}")
        if not c.in_process:
            out.append("no in-process violation (a mutant in reference_tools/proof/mutants.py)")
        elif self.caught_by and not self._caught(c.in_process):
            out.append(f"no in-process violation caught: {', '.join(c.in_process)}")
        if not c.testee and not c.no_testee:
            out.append("no testee violation (a --break mode of reference_impl/testee.py) and no NO_TESTEE_PATH reason")
        elif c.testee and self.caught_by and not self._caught(c.testee):
            out.append(f"no testee violation caught: {', '.join(c.testee)}")
        return out

    @property
    def proven(self) -> bool:
        return not self.exempt and self.clause is not None and bool(self.caught_by) and not self.missing()


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


def clauses_of(requirement_id: str) -> list[Clause]:
    return [c for c in CLAUSES if c.requirement == requirement_id]


def prove(run: bool = True) -> list[Row]:
    """One row per clause of every MUST (and one per exempt requirement). Without run, no
    violation is run: caught_by stays empty and only the mapping is judged (missing())."""
    collected = [c for c in collected_checks() if c.startswith("Required.")]
    names = sorted({v for c in CLAUSES for v in (*c.in_process, *c.testee)})
    outcomes = run_violations(names) if run else {}
    reference = outcomes.get("reference", {})
    rows = []
    for req in parse():
        if not req.must:
            continue
        if req.id in EXEMPT:
            rows.append(Row(req, None, (), {}, EXEMPT[req.id]))
            continue
        for clause in clauses_of(req.id):
            caught: dict[str, tuple[str, ...]] = {}
            for name in (*clause.in_process, *clause.testee):
                got = outcomes.get(name, {})
                v = VIOLATIONS[name]
                # every check the violation must fail fails on it and passes on the reference
                complete = all(got.get(c) in FAILING and reference.get(c) is Outcome.PASSED for c in v.must_fail)
                caught[name] = tuple(c for c in v.must_fail if matches(c, clause.checks)) if complete else ()
            unmatched = tuple(p for p in clause.checks if not any(fnmatch.fnmatchcase(c, p) for c in collected))
            rows.append(Row(req, clause, unmatched, caught if run else {}))
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def _violations_cell(r: Row, names: Sequence[str]) -> str:
    def one(n: str) -> str:
        caught = r.caught_by.get(n)
        if not caught:
            return f"`{n}`: not caught"
        return f"`{n}`: `{caught[0]}`" + (f" +{len(caught) - 1}" if len(caught) > 1 else "")
    return "<br>".join(one(n) for n in names)


def render(rows: Sequence[Row]) -> str:
    clauses = [r for r in rows if r.clause is not None]
    proven = sum(r.proven for r in clauses)
    pending = sum(bool(r.clause.pending) for r in clauses if r.clause)
    exempt = [r for r in rows if r.exempt]
    requirements = {r.requirement.id for r in rows}
    lines = [
        "# Requirements: every clause of every MUST, its checks and the violations that prove it",
        "",
        "Generated by `python -m reference_tools.proof table` from `spec/SPEC.md`, `spec/clauses.md` and "
        "`reference_tools/proof/requirement_map.py`; `tests/test_requirement_table.py` fails when this file is "
        "stale or a clause is unproven. Every MUST sentence is split into its clauses (`R-MSG-4a`, `R-MSG-4b`, ...). "
        "A clause is **proven** when its checks (check-id patterns) match Required checks of the suite and a planted "
        "violation on **each path** fails exactly its listed checks, which pass on the reference: **in-process** (a "
        "mutant of `reference_tools/proof/mutants.py`, a defective adapter of `tests/defective_adapters.py` or "
        "`tests/spec_rule_adapters.py`, an engine whose receive path skips its unwrap, "
        "`tests/engine/receive_path_adapters.py`) and **testee** (the bug in a testee process, seen only through "
        "the protocol: `python -m reference_impl.testee --break MODE`, or `testee mutant NAME`, the reference "
        "testee whose codec is that mutant's, `python -m reference_tools.proof.mutant_testee NAME`). A clause that "
        "cannot apply to the testee path names the reason (below).",
        "",
        f"**{proven} of {len(clauses)} clauses of {len(requirements) - len(exempt)} MUST requirements proven on both "
        f"paths**" + (f"; {pending} clauses pending (their checks are being written)" if pending else "")
        + (f"; {len(exempt)} requirements are not properties of an implementation's wire behaviour" if exempt else "")
        + ".",
        "",
        "| clause | what it says | Required checks | in-process violations (failing checks) | "
        "testee violations (failing checks) | proven |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.clause is None:
            summary, reason = _cell(r.requirement.summary), _cell(r.exempt)
            lines.append(f"| {r.requirement.id} | {summary} | – | – | – | n/a: {reason} |")
            continue
        c = r.clause
        checks = "<br>".join(f"`{p}`" + (" (no such check)" if p in r.unmatched else "") for p in c.checks) or "–"
        testee = _violations_cell(r, c.testee) or (f"n/a ({c.no_testee})" if c.no_testee else "–")
        missing = r.missing()
        verdict = "yes" if r.proven else f"pending: {_cell(c.pending)}" if c.pending else (
            "**no**: " + _cell("; ".join(missing)) if missing else "**no**")
        lines.append(f"| {c.id} | {_cell(c.text)} | {checks} | {_violations_cell(r, c.in_process) or '–'} | {testee} "
                     f"| {verdict} |")
    lines += ["", "Why a clause has no testee path:", ""]
    lines += [f"- **{key}**: {reason}." for key, reason in NO_TESTEE_PATH.items()]
    others = [r.id for r in parse() if not r.must]
    lines += ["", "Requirements without MUST (SHOULD, MAY or descriptive), not in the table: "
              + ", ".join(others) + "."]
    return "\n".join(lines) + "\n"


def main(check: bool = False, run: bool = True) -> int:
    """Write docs/requirements.md (or, with check, fail when it is stale); exit 1 while a MUST
    is unproven."""
    rows = prove(run=run)
    text = render(rows)
    unproven = [r.clause.id for r in rows if r.clause is not None and not r.proven]
    if check:
        current = REQUIREMENTS_DOC.read_text() if REQUIREMENTS_DOC.exists() else ""
        if current != text:
            print(f"{REQUIREMENTS_DOC} is stale: run `python -m reference_tools.proof table`", file=sys.stderr)
            return 1
    else:
        REQUIREMENTS_DOC.write_text(text)
        print(f"wrote {REQUIREMENTS_DOC}")
    if unproven:
        print(f"unproven clauses: {', '.join(unproven)}", file=sys.stderr)
        return 1
    return 0
