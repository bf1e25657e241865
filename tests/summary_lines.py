"""The lines a conformance run ends with, spelled out here (not read from the code), so a test
that compares them catches any drift of the words."""

from __future__ import annotations


def summary(passed: int, failed: int, listed: int = 0, recommended: int = 0, not_tested: int = 0) -> str:
    """The last line; `failed` counts every failure, the `listed` ones among them."""
    return (f"conformance: {passed} passed, {failed} failed ({listed} listed), {recommended} recommended failed, "
            f"{not_tested} not tested")


def listed_line(listed: int = 0, unreproduced: int = 0, recommended: int = 0, flag: str = "--strict",
                passing: int = 0) -> str:
    """The line before it: the failures that do not fail the run (and the listed checks that passed)."""
    line = f"listed failures: {listed} (they do not fail the run)"
    if unreproduced:
        line += f", listed generated failures not reproduced: {unreproduced}"
    if passing:
        line += f", listed checks that passed: {passing} (they fail the run: remove their lines or narrow their causes)"
    if recommended:
        line += f", recommended checks failed: {recommended} (fail the run with {flag})"
    return line
