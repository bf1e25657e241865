"""A static site comparing conformance runs: an overview of implementations x areas, a page
per implementation (failures first, then its struct x check matrices and pickle residue) and a
page per check across the implementations. Built from results.json files; no server, no script.
"""

from __future__ import annotations

from conformance.site.render import build_site, single_run_html

__all__ = ["build_site", "single_run_html"]
