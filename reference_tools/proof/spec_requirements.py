"""The requirements of spec/SPEC.md, parsed from the text: id, summary, keyword level."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from conformance.paths import spec_dir

SPEC = spec_dir() / "SPEC.md"

_DEFINED = re.compile(r"\*\*\[(R-[A-Z]+-\d+)\]\*\*")
_ALIAS = re.compile(r"\*\*\[(R-[A-Z]+-\d+)\]\*\*\s*=\s*\[(R-[A-Z]+-\d+)\]")
_MUST = re.compile(r"\bMUST\b")


@dataclass(frozen=True)
class Requirement:
    id: str
    text: str                    # the paragraph (bullet or table row) that defines it, one line
    must: bool                   # the paragraph holds MUST or MUST NOT
    alias_of: Optional[str] = None

    @property
    def summary(self) -> str:
        """The paragraph without markup, cut to a table cell."""
        text = re.sub(r"\*\*|`|\[(R-[A-Z]+-\d+)\]", lambda m: m.group(1) or "", self.text)
        text = re.sub(r"^[-|\s]+|[|\s]+$", "", text).replace("|", "/")
        text = re.sub(rf"^{re.escape(self.id)}\s*", "", text)  # the table names the id already
        return text if len(text) <= 160 else text[:157].rstrip() + "..."


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
    for block in _blocks(path.read_text(encoding="utf-8").splitlines()):
        for alias, target in _ALIAS.findall(block):
            aliases[alias] = target
        for rid in _DEFINED.findall(block):
            if rid not in found:
                found[rid] = Requirement(rid, block, bool(_MUST.search(block)))
    for alias, target in aliases.items():
        base = found[target]
        found[alias] = Requirement(alias, found[alias].text, base.must, alias_of=target)
    return list(found.values())


def must_requirements(path: Path = SPEC) -> list[Requirement]:
    return [r for r in parse(path) if r.must]
