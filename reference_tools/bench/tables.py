"""The benchmarks' tables, as aligned text or as Markdown (one place for both layouts)."""

from __future__ import annotations


def text_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell, a dashed rule under the header."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    return lines + ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table; a "|" inside a cell is escaped so that it stays in its cell."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
