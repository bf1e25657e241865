"""The error a user's own mistake raises: one line that names what was wrong and what would be
right. The command line prints it without a traceback and exits 2; the pytest plugin turns it
into pytest's usage error."""

from __future__ import annotations

__all__ = ["USAGE_EXIT", "UsageError"]

#: The exit status of a user mistake (argparse's, and the CLI's for every subcommand).
USAGE_EXIT = 2


class UsageError(Exception):
    """What the user asked for cannot be done as asked (an unknown implementation, manifest id,
    path or option value; a testee that does not start). The message is the whole story."""
