"""A CI-sized slice of the mutation run (docs/mutation.md has the whole one, `tox -e mutation`):
six mutants, each against the checks that must catch it, through the mutation runner; and the
control (every message rewritten by the mutants' writer, no bug) passing the same checks."""

from __future__ import annotations

import pytest

from reference_tools.proof import mutation
from reference_tools.proof.mutants import MUTANTS
from reference_tools.proof.requirement_map import VIOLATIONS
from reference_tools.proof.runs import Job, run_batch

SLICE = ("Float32Narrowing", "DropsTrailingDefaults", "TensorDtypeRenamed", "IgnoresTrailingBytes",
         "RequiresCanonicalBytes", "UntrustedReceiveUnpicklesAllowListed")
SELECTION = " or ".join(c for name in SLICE for c in VIOLATIONS[name].must_fail)


@pytest.mark.slow
def test_a_slice_of_mutants_is_caught():
    results = mutation.run(SLICE, selection=SELECTION)
    survivors = [r.name for r in results if not r.caught]
    assert not survivors, f"mutants no Required check caught: {survivors}"
    assert "**Score: 6/6 caught (100.0%)**" in mutation.render(results, 0.0, SELECTION)


@pytest.mark.slow
def test_the_control_passes_what_the_mutants_fail():
    (outcome,) = run_batch([Job("reference_tools.proof.mutants:NoBug", SELECTION)])
    assert outcome and set(outcome.values()) == {"passed"}, outcome


def test_the_mutant_list():
    names = [m.__name__ for m in MUTANTS]
    assert len(names) >= 40 and len(set(names)) == len(names)
    assert all((m.__doc__ or "").strip() for m in MUTANTS), "every mutant says what its bug is"
    assert "NoBug" not in names
