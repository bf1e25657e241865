"""A flat SVG badge per implementation, drawn here so the site needs no badge service."""

from __future__ import annotations

import html
from typing import Any

from conformance import report

#: shields.io's named colours, the ones report.badge chooses from.
COLOURS = {"brightgreen": "#4c1", "yellowgreen": "#a4a61d", "orange": "#fe7d37", "red": "#e05d44"}


def _width(text: str) -> int:
    # Verdana 11 px averages about 6.5 px a character; 10 px of padding either side.
    return int(len(text) * 6.5) + 20


def svg(records: list[dict[str, Any]]) -> str:
    """The badge report.badge describes (label, message, colour) as an SVG image."""
    b = report.badge(records)
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
