"""The options of a conformance run, written once: `ipc-conformance run --x` and `pytest --ipc-x`.

Each `RunOption` feeds argparse (the `run` subcommand), pytest's `addoption` and the runner's
translation of command-line values into pytest arguments. Only the standard library and the
profile names are imported here: pytest loads this module in every run of the environment.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from conformance.profiles import NAMES as PROFILE_NAMES

TRANSPORTS = ("pickle", "msgpack", "both")


def _transport_default() -> str:
    return os.environ.get("IPC_CONFORMANCE_TRANSPORT", "both")


@dataclass(frozen=True)
class RunOption:
    """One option. `name` is the CLI flag without dashes; pytest's flag is `--ipc-<name>`."""

    name: str
    help: str
    flag: bool = False  # store_true; else it takes a value
    choices: Optional[Sequence[str]] = None
    default: Union[str, None, Callable[[], str]] = None  # a callable is read when the run starts
    cli: bool = True  # offered by `ipc-conformance run`
    hidden: bool = False  # pytest only, internal: not shown in --help

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def cli_flag(self) -> str:
        return f"--{self.name}"

    @property
    def pytest_flag(self) -> str:
        return f"--ipc-{self.name}"

    def default_value(self) -> Any:
        if self.flag:
            return False
        return self.default() if callable(self.default) else self.default


OPTIONS: tuple[RunOption, ...] = (
    RunOption("impl", "implementation under test (default: reference)", default="reference"),
    RunOption("transport", "transports to check (default: env IPC_CONFORMANCE_TRANSPORT, else both)",
              choices=TRANSPORTS, default=_transport_default),
    RunOption("manifest", "manifest the catalogue is checked against (default: the implementation's)"),
    RunOption("expectations", "expected-failure list (default: conformance/expectations/<impl>.txt)"),
    RunOption("strict", "Recommended checks (security) fail the run too", flag=True),
    RunOption("hypothesis-profile", "generated-value effort: dev (default), ci (derandomized; "
              "the default when CI is set), thorough", choices=PROFILE_NAMES),
    RunOption("e2e", "also run the E2E checks (Required.E2E.*): start the implementation's server once per "
              "transport with its IPC tap on and send a fixed scenario (about a minute on 2 cores); "
              "only those: select them with -k E2E", flag=True),
    RunOption("fix-expectations", "rewrite the expected-failure list from this run's failures", flag=True),
    RunOption("peer", "also check every message against a peer on this bundled release (e.g. sglang-0.5.22), "
              "both directions (Recommended.Peer.*)"),
    RunOption("report", "write JSON results (one record per check) here"),
    RunOption("report-dir", "write results.json, report.md, report.html and badge.json here"),
    # Who prints the summary lines: pytest's terminal, or `ipc-conformance run` as its last lines.
    RunOption("summary", "", choices=("terminal", "caller"), default="terminal", cli=False, hidden=True),
    # Test hook: the Generated checks append a digest of every value they draw to this file.
    RunOption("record-draws", "", cli=False, hidden=True),
)
BY_DEST: Mapping[str, RunOption] = {o.dest: o for o in OPTIONS}


def add_to_argparse(parser: argparse.ArgumentParser) -> None:
    """The `run` subcommand's options (defaults resolved now, so --help shows them)."""
    for o in OPTIONS:
        if not o.cli:
            continue
        if o.flag:
            parser.add_argument(o.cli_flag, action="store_true", help=o.help)
        else:
            parser.add_argument(o.cli_flag, choices=o.choices, default=o.default_value(), help=o.help)


def add_to_pytest(group: Any) -> None:
    """pytest's `--ipc-*` options. Value options default to None here, so the run can tell
    an option given from one left out; `values()` fills the table's defaults in."""
    for o in OPTIONS:
        help_text = argparse.SUPPRESS if o.hidden else o.help
        if o.flag:
            group.addoption(o.pytest_flag, action="store_true", dest=f"ipc_{o.dest}", help=help_text)
        else:
            group.addoption(o.pytest_flag, choices=o.choices, default=None, dest=f"ipc_{o.dest}", help=help_text)


def given(getoption: Callable[[str], Any], dest: str) -> bool:
    """Whether pytest was given the option (its value differs from 'left out')."""
    return getoption(f"ipc_{dest}") not in (None, False)


def values(getoption: Callable[[str], Any]) -> dict[str, Any]:
    """Every option's value under its dest, from pytest's config.getoption, defaults filled in."""
    out = {}
    for o in OPTIONS:
        value = getoption(f"ipc_{o.dest}")
        out[o.dest] = o.default_value() if value is None else value
    return out


def pytest_args(chosen: Mapping[str, Any]) -> list[str]:
    """The `--ipc-*` arguments for the values `ipc-conformance run` was given (by dest)."""
    args: list[str] = []
    for dest, value in chosen.items():
        o = BY_DEST[dest]
        if o.flag:
            args += [o.pytest_flag] if value else []
        elif value is not None:
            args += [o.pytest_flag, str(value)]
    return args
