"""The requirement table (docs/requirements.md): every clause of every MUST of spec/SPEC.md is
tested by Required checks, and a planted violation on each path, in-process and behind the
testee protocol, makes those checks fail (reference_tools/proof)."""

from __future__ import annotations

import importlib
import re

import pytest

from conformance.requirements import clauses
from reference_tools.proof import requirement_map, table
from reference_tools.proof.mutants import MUTANTS
from reference_tools.proof.requirement_map import CLAUSES, EXEMPT, NO_TESTEE_PATH, PROOFS, VIOLATIONS, is_testee
from reference_tools.proof.spec_requirements import parse


def test_every_must_has_clauses_or_an_exemption():
    musts = [r.id for r in parse() if r.must]
    assert len(musts) > 40, musts  # the parser still finds the spec's requirements
    with_clauses = {c.requirement for c in CLAUSES}
    missing = [r for r in musts if r not in with_clauses and r not in EXEMPT]
    assert not missing, f"MUST requirements with no clause in reference_tools/proof/requirement_map.py: {missing}"
    unknown = sorted(with_clauses - set(musts))
    assert not unknown, f"clauses of requirements the spec does not define as MUST: {unknown}"
    assert not with_clauses & set(EXEMPT), "an exempt requirement has clauses"


def test_the_spec_clause_table_and_the_proofs_name_the_same_clauses():
    """spec/clauses.md (the suite's) and requirement_map.PROOFS (the proof's) stay in step."""
    table = [c.id for c in clauses()]
    assert [c.id for c in CLAUSES] == table
    assert not set(PROOFS) - set(table), f"proofs of clauses spec/clauses.md does not have: {set(PROOFS) - set(table)}"
    assert all(c.checks for c in clauses()), "a clause row of spec/clauses.md names no check"


def test_clause_ids_are_stable_and_well_formed():
    ids = [c.id for c in CLAUSES]
    assert len(ids) == len(set(ids)), "duplicate clause ids"
    for c in CLAUSES:
        assert re.fullmatch(r"R-[A-Z]+-\d+[a-j]", c.id), c.id
        assert c.text and c.text[0].islower() or c.text.startswith("="), c.id
    # letters run a, b, c... within each requirement (a new clause takes the next letter)
    by_requirement: dict[str, list[str]] = {}
    for c in CLAUSES:
        by_requirement.setdefault(c.requirement, []).append(c.id[-1])
    for rid, letters in by_requirement.items():
        assert letters == [chr(ord("a") + i) for i in range(len(letters))], (rid, letters)


def test_the_multi_clause_musts_are_split():
    counts = {rid: sum(c.requirement == rid for c in CLAUSES) for rid in ("R-MSG-4", "R-MSG-5", "R-EXT-3", "R-TEN-1")}
    assert counts["R-MSG-4"] >= 3 and all(n >= 3 for n in counts.values()), counts


def test_violations_are_on_the_path_their_column_says():
    for c in CLAUSES:
        for name in (*c.in_process, *c.testee):
            assert name in VIOLATIONS, f"{c.id}: unknown violation {name!r}"
        wrong = [n for n in c.in_process if is_testee(VIOLATIONS[n])]
        wrong += [n for n in c.testee if not is_testee(VIOLATIONS[n])]
        assert not wrong, f"{c.id}: violations in the wrong column: {wrong}"
        assert not c.no_testee or c.no_testee in NO_TESTEE_PATH, f"{c.id}: unknown reason {c.no_testee!r}"
        assert not (c.testee and c.no_testee), f"{c.id}: a testee violation and a reason why there is none"
    used = {c.no_testee for c in CLAUSES if c.no_testee}
    assert used == set(NO_TESTEE_PATH), f"reasons no clause uses: {set(NO_TESTEE_PATH) - used}"
    exempt_share = sum(bool(c.no_testee) for c in CLAUSES) / len(CLAUSES)
    # 0.25 until the pipeline requirements (R-PIPE-*): each is a property of an
    # implementation's own processes, which the testee protocol, a codec behind a pipe, has none of.
    assert exempt_share < 0.30, f"{exempt_share:.0%} of the clauses have no testee path: keep exemptions few"


def test_every_clause_has_a_check_and_a_violation_on_both_paths():
    """Fails, naming the clause and what it lacks, until every clause is complete; a pending
    clause's text says which checks, mutant and break mode are still to be written."""
    rows = table.prove(run=False)
    incomplete = [f"{r.clause.id} ({r.clause.text}): {'; '.join(r.missing())}" for r in rows
                  if r.clause is not None and r.missing()]
    assert not incomplete, "clauses without a Required check or a planted violation on each path:\n  " + \
        "\n  ".join(incomplete)


def test_the_parser_reads_levels_and_aliases():
    found = {r.id: r for r in parse()}
    assert found["R-PW-5"].must and found["R-SEC-1"].must and found["R-SEC-1"].alias_of == "R-PW-5"
    assert not found["R-PW-4"].must  # SHOULD only
    assert found["R-TEN-1"].must  # its MUSTs follow the dtype table inside the bullet


def test_every_violation_names_a_mutant_or_defect_that_exists():
    from reference_impl.testee import BREAKS
    from reference_tools.proof.mutant_testee import _adapter_class

    for v in VIOLATIONS.values():
        assert v.must_fail, v.name
        if v.impl.startswith("cmd:") and " reference_impl.testee " in v.impl:  # a testee: its --break mode exists
            assert v.impl.rpartition("--break ")[2] in BREAKS, v.impl
            continue
        if v.impl.startswith("cmd:"):  # an adapter behind the testee protocol
            assert _adapter_class(v.impl.rpartition(" ")[2]) is not None, v.impl
            continue
        module, _, name = v.impl.partition(":")
        assert hasattr(importlib.import_module(module), name), v.impl
    assert len(MUTANTS) >= 40
    assert requirement_map.BEHIND_TESTEE.keys() <= VIOLATIONS.keys()


@pytest.mark.slow
def test_every_clause_is_proven_and_the_table_is_current():
    """Runs every planted violation against exactly the checks it must fail (2 worker
    processes), and the reference against the same checks, then compares the table."""
    rows = table.prove()
    unproven = {r.clause.id: r.missing() for r in rows if r.clause is not None and not r.proven}
    assert not unproven, f"clauses not proven on both paths: {unproven}"
    assert table.REQUIREMENTS_DOC.read_text() == table.render(rows), (
        "docs/requirements.md is stale: run `python -m reference_tools.proof table`")
