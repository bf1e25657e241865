"""`ipc-conformance run`: the suite under pytest (serial, or on pytest-xdist workers with
-n), then the conformance summary as the last lines.

The last line is one of three, and no two can be read as each other:
`conformance: P passed, F failed (L listed), R recommended failed, N not tested` (the run ran),
`conformance: error: ...` (a usage error: nothing ran, exit status 2; or a run that stopped
before its end, pytest's exit status 2 or 3), and
`conformance: no checks selected ...` (the selection matched no check, exit status 5)."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import Any, Optional, Sequence

import pytest

from conformance.errors import USAGE_EXIT
from conformance.plugin import options
from conformance.plugin.summary import closing_lines, error_line
from conformance.records import CheckRecord, counts

SUITE = Path(__file__).resolve().parent / "suite"
PLUGIN = "conformance.plugin.hooks"


def _plugin_autoloaded() -> bool:
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return any(ep.value.startswith("conformance.plugin") for ep in importlib.metadata.entry_points(group="pytest11"))


class _Records:
    """Keeps the pytest config, to read the run's records after pytest.main returns."""

    config: Optional[pytest.Config] = None

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config

    def records(self) -> list[CheckRecord]:
        from conformance.plugin.hooks import run_of

        run = run_of(self.config, start=False) if self.config is not None else None
        return run.records if run is not None else []

    def usage_error(self) -> str:
        """The user's mistake the run stopped on ('' when none was recorded)."""
        from conformance.plugin.hooks import run_of

        run = run_of(self.config, start=False) if self.config is not None else None
        return run.usage_error if run is not None else ""


#: pytest's exit status when no test was selected; `ipc-conformance run` keeps it (documented)
NO_CHECKS_EXIT = int(pytest.ExitCode.NO_TESTS_COLLECTED)
NO_CHECKS_LINE = "conformance: no checks selected (nothing ran; exit status 5)"


def parallel_args(workers: Optional[str], pytest_args: Sequence[str]) -> list[str]:
    """pytest-xdist's arguments for -n. Under --dist loadgroup the plugin's scheduler
    (plugin/parallel.py) keeps the E2E checks on one worker, so one run starts one server per
    transport; every other check is a unit of its own, as with --dist load."""
    if not workers:
        return []
    dist = [] if any(a == "--dist" or a.startswith("--dist=") for a in pytest_args) else ["--dist", "loadgroup"]
    return ["-n", str(workers), *dist]


def run(*, pytest_args: Sequence[str] = (), workers: Optional[str] = None, **chosen: Any) -> int:
    """Run the suite. `chosen`: run options by dest, as the option table names them
    (conformance/plugin/options.py: impl, transport, manifest, report, report_dir, strict, ...);
    the plugin gives those left out the table's defaults."""
    offered = {o.dest for o in options.OPTIONS if o.cli}
    unknown = sorted(set(chosen) - offered)
    if unknown:
        raise TypeError(f"run() got unknown options {unknown}; the run options are {sorted(offered)}")
    chosen = {**chosen, "summary": "caller"}
    # pytest's own failure report would print each failure twice, the second copy cut (--tb=line
    # writes the report, then its first 50 characters): the plugin prints each failure's whole
    # message once instead (hooks.RunHooks.pytest_terminal_summary), unless the user asks for --tb.
    tb = [] if any(a == "--tb" or a.startswith("--tb=") for a in pytest_args) else ["--tb=no"]
    # ... and pytest's short summary would print each failure again (whole where CI is set): with
    # the plugin's report, pytest's own lists failures no more (-rE: errors still), unless asked.
    if tb and not any(a.startswith("-r") for a in pytest_args):
        tb.append("-rE")
    # The checks fail through conformance/suite/failure.py, never a bare assert
    # (tests/test_failure_helper.py): pytest's assertion rewriting would only cost time, rewriting
    # the suite and every module of the plugins' distributions (hypothesis's 200 among them) at
    # each start where bytecode is not cached (PYTHONDONTWRITEBYTECODE, a read-only install).
    rewrite = [] if any(a == "--assert" or a.startswith("--assert=") for a in pytest_args) else ["--assert=plain"]
    # pytest's unraisable-exception plugin collects the garbage at the end of the run to report what
    # a __del__ raised, as warnings no verdict reads: with torch loaded that is half a second of
    # every run (Python's own hook still prints such an exception to stderr).
    unraisable = [] if any("unraisableexception" in a for a in pytest_args) else ["-p", "no:unraisableexception"]
    args = [
        str(SUITE), "-q", *tb, "-p", "no:cacheprovider", "--rootdir", str(SUITE), *rewrite, *unraisable,
        "-W", "ignore::pytest.PytestAssertRewriteWarning",
        # By name, not as an object: pytest-xdist's workers load the plugins the arguments name.
        *([] if _plugin_autoloaded() else ["-p", PLUGIN]),
        *options.pytest_args(chosen),
        *parallel_args(workers, pytest_args),
        *pytest_args,
    ]
    kept = _Records()
    code = pytest.main(args, plugins=[kept])
    records = kept.records()
    if code == pytest.ExitCode.USAGE_ERROR:
        # pytest printed the one line that says what was wrong; the last line says it again, so a
        # job that reads only the last line never takes a run that did not start for a clean one
        print(error_line(kept.usage_error() or "the arguments given to pytest were refused (see the message above)"))
        return USAGE_EXIT
    if code == pytest.ExitCode.NO_TESTS_COLLECTED and not records:
        print(NO_CHECKS_LINE)
        return NO_CHECKS_EXIT
    for line in closing_lines(records):
        print(line)
    if code in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
        # the counts above are of the checks that ran before it stopped: never the last word
        print(error_line(f"the run stopped before its end (pytest exit status {int(code)}): the counts above are "
                         "of the checks that ran"))
        return int(code)
    if code == pytest.ExitCode.OK and counts(records).failed:
        return int(pytest.ExitCode.TESTS_FAILED)  # the summary's failures decide, never a lenient hook
    return int(code)
