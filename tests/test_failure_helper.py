"""Every check fails through the one failure helper (conformance/suite/failure.py): its message
names the step, the input, every difference, the requirement and the replay command. A bare
`assert`, `pytest.fail(...)` or `raise AssertionError(...)` in a suite module gives none of that,
so this test refuses them in every module of conformance/suite, the ones added later included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[1] / "conformance" / "suite"
#: the helper itself raises the exceptions it builds
HELPER = SUITE / "failure.py"


def bare_failures(source: str, name: str = "<module>") -> list[str]:
    """'line: what' for each way of failing a check around the helper, in line order."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Assert):
            found.append((node.lineno, "bare assert"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fail" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "pytest":
            found.append((node.lineno, "pytest.fail(...)"))
        elif isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id in ("AssertionError", "Failed"):
                found.append((node.lineno, f"raise {exc.id}"))
    return [f"{line}: {what}" for line, what in sorted(found)]


def suite_modules() -> list[Path]:
    return sorted(p for p in SUITE.glob("*.py") if p != HELPER)


def test_the_scan_finds_every_way_around_the_helper():
    planted = ("import pytest\ndef test_x(ipc):\n    assert ipc\n    pytest.fail('no')\n"
               "    raise AssertionError('no')\n    raise AssertionError\n")
    assert bare_failures(planted) == ["3: bare assert", "4: pytest.fail(...)", "5: raise AssertionError",
                                      "6: raise AssertionError"]
    assert bare_failures("from conformance.suite.failure import fail\ndef test_x(ipc):\n"
                         "    if not ipc:\n        fail('x', 'R-MSG-1', ipc=ipc)\n") == []


@pytest.mark.parametrize("module", suite_modules(), ids=lambda p: p.name)
def test_a_suite_module_fails_only_through_the_helper(module):
    found = bare_failures(module.read_text(), str(module))
    assert not found, (f"{module.relative_to(SUITE.parents[1])} fails around conformance/suite/failure.py "
                       f"(use fail(what, requirement, step=..., data=..., value=..., ipc=ipc)):\n  "
                       + "\n  ".join(found))
