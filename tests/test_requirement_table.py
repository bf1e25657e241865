"""The requirement table (docs/requirements.md): every MUST of spec/SPEC.md is tested by
Required checks, and a planted violation makes those checks fail (reference_tools/proof)."""

from __future__ import annotations

import pytest

from reference_tools.proof import requirement_map, table
from reference_tools.proof.mutants import MUTANTS
from reference_tools.proof.spec_requirements import parse


def test_every_must_is_mapped_or_exempt_with_a_reason():
    musts = [r.id for r in parse() if r.must]
    assert len(musts) > 40, musts  # the parser still finds the spec's requirements
    missing = [r for r in musts if r not in requirement_map.REQUIREMENTS and r not in requirement_map.EXEMPT]
    assert not missing, f"MUST requirements with no checks in reference_tools/proof/requirement_map.py: {missing}"
    for rid, entry in requirement_map.REQUIREMENTS.items():
        assert entry.checks and entry.violations, f"{rid}: needs check patterns and at least one violation"
        unknown = [v for v in entry.violations if v not in requirement_map.VIOLATIONS]
        assert not unknown, f"{rid}: unknown violations {unknown}"


def test_the_parser_reads_levels_and_aliases():
    found = {r.id: r for r in parse()}
    assert found["R-PW-5"].must and found["R-SEC-1"].must and found["R-SEC-1"].alias_of == "R-PW-5"
    assert not found["R-PW-4"].must  # SHOULD only
    assert found["R-TEN-1"].must  # its MUSTs follow the dtype table inside the bullet


def test_every_violation_names_a_mutant_or_defect_that_exists():
    import importlib

    for v in requirement_map.VIOLATIONS.values():
        assert v.must_fail, v.name
        if v.impl.startswith("cmd:"):  # a testee: its --break mode must exist
            from reference_impl.testee import BREAKS

            assert v.impl.rpartition("--break ")[2] in BREAKS, v.impl
            continue
        module, _, name = v.impl.partition(":")
        assert hasattr(importlib.import_module(module), name), v.impl
    assert len(MUTANTS) >= 40


@pytest.mark.slow
def test_every_must_is_proven_and_the_table_is_current():
    """Runs every planted violation against exactly the checks it must fail (2 worker
    processes), and the reference against the same checks, then compares the table."""
    rows = table.prove()
    unproven = {r.requirement.id: {n: bool(c) for n, c in r.caught_by.items()} | {"unmatched": list(r.unmatched)}
                for r in rows if r.requirement.must and not r.proven and not r.exempt}
    assert not unproven, f"MUST requirements without a proven violation: {unproven}"
    assert table.REQUIREMENTS_DOC.read_text() == table.render(rows), (
        "docs/requirements.md is stale: run `python -m reference_tools.proof table`")
