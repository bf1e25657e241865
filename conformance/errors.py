"""The error a user's own mistake raises: one line that names what was wrong and what would be
right. The command line prints it without a traceback and exits 2; the pytest plugin turns it
into pytest's usage error."""

from __future__ import annotations

__all__ = ["USAGE_EXIT", "UsageError", "invalid_member"]

#: The exit status of a user mistake (argparse's, and the CLI's for every subcommand).
USAGE_EXIT = 2


class UsageError(Exception):
    """What the user asked for cannot be done as asked (an unknown implementation, manifest id,
    path or option value; a testee that does not start). The message is the whole story."""


def invalid_member(exc: Exception) -> str:
    """A msgspec ValidationError as the tool's messages say it, the member first:
    "Expected `str`, got `int` - at `$.spec`" -> "'spec': Expected 'str', got 'int'"."""
    text, _, path = str(exc).partition(" - at `$")
    text = text.replace("`", "'")
    member = path.rstrip("`").lstrip(".")
    return f"'{member}': {text}" if member else text
