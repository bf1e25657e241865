"""The import rules that keep the three audiences apart (README "Layout", conformance/DESIGN.md).

- the suite a third party runs (``conformance`` outside ``conformance.schema``) never imports the
  reference implementation or its tools: it reaches them only through an adapter, by name;
- the spec tooling (``conformance.schema``) imports neither the suite nor the serving engine
  (it may use the reference codec to write golden vectors);
- the reference implementation (``reference_impl``) never imports the suite or the reference tools.

Every import counts, lazy ones inside functions too. The one module allowed to know all three is
the command line, ``conformance.cli``: it is the front door that routes each subcommand to its
audience, and imports each audience only inside that subcommand.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("conformance", "reference_impl", "reference_tools")
FRONT_DOOR = "conformance.cli"
#: Modules of the conformance package that every audience may import.
SHARED = ("conformance.paths", "conformance.errors")


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _imports(path: Path) -> set[str]:
    """Every first-party module the file imports, relative imports resolved."""
    name, is_package = _module_name(path)
    here = name.split(".") if is_package else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {m for m in found if m.split(".")[0] in PACKAGES}


def _graph() -> dict[str, set[str]]:
    return {_module_name(p)[0]: _imports(p) for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _audience(module: str) -> str:
    if module.startswith("conformance.schema"):
        return "schema"
    if module.startswith("reference_impl.engine") or module == "reference_impl.server":
        return "engine"
    return module.split(".")[0]


#: (importer audience, imported audience) pairs that break the rules.
FORBIDDEN = {
    ("conformance", "reference_impl"), ("conformance", "engine"), ("conformance", "reference_tools"),
    ("schema", "conformance"), ("schema", "engine"), ("schema", "reference_tools"),
    ("reference_impl", "conformance"), ("reference_impl", "reference_tools"),
    ("engine", "conformance"), ("engine", "reference_tools"),
}


def _violations() -> list[str]:
    out = []
    for importer, imported in _graph().items():
        if importer == FRONT_DOOR:
            continue
        for target in sorted(imported):
            if target in ("conformance", "conformance.__version__") or target.startswith(SHARED):
                continue  # the package root (its version), where the bundled data lies, the user-error type
            if (_audience(importer), _audience(target)) in FORBIDDEN:
                out.append(f"{importer} imports {target}")
    return out


def test_audiences_keep_to_their_imports():
    assert _violations() == []


def test_the_rules_see_a_lazy_import():
    """The checker itself: an import inside a function of the suite is found."""
    sample = ROOT / "conformance" / "_layout_probe.py"
    sample.write_text("def f():\n    from reference_impl import codec\n", encoding="utf-8")
    try:
        assert "conformance._layout_probe imports reference_impl.codec" in _violations()
    finally:
        sample.unlink()


@pytest.mark.parametrize("package", ["conformance", "conformance.schema", "conformance.suite", "conformance.adapters",
                                     "conformance.testee", "reference_impl", "reference_impl.engine",
                                     "reference_tools", "reference_tools.bench", "reference_tools.e2e",
                                     "reference_tools.fuzz", "reference_tools.proof"])
def test_every_package_says_what_it_is_for(package):
    init = ROOT.joinpath(*package.split("."), "__init__.py")
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert doc and len(doc.split()) >= 8, f"{package} has no module docstring saying what it is for and who uses it"


def test_every_noqa_says_why():
    """ruff runs in CI with the rules of pyproject.toml; a line that silences one says why."""
    bare = re.compile(r"#\s*noqa(?::\s*[A-Z0-9, ]+)?\s*$")
    found = [f"{path.relative_to(ROOT)}:{n}" for pkg in (*PACKAGES, "tests", "examples")
             for path in sorted((ROOT / pkg).rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if bare.search(line)]
    assert not found, f"noqa without a reason (write '# noqa: RULE - why'): {found}"
