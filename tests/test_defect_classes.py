"""docs/defect-classes.md is the one definition of the defect classes the code cites.

Every citation (`defect class: <name>`) names a class of the table; no text cites a class by a
number or by a document outside the repository; every class is proven by a defective adapter
in tests/test_defects.py.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "defect-classes.md"
CITATION = re.compile(r"defect class(?:es)?:\s*`?([a-z0-9-]+)", re.IGNORECASE)
#: Ways of citing what the repository does not define: numbered classes, outside documents, issues.
UNDEFINED = re.compile(r"defect class(?:es)? \d|BRIEF(?:\.md)? section|issue #\d", re.IGNORECASE)


def _names() -> list[str]:
    return re.findall(r"^\| `([a-z0-9-]+)` \|", TABLE.read_text(encoding="utf-8"), re.MULTILINE)


def _tracked_text() -> dict[str, str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    out = {}
    for name in files:
        path = ROOT / name
        if path.suffix in (".py", ".md", ".txt", ".toml", ".ini") and path.is_file() and name != "CHANGELOG.md":
            out[name] = path.read_text(encoding="utf-8", errors="replace")
    return out


def test_the_table_names_each_class_once():
    names = _names()
    assert len(names) >= 12 and len(names) == len(set(names)), names


def test_every_citation_names_a_class_of_the_table():
    names = set(_names())
    unknown = [f"{name}: {cited}" for name, text in _tracked_text().items()
               for cited in CITATION.findall(text) if cited not in names]
    assert not unknown, f"cited defect classes missing from docs/defect-classes.md: {unknown}"


def test_nothing_cites_what_the_repository_does_not_define():
    found = [f"{name}: {m.group(0)}" for name, text in _tracked_text().items() if name != "tests/test_defect_classes.py"
             for m in UNDEFINED.finditer(text)]
    assert not found, f"cite docs/defect-classes.md or the spec instead: {found}"


def test_every_class_is_proven_by_a_defective_adapter():
    from test_defects import DEFECTS  # tests/ is on sys.path (rootdir conftest-less layout)

    proven = {key.split(":")[0] for key in DEFECTS}
    assert proven == set(_names()), f"classes without a defective adapter: {sorted(set(_names()) - proven)}"
