"""pytest plugin (entry point pytest11): `pytest --ipc-impl NAME` runs the suite against NAME.

Options select the implementation, transports and manifest; the suite's tests
(conformance/suite) are parametrized from the manifest at collection time, and
every check's outcome is recorded under its id (Required.<Area>.<Struct>.<Check>).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import pytest

from conformance import expectations, profiles, report
from conformance.session import TRANSPORT_CHOICES, Session

_KEY = pytest.StashKey[Session]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ipc-conformance")
    group.addoption("--ipc-impl", default="reference", help="implementation under test (default: reference)")
    group.addoption("--ipc-transport", default=os.environ.get("IPC_CONFORMANCE_TRANSPORT", "both"),
                    choices=TRANSPORT_CHOICES,
                    help="transports to check (default: env IPC_CONFORMANCE_TRANSPORT, else both)")
    group.addoption("--ipc-manifest", default=None, help="manifest id or file (default: the implementation's)")
    group.addoption("--ipc-hypothesis-profile", default=None, choices=("dev", "ci", "thorough"),
                    help="generated-value effort (default: ci when CI is set, else dev)")
    group.addoption("--ipc-expectations", default=None,
                    help="expected-failure list (default: conformance/expectations/<impl>.txt)")
    group.addoption("--ipc-fix-expectations", action="store_true",
                    help="rewrite the expected-failure list from this run's failures")
    group.addoption("--ipc-report", default=None, help="write JSON results (one record per check) here")
    group.addoption("--ipc-report-dir", default=None,
                    help="write results.json, report.md, report.html and badge.json here")
    group.addoption("--ipc-strict", action="store_true",
                    help="Recommended checks (e.g. security) fail the run too")
    group.addoption("--ipc-e2e", action="store_true",
                    help="also run the E2E checks: start the implementation's server per transport (about a minute)")
    group.addoption("--ipc-summary", default="terminal", choices=("terminal", "caller"), help=argparse.SUPPRESS)
    # Test hook: the Generated checks append a digest of every value they draw to this file.
    group.addoption("--ipc-record-draws", default=None, help=argparse.SUPPRESS)


def pytest_configure(config: pytest.Config) -> None:
    _results.clear()
    config.stash[_KEY] = Session(
        impl=config.getoption("--ipc-impl"),
        transport=config.getoption("--ipc-transport"),
        manifest_id=config.getoption("--ipc-manifest"),
        profile=profiles.chosen(config.getoption("--ipc-hypothesis-profile")),
    )
    config.addinivalue_line("markers", "ipc_check: a conformance check (its id is the test parameter)")
    config.addinivalue_line("markers", "ipc_e2e: an end-to-end check (a real server); runs only with --ipc-e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """E2E checks are opt-in (--ipc-e2e): without it they are deselected, so the default run stays fast."""
    if config.getoption("--ipc-e2e"):
        return
    kept = [item for item in items if item.get_closest_marker("ipc_e2e") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("ipc_e2e")])
        items[:] = kept


def session_of(config: pytest.Config) -> Session:
    return config.stash[_KEY]


@pytest.fixture(scope="session")
def ipc(request: pytest.FixtureRequest) -> Session:
    """The conformance run: adapter, manifest, transports and canonical instances."""
    return session_of(request.config)


AxisValues = Callable[[Session], Sequence[str]]


def check(area: str, *, per: tuple[str, ...] = ("struct",), level: str = "Required", name: str = "",
          cases: Optional[Mapping[str, AxisValues]] = None) -> Any:
    """Declare a suite test as a conformance check, parametrized over the axes in `per`:
    struct, live_struct, transport, variant, primitive, or an axis of its own given in
    `cases` (axis -> function of the session giving its values). The first axis names the
    subject: ids read Level.Area.<subject>.Name[.<other axes>...]."""

    def mark(fn: Any) -> Any:
        fn._ipc_check = (level, area, per, name or fn.__name__.removeprefix("test_"), dict(cases or {}))
        return pytest.mark.ipc_check(level=level)(fn)

    return mark


def _axis_values(ipc: Session, axis: str, cases: Mapping[str, AxisValues]) -> Sequence[Any]:
    if axis in cases:
        return list(cases[axis](ipc))
    return {
        "struct": lambda: ipc.message_names,
        "live_struct": lambda: ipc.all_message_names,
        "transport": lambda: list(ipc.transports),
        "variant": lambda: list(ipc.variants),
        "primitive": lambda: list(PRIMITIVE_SAMPLES),
    }[axis]()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    spec = getattr(metafunc.function, "_ipc_check", None)
    if spec is None:
        return
    level, area, per, name, cases = spec
    ipc = session_of(metafunc.config)
    combos: list[dict[str, Any]] = [{}]
    for axis in per:
        combos = [{**c, axis: v} for c in combos for v in _axis_values(ipc, axis, cases)]
    ids = []
    for c in combos:
        subject = str(c[per[0]]) if per else "All"
        suffix = "".join(f".{c[a]}" for a in per[1:])
        ids.append(f"{level}.{area}.{subject}.{name}{suffix}")
    if per:
        metafunc.parametrize(list(per), [tuple(c[a] for a in per) for c in combos], ids=ids)
    else:
        metafunc.parametrize("ipc_check_id", [ids[0]], ids=ids)


def failure_message(what: str, diffs: Sequence[str], shown: int = 10) -> str:
    """A check's failure: what changed and the first differing path on the FIRST line (the
    line expected-failure lists match), then the next differences, one per line."""
    if len(diffs) == 1:
        return f"{what} at {diffs[0]}"
    return f"{what} at {diffs[0]} (+{len(diffs) - 1} more)\n  " + "\n  ".join(diffs[1:shown])


#: Top-level primitives every implementation must carry (defect class 5: str).
PRIMITIVE_SAMPLES: dict[str, Any] = {
    "int": -(2**63),
    "float": -0.0,
    "bool": True,
    "bytes": b"\x00\xff",
    "None": None,
    "str": "héllo 漢字",
}


def _check_id(nodeid: str) -> str | None:
    item_id = nodeid.rpartition("[")[2].rstrip("]") if "[" in nodeid else None
    return item_id if item_id and item_id.startswith(("Required.", "Recommended.")) else None


def _expectations(config: pytest.Config) -> expectations.Expectations:
    ipc = session_of(config)
    if ipc.expectations is None:
        explicit = config.getoption("--ipc-expectations")
        path = Path(explicit) if explicit else expectations.path_for([ipc.adapter.label, ipc.adapter.name])
        ipc.expectations_path = path or expectations.HERE / f"{ipc.adapter.label}.txt"
        ipc.expectations = expectations.load(path)
    return ipc.expectations


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    report = outcome.get_result()
    check_id = _check_id(report.nodeid)
    if report.when != "call" or check_id is None:
        return
    if report.failed and harness_error(call.excinfo.value if call.excinfo else None):
        # The testee crashed, hung or broke the protocol: no verdict on the check was
        # reached, so this is a failure whatever the check's level or the list says.
        report.ipc_message = HARNESS_ERROR + _message(report)
        return
    expected = _expectations(item.config).get(check_id)
    if expected is None:
        if report.failed and check_id.startswith("Recommended.") and not item.config.getoption("--ipc-strict"):
            # Recommended: reported and counted on its own, but only fails the run in strict
            # mode, so pytest sees it as skipped (its exit status then agrees with the summary).
            report.ipc_message = _message(report)
            report.ipc_recommended = True
            report.outcome = "skipped"
            report.longrepr = (str(item.path), 0, f"Recommended check failed (fails with --strict): {report.ipc_message}")
        return
    ipc = session_of(item.config)
    reason = expected.explains(_message(report)) if report.failed else None
    if reason is not None:
        report.outcome = "skipped"
        report.wasxfail = reason
        report.ipc_message = _message_of_failure(call)
    elif report.passed and ".Generated." in check_id:
        # A search that met no counterexample proves nothing (even derandomized, hypothesis
        # bounds its effort by time, so a loaded machine draws less): noted, never failed.
        report.ipc_message = "listed generated failure not reproduced this run"
    elif report.passed:
        report.outcome = "failed"
        fix = "remove it" if expected.own else "narrow the globs of " + expected.describe()
        report.longrepr = (f"{check_id} is listed in {ipc.expectations_path} but passed: {fix} "
                           "(ipc-conformance run --fix-expectations)")
    else:
        # Keep the actual error in front: the list only tells what was expected instead.
        listed = f"(listed in {ipc.expectations_path} as failing with: {expected.describe()})"
        report.ipc_message = f"{_message(report)} {listed}"
        report.longrepr = f"{report.longrepr}\n{listed}"


HARNESS_ERROR = "harness error: "


def harness_error(exc: Optional[BaseException]) -> bool:
    """Whether exc is (or was caused by) a harness failure: the testee crashed, timed out
    or broke the protocol. Such a failure is never skipped, expected or merely recommended."""
    from conformance.testee.adapter import TesteeRuntimeError
    from conformance.testee.protocol import ProtocolError

    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, (TesteeRuntimeError, ProtocolError)):
            return True
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]
    return False


def _message_of_failure(call: pytest.CallInfo) -> str:
    return call.excinfo.exconly() if call.excinfo else ""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    check_id = _check_id(report.nodeid)
    if not check_id:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        xfailed = bool(getattr(report, "wasxfail", "")) and report.skipped
        recommended = getattr(report, "ipc_recommended", False)
        _results.append({
            "id": check_id,
            "outcome": "xfailed" if xfailed else "recommended-failed" if recommended else report.outcome,
            "message": getattr(report, "ipc_message", "") or _message(report),
            **({"reason": report.wasxfail} if xfailed else {}),
        })
    elif report.when == "teardown" and report.failed:
        # An error after the check (e.g. stopping a crashed testee) fails pytest's run: the
        # check's record must say so too, or the summary and the exit status disagree.
        record = next((r for r in reversed(_results) if r["id"] == check_id), None)
        if record is None:
            _results.append({"id": check_id, "outcome": "failed", "message": "teardown: " + _message(report)})
        else:
            record.update(outcome="failed", message=f"{record['message']}\nteardown: {_message(report)}".strip())


def pytest_collectreport(report: pytest.CollectReport) -> None:
    # A suite module that cannot be collected runs none of its checks: a failure of the run.
    if report.failed:
        _results.append({"id": "Required.Harness.Collection.Collects", "outcome": "failed",
                         "message": f"{report.nodeid}: {_message(report)}"})


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if not _results:
        return
    ipc = session_of(config)
    meta = {"impl": ipc.adapter.label, "manifest": ipc.manifest.id, "transport": ipc.transport}
    if config.getoption("--ipc-report"):
        Path(config.getoption("--ipc-report")).write_text(json.dumps(report.results_json(meta, _results), indent=1))
    if config.getoption("--ipc-report-dir"):
        report.write_all(Path(config.getoption("--ipc-report-dir")), meta, _results, ipc.pickle_residue())
    if not config.getoption("--ipc-fix-expectations"):
        return
    previous = _expectations(config)
    # A harness error can never be an expected failure: it is not written into the list.
    failing = {r["id"]: r["message"] for r in _results if r["outcome"] in ("failed", "xfailed")
               and not r["message"].endswith("(ipc-conformance run --fix-expectations)")
               and not r["message"].startswith(HARNESS_ERROR)}
    expectations.write(ipc.expectations_path, failing, previous,
                       f"expected failures of {ipc.adapter.label} against {ipc.manifest.id}")


_results: list[dict[str, Any]] = []


def results() -> list[dict[str, Any]]:
    return _results


def _message(report: Any) -> str:
    if report.passed:
        return ""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    if isinstance(report.longrepr, tuple):  # skipped: (file, line, reason)
        return str(report.longrepr[2])
    return str(report.longrepr).splitlines()[-1] if report.longrepr else ""


def expected_line(records: list[dict[str, Any]]) -> str:
    """The line before the summary: what failed without failing the run."""
    line = f"expected failures: {sum(r['outcome'] == 'xfailed' for r in records)}"
    unreproduced = sum(r["message"] == "listed generated failure not reproduced this run" for r in records)
    if unreproduced:
        line += f", listed generated failures not reproduced: {unreproduced}"
    recommended = sum(r["outcome"] == "recommended-failed" for r in records)
    return line + (f", recommended checks failed: {recommended} (fail the run with --strict)" if recommended else "")


def counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """passed / failed / skipped as the summary line counts them: expected failures and
    recommended checks that failed are none of these (the line before counts them)."""
    return {k: sum(r["outcome"] == k for r in records) for k in ("passed", "failed", "skipped")}


def summary_line(records: list[dict[str, Any]]) -> str:
    c = counts(records)
    return f"conformance: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    # `ipc-conformance run` prints the line itself, as the very last line.
    if _results and config.getoption("--ipc-summary") == "terminal":
        terminalreporter.write_line(expected_line(_results))
        terminalreporter.write_line(summary_line(_results))
