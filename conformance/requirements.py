"""What a check proves: the requirements of spec/SPEC.md, the clauses of its MUSTs with the
Required checks that test each (spec/clauses.md), and SPEC §15's check index (area -> requirements).

The data lives in spec/, owned by the suite: the report site reads it to say what a check means,
and the proof tooling (reference_tools/proof) reads the same clauses and adds the planted
violations that prove them.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from conformance.paths import spec_dir

SPEC = spec_dir() / "SPEC.md"
CLAUSES = spec_dir() / "clauses.md"

_DEFINED = re.compile(r"\*\*\[(R-[A-Z]+-\d+)\]\*\*")
_ALIAS = re.compile(r"\*\*\[(R-[A-Z]+-\d+)\]\*\*\s*=\s*\[(R-[A-Z]+-\d+)\]")
_MUST = re.compile(r"\bMUST\b")
_SHOULD = re.compile(r"\bSHOULD\b")
_SECTION = re.compile(r"^#+\s+(?:Appendix\s+)?([0-9A-Z]+(?:\.\d+)*)\.?\s+(.*)$")


@dataclass(frozen=True)
class Requirement:
    id: str
    text: str                    # the paragraph (bullet or table row) that defines it, one line
    must: bool                   # the paragraph holds MUST or MUST NOT
    alias_of: Optional[str] = None
    section: str = ""            # the heading it stands under: "2.1 Structs"

    @property
    def plain(self) -> str:
        """The paragraph without Markdown markup (bold, code ticks, the bullet)."""
        text = re.sub(r"\*\*|`|\[(R-[A-Z]+-\d+)\]", lambda m: m.group(1) or "", self.text)
        return re.sub(r"^[-|\s]+|[|\s]+$", "", text).replace("|", "/")

    @property
    def body(self) -> str:
        """The paragraph without markup and without its leading id (where it shows, the id is named)."""
        return re.sub(rf"^{re.escape(self.id)}\s*", "", self.plain)

    @property
    def summary(self) -> str:
        """The paragraph without markup, cut to a table cell."""
        text = self.body
        return text if len(text) <= 160 else text[:157].rstrip() + "..."

    @property
    def should(self) -> bool:
        return bool(_SHOULD.search(self.text))


def _blocks(lines: list[str]) -> list[str]:
    """Paragraphs, bullets (with their indented continuation: lines, tables, paragraphs) and
    top-level table rows: each is one block, the scope of the requirements it defines."""
    blocks: list[list[str]] = []
    current: list[str] = []
    bullet = blank = False

    def close() -> None:
        nonlocal current
        if current:
            blocks.append(current)
        current = []

    for line in lines:
        if not line.strip():
            blank = True
            continue
        indented = line[:1].isspace()
        if bullet and indented:
            current.append(line.strip())
        elif line.startswith(("- ", "#", "|")) or blank or not current:
            close()
            current.append(line.strip())
            bullet = line.startswith("- ")
            if line.startswith(("|", "#")):
                close()
        else:
            current.append(line.strip())
        blank = False
    close()
    return [" ".join(b) for b in blocks]


def parse(path: Path = SPEC) -> list[Requirement]:
    """Every requirement the spec defines (in bold brackets), in the order of the text.
    An alias (`**[R-SEC-1]** = [R-PW-5]`) has the level of the requirement it names."""
    found: dict[str, Requirement] = {}
    aliases: dict[str, str] = {}
    section = ""
    for block in _blocks(path.read_text(encoding="utf-8").splitlines()):
        heading = _SECTION.match(block)
        if heading:
            section = f"{heading.group(1)} {heading.group(2)}"
            continue
        for alias, target in _ALIAS.findall(block):
            aliases[alias] = target
        for rid in _DEFINED.findall(block):
            if rid not in found:
                found[rid] = Requirement(rid, block, bool(_MUST.search(block)), section=section)
    for alias, target in aliases.items():
        base = found[target]
        found[alias] = Requirement(alias, found[alias].text, base.must, alias_of=target, section=found[alias].section)
    return list(found.values())


def must_requirements(path: Path = SPEC) -> list[Requirement]:
    return [r for r in parse(path) if r.must]


@dataclass(frozen=True)
class SpecClause:
    """One clause of a MUST (spec/clauses.md): what it says and the Required checks that test it."""

    id: str                   # the requirement id and a letter: R-MSG-4a
    text: str                 # the clause, in the spec's words (shortened)
    checks: tuple[str, ...]   # fnmatch patterns over Required check ids

    @property
    def requirement(self) -> str:
        return self.id.rstrip("abcdefghij")

    def tests(self, check_id: str) -> bool:
        return any(fnmatch.fnmatchcase(check_id, p) for p in self.checks)


class TableError(ValueError):
    """spec/clauses.md has a row the reader cannot split; the message names the line."""


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells; `\\|` is a bar inside a cell."""
    inner = re.sub(r"^\s*\||(?<!\\)\|\s*$", "", line)
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def clauses(path: Path = CLAUSES) -> tuple[SpecClause, ...]:
    """The rows of spec/clauses.md's table: | clause | what it says | Required checks |."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not re.match(r"\|\s*R-", line):
            continue
        cells = _cells(line)
        if len(cells) != 3:
            raise TableError(f"{path}:{n}: a clause row has 3 cells (clause | what it says | checks), got {len(cells)}")
        checks = tuple(re.findall(r"`([^`]+)`", cells[2]))
        out.append(SpecClause(cells[0], cells[1], checks))
    return tuple(out)


_RANGE = re.compile(r"(R-[A-Z]+-)(\d+)\s*(?:…|\.\.\.)\s*R-[A-Z]+-(\d+)")


def _expand(cell: str, known: list[str]) -> list[str]:
    """Requirement ids a §15 cell names: `R-MSG-1`, `R-MSG-1 … R-MSG-5`, `R-MSG-*` (§ references aside)."""
    out: list[str] = []
    for part in re.split(r",\s*", cell):
        ranged = _RANGE.search(part)
        if ranged:
            prefix, lo, hi = ranged.group(1), int(ranged.group(2)), int(ranged.group(3))
            out += [f"{prefix}{i}" for i in range(lo, hi + 1) if f"{prefix}{i}" in known]
            continue
        for star in re.findall(r"R-[A-Z]+-\*", part):
            out += [k for k in known if fnmatch.fnmatchcase(k, star)]
        out += re.findall(r"R-[A-Z]+-\d+", part)
    return list(dict.fromkeys(out))


def check_index(path: Path = SPEC) -> dict[str, list[str]]:
    """SPEC §15's table: area -> the requirement ids its row names, in the row's order."""
    known = [r.id for r in parse(path)]
    text = path.read_text(encoding="utf-8")
    start = text.index("## 15.")
    out: dict[str, list[str]] = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        cells = _cells(line) if line.startswith("|") else []
        if len(cells) == 3 and cells[0] not in ("area", "---"):
            out[cells[0]] = _expand(cells[2], known)
    return out


@dataclass(frozen=True)
class Proven:
    """A requirement a check tests, and the clauses of it whose patterns name the check."""

    requirement: Requirement
    clauses: tuple[SpecClause, ...]   # empty when only SPEC §15's area row names the requirement


class Index:
    """The requirements of the spec and what tests them, read once."""

    def __init__(self, spec: Path = SPEC, table: Path = CLAUSES) -> None:
        self.requirements = {r.id: r for r in parse(spec)}
        self.clauses = clauses(table)
        self.areas = check_index(spec)

    def proves(self, check_ids: Iterable[str]) -> list[Proven]:
        """What checks of one kind (the instances of Level.Area.Name) test: the clauses whose patterns
        name one of them, else the requirements SPEC §15 lists for the area, those of the check's
        level (SHOULDs for a Recommended check, MUSTs for a Required one) when the row has any."""
        ids = list(check_ids)
        matched: dict[str, list[SpecClause]] = {}
        for c in self.clauses:
            if any(c.tests(i) for i in ids):
                matched.setdefault(c.requirement, []).append(c)
        if matched:
            return [Proven(self.requirements[rid], tuple(cs)) for rid, cs in matched.items()
                    if rid in self.requirements]
        if not ids:
            return []
        level, _, rest = ids[0].partition(".")
        row = [self.requirements[r] for r in self.areas.get(rest.partition(".")[0], []) if r in self.requirements]
        of_level = [r for r in row if (r.should if level == "Recommended" else r.must)]
        return [Proven(r, ()) for r in (of_level or row)]

    def checks_of(self, requirement_id: str) -> list[SpecClause]:
        return [c for c in self.clauses if c.requirement == requirement_id]


@functools.lru_cache(maxsize=1)
def index() -> Index:
    return Index()
