"""`ipc-conformance run`: the suite under pytest, then the conformance summary."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Optional, Sequence

import pytest

from conformance import plugin

SUITE = Path(__file__).resolve().parent / "suite"


def _plugin_autoloaded() -> bool:
    return any(ep.value.startswith("conformance.plugin") for ep in importlib.metadata.entry_points(group="pytest11"))


def run(
    impl: str = "reference",
    transport: str = "both",
    manifest: Optional[str] = None,
    report: Optional[str] = None,
    report_dir: Optional[str] = None,
    pytest_args: Sequence[str] = (),
    expectations: Optional[str] = None,
    fix_expectations: bool = False,
    strict: bool = False,
    hypothesis_profile: Optional[str] = None,
    e2e: bool = False,
) -> int:
    args = [
        str(SUITE), "-q", "--tb=line", "-p", "no:cacheprovider", "--rootdir", str(SUITE),
        "-W", "ignore::pytest.PytestAssertRewriteWarning",
        "--ipc-impl", impl, "--ipc-transport", transport, "--ipc-summary", "caller",
        *(["--ipc-manifest", manifest] if manifest else []),
        *(["--ipc-expectations", expectations] if expectations else []),
        *(["--ipc-report", report] if report else []),
        *(["--ipc-report-dir", report_dir] if report_dir else []),
        *(["--ipc-fix-expectations"] if fix_expectations else []),
        *(["--ipc-strict"] if strict else []),
        *(["--ipc-e2e"] if e2e else []),
        *(["--ipc-hypothesis-profile", hypothesis_profile] if hypothesis_profile else []),
        *pytest_args,
    ]
    extra_plugins = [] if _plugin_autoloaded() else [plugin]
    code = pytest.main(args, plugins=extra_plugins)
    records = plugin.results()
    print(plugin.expected_line(records))
    print(plugin.summary_line(records))
    if code == pytest.ExitCode.OK and plugin.counts(records)["failed"]:
        return int(pytest.ExitCode.TESTS_FAILED)  # the summary's failures decide, never a lenient hook
    return int(code)
