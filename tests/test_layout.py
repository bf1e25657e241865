"""The import rules that keep the three audiences apart (README "Layout", conformance/DESIGN.md).

- arrows point one way: nothing in the ``conformance`` package (the suite, the plugin, the testee
  runner, the spec tooling, the golden tools, the CLI) imports ``reference_impl`` or
  ``reference_tools``; the reference is an implementation plugged in like any other, through the
  entry points of pyproject.toml (``ipc_conformance.adapters``, ``.commands``, ``.catalogues``);
- the spec tooling (``conformance.schema``) imports neither the suite nor the serving engine;
- the reference implementation (``reference_impl``) never imports the suite or the reference tools;
  it may import the public runtime (``conformance.runtime``: what generated modules import).

Every import counts, lazy ones inside functions too. The command line, ``conformance.cli``, is the
front door that routes each subcommand to its audience inside ``conformance``. Module imports form
no cycle, and an import inside a function closes none but the known ones.

A hand walk rather than import-linter contracts: a contract cannot say "the suite is conformance
less conformance.schema, paths and errors" without listing every subpackage, so the contracts
would be longer than the audience table below and drift when a subpackage is added.
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
SHARED = ("conformance.paths", "conformance.errors", "conformance.runtime")
#: What the conformance package never imports, in any module, at any depth.
REFERENCE = ("reference_impl", "reference_tools")


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


def _reference_imports() -> list[str]:
    return [f"{importer} imports {target}" for importer, imported in sorted(_graph().items())
            if importer.split(".")[0] == "conformance"
            for target in sorted(imported) if target.split(".")[0] in REFERENCE]


def test_conformance_never_imports_the_reference():
    """Arrows point one way: the front door and the spec tooling too (the reference reaches them
    through entry points)."""
    assert _reference_imports() == []


@pytest.mark.parametrize("text", ["import reference_impl.codec\n",
                                  "def f():\n    from reference_tools.adapter import ReferenceAdapter\n",
                                  "from reference_impl import http_bridge\n"])
def test_the_one_way_rule_sees_every_import(text):
    """The checker itself: a top-level or lazy import of either reference package, anywhere under
    conformance/ (here in the spec tooling, which the audience rules let import the codec)."""
    sample = ROOT / "conformance" / "schema" / "_layout_probe.py"
    sample.write_text(text, encoding="utf-8")
    try:
        assert any(v.startswith("conformance.schema._layout_probe imports reference_") for v in _reference_imports())
    finally:
        sample.unlink()


def test_the_rules_see_a_lazy_import():
    """The checker itself: an import inside a function of the suite is found."""
    sample = ROOT / "conformance" / "_layout_probe.py"
    sample.write_text("def f():\n    from reference_impl import codec\n", encoding="utf-8")
    try:
        assert "conformance._layout_probe imports reference_impl.codec" in _violations()
    finally:
        sample.unlink()


# -- import cycles ------------------------------------------------------------------------
def _modules_imported(path: Path, names: set[str], *, lazy: bool) -> set[str]:
    """The first-party modules a file imports (lazy: those inside functions too), each once:
    `from pkg import mod` is an edge to pkg.mod, not to pkg; imports only a type checker runs
    (`if TYPE_CHECKING:`) and the file's own parent packages do not count."""
    name, is_package = _module_name(path)
    here = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in names)
            elif isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                submodules = {f"{module}.{alias.name}" for alias in node.names} & names
                found.update(submodules)
                if len(submodules) < len(node.names) and module in names:
                    found.add(module)
            if lazy or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit([child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)])

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return found - parents - {name}


def _cycles(*, lazy: bool) -> list[frozenset[str]]:
    """The import cycles of the first-party modules: the strongly connected groups (Tarjan's)."""
    files = {_module_name(p)[0]: p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}
    graph = {m: _modules_imported(p, set(files), lazy=lazy) for m, p in files.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = {stack.pop()}
            while v not in group:
                group.add(stack.pop())
            if len(group) > 1:
                found.append(frozenset(group))

    for module in graph:
        if module not in index:
            connect(module)
    return found


#: Cycles that an import inside a function still closes; none may be added. Each one is a
#: pair of modules that should share a third instead.
KNOWN_LAZY_CYCLES = {
    frozenset({"conformance.testee.adapter", "conformance.testee.replay"}),
    frozenset({"conformance.schema.golden.refusals", "conformance.schema.golden.store"}),
}


def test_no_import_cycles():
    """Module-level imports form no cycle; imports inside functions close only the known ones."""
    assert _cycles(lazy=False) == []
    new = [sorted(c) for c in _cycles(lazy=True) if c not in KNOWN_LAZY_CYCLES]
    assert not new, f"import cycles closed by an import inside a function: {new}; move what both need to a third module"


@pytest.mark.parametrize("pair", [
    ("reference_impl.engine.http_api", "reference_impl.engine.openai_api"),
    ("conformance.schema.evolution", "conformance.schema.isolation"),
    ("reference_tools.adapter", "reference_tools.e2e.checks"),
    ("conformance.report", "conformance.site"),
], ids=lambda pair: "<->".join(m.rsplit(".", 1)[-1] for m in pair))
def test_a_broken_cycle_stays_broken(pair):
    """The four cycles issue 21 found, each hidden by an import inside a function: no import, at
    any depth, leads back."""
    assert not any(set(pair) <= cycle for cycle in _cycles(lazy=True)), f"{pair[0]} and {pair[1]} import each other"


def test_the_cycle_check_sees_a_lazy_import():
    """The checker itself: an import inside a function that closes a cycle is found."""
    probes = {ROOT / "conformance" / "_cycle_probe_a.py": "from conformance import _cycle_probe_b\n",
              ROOT / "conformance" / "_cycle_probe_b.py": "def f():\n    from conformance import _cycle_probe_a\n"}
    for path, text in probes.items():
        path.write_text(text, encoding="utf-8")
    try:
        assert frozenset({"conformance._cycle_probe_a", "conformance._cycle_probe_b"}) in _cycles(lazy=True)
        assert _cycles(lazy=False) == []
    finally:
        for path in probes:
            path.unlink()


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


@pytest.mark.parametrize("manifest_id", ["sglang-0.5.23", "sglang-0.5.15"])
def test_a_generated_module_imports_only_the_runtime_and_the_libraries_it_names(manifest_id):
    """What `codegen` writes is a third party's production code: msgspec, pydantic's bridge from the
    public runtime, numpy and the runtime's torch stand-in only where a field's type names them
    (torch itself only once a tensor exists); never the reference."""
    from conformance.schema.codegen import generate
    from conformance.schema.manifest import load_manifest

    source = generate(load_manifest(manifest_id))
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module if node.module.startswith("conformance") else node.module.split(".")[0])
    assert imported <= {"__future__", "uuid", "array", "enum", "typing", "msgspec", "numpy",
                        "conformance.runtime.http_bridge", "conformance.runtime.lazy_torch"}, imported
    assert ("conformance.runtime.lazy_torch" in imported) == ("torch.Tensor" in source)
    assert ("numpy" in imported) == ("np.ndarray" in source)
