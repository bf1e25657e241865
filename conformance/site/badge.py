"""The run's badge: a shields.io endpoint description (badge.json) and the same badge as a flat
SVG, drawn here so the site needs no badge service."""

from __future__ import annotations

import html
from typing import Any, Iterable

from conformance.records import Counts, HasOutcome, counts

#: shields.io's named colours, the ones `endpoint` chooses from.
COLOURS = {"brightgreen": "#4c1", "orange": "#fe7d37", "red": "#e05d44", "lightgrey": "#9f9f9f"}


def colour(c: Counts) -> str:
    """red on any Required failure, listed or not (and on any failure that fails the run, such as a
    harness error); orange when only Recommended checks failed (or were listed as failing); grey
    when nothing was tested; green only when every check that ran passed."""
    if c.required_failed or c.failed:
        return "red"
    if c.recommended_failed or c.xfailed:
        return "orange"
    return "lightgrey" if not c.ran else "brightgreen"


def endpoint(records: Iterable[HasOutcome]) -> dict[str, Any]:
    """shields.io endpoint JSON: the colour above, and the run's counts as every report says them
    (records.Counts.brief): passed of those tested, failures with the listed ones among them,
    Recommended failures, checks not tested."""
    c = counts(records)
    return {"schemaVersion": 1, "label": "ipc conformance", "message": c.brief(), "color": colour(c)}


def _width(text: str) -> int:
    # Verdana 11 px averages about 6.5 px a character; 10 px of padding either side.
    return int(len(text) * 6.5) + 20


def svg(records: Iterable[HasOutcome]) -> str:
    """The badge `endpoint` describes (label, message, colour) as an SVG image."""
    b = endpoint(records)
    label, message = b["label"], b["message"]
    colour = COLOURS.get(b["color"], "#9f9f9f")
    lw, mw = _width(label), _width(message)
    w = lw + mw
    esc = html.escape
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="20" role="img" '
        f'aria-label="{esc(label)}: {esc(message)}"><title>{esc(label)}: {esc(message)}</title>'
        f'<rect width="{lw}" height="20" fill="#555"/><rect x="{lw}" width="{mw}" height="20" fill="{colour}"/>'
        f'<g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">'
        f'<text x="{lw / 2}" y="14">{esc(label)}</text><text x="{lw + mw / 2}" y="14">{esc(message)}</text></g></svg>'
    )
