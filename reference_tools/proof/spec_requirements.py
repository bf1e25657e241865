"""The requirements of spec/SPEC.md, parsed from the text: id, summary, keyword level.

The parser belongs to the suite (conformance/requirements.py, which the report site reads too);
this module keeps the proof tooling's names for it.
"""

from __future__ import annotations

from conformance.requirements import SPEC, Requirement, must_requirements, parse

__all__ = ["SPEC", "Requirement", "must_requirements", "parse"]
