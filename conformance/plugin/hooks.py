"""The pytest hooks of the suite (entry point pytest11 `ipc_conformance`).

pytest loads this module in every run of an environment the package is installed in, so it
stays inert until a conformance run is asked for: it imports only the option table and the
check declarations, and starts the run (run.ConformanceRun, holding the session) when
an --ipc-* option is given or a conformance check is collected. Only then are the hooks that
record outcomes and write reports (RunHooks) registered; each hands off to the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import pytest

from conformance.plugin import options
from conformance.plugin.checks import check_id_of, is_check, parametrize

if TYPE_CHECKING:
    from conformance.plugin.run import ConformanceRun
    from conformance.session import Session

RUN_KEY = pytest.StashKey["ConformanceRun"]()
SUITE_PACKAGE = "conformance/suite/"


def run_of(config: pytest.Config, *, start: bool = True) -> Optional[ConformanceRun]:
    """The conformance run of this pytest run: started on first need, or None when
    start=False and none was asked for."""
    run = config.stash.get(RUN_KEY, None)
    if run is None and start:
        from conformance.plugin.run import ConformanceRun

        run = config.stash[RUN_KEY] = ConformanceRun(options.values(config.getoption))
        config.pluginmanager.register(RunHooks(config, run), "ipc-conformance-run")
    return run


def known_triggers(config: pytest.Config, check_id: str) -> tuple[str, ...]:
    """The triggers of the known defects the expected-failure list names for a check (its
    cause lines' ``trigger:``): what a Generated check leaves out of its draws."""
    run = run_of(config, start=False)
    listing = run.expectations.get(check_id) if run is not None else None
    return listing.triggers if listing is not None else ()


def known_cause(config: pytest.Config, check_id: str, exc: BaseException) -> Optional[str]:
    """The reason the expected-failure list gives for this failure of a check (None: not
    listed, or listed as failing otherwise): a Generated check stops its search there."""
    run = run_of(config, start=False)
    if run is None:
        return None
    from conformance.plugin.verdicts import explained

    return explained(run, check_id, exc)


def _run(config: pytest.Config) -> ConformanceRun:
    run = run_of(config)
    assert run is not None
    return run


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_to_pytest(parser.getgroup("ipc-conformance"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ipc_check: a conformance check (its id is the test parameter)")
    config.addinivalue_line("markers", "ipc_e2e: an end-to-end check (a real server); runs only with --ipc-e2e")
    if any(options.given(config.getoption, o.dest) for o in options.OPTIONS):
        run_of(config)  # an --ipc-* option asks for a run (the xdist controller collects nothing)


@pytest.fixture(scope="session")
def ipc(request: pytest.FixtureRequest) -> Session:
    """The conformance run: adapter, manifest, transports and canonical instances."""
    return _run(request.config).session


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if is_check(metafunc.function):
        parametrize(metafunc, _run(metafunc.config).session)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    outcome = yield
    # A suite module that cannot be imported collects no check: the run must start anyway
    # to count it as a failure (RunHooks.pytest_collectreport).
    if outcome.get_result().failed and SUITE_PACKAGE in str(collector.path).replace("\\", "/"):
        run_of(collector.config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    # pytest-xdist's controller collects nothing itself: its workers' ids tell it a run is on.
    if any(check_id_of(nodeid) for nodeid in ids):
        run_of(node.config)


class RunHooks:
    """The hooks of a started run (registered by run_of); pytest-xdist's controller runs
    them on the reports its workers send."""

    def __init__(self, config: pytest.Config, run: ConformanceRun) -> None:
        self.config = config
        self.run = run

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """E2E checks are opt-in (--ipc-e2e): without it they are deselected, so the default
        run stays fast. A check with no case in this run (an empty parametrization, e.g. the
        Peer checks without --peer) is deselected too: pytest would run it as one skipped
        'NOTSET' test that is no check, and its skip count would differ from the run's."""
        def unwanted(item: pytest.Item) -> bool:
            if item.get_closest_marker("ipc_e2e") is not None and not self.run.options["e2e"]:
                return True
            return item.get_closest_marker("ipc_check") is not None and check_id_of(item.nodeid) is None

        drop = [unwanted(item) for item in items]
        if any(drop):
            self.config.hook.pytest_deselected(items=[item for item, d in zip(items, drop) if d])
            items[:] = [item for item, d in zip(items, drop) if not d]

    def _attach_identities(self, items: list[pytest.Item]) -> None:
        """Each check's identity travels with its reports (to a pytest-xdist controller too), as
        data. Attached to the checks that will run (after -k and -m deselected the others)."""
        import json

        from conformance.plugin.checks import identity_fields
        from conformance.plugin.verdicts import CHECK

        for item in items:
            fields = identity_fields(item)
            if fields is not None:
                item.user_properties.append((CHECK, json.dumps(fields)))

    def pytest_sessionstart(self) -> None:
        """A user's mistake (an unknown --impl or manifest, a testee that does not start) ends
        the run here, before collection, with one line (pytest's usage error, exit status 4;
        `ipc-conformance run` exits 2), not with an error per suite module. pytest-xdist's
        controller runs no check, so it only resolves the names; its workers start the adapter."""
        from conformance.errors import UsageError

        try:
            self.run.preflight(start=not self.config.pluginmanager.has_plugin("dsession"))
        except UsageError as exc:
            self.run.usage_error = str(exc)
            raise pytest.UsageError(str(exc)) from None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The header's line on spec versions: the suite's, the implementation's target, and how
        many selected checks are newer than it (a pytest-xdist controller, which collects nothing,
        prints it with the summary instead)."""
        self._attach_identities(session.items)
        if hasattr(self.config, "workerinput"):
            return
        ids = [c for c in (check_id_of(item.nodeid) for item in session.items) if c]
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if ids and reporter is not None:
            reporter.write_line(self.run.versions_line(ids))
            for line in self.run.catalogue_lines():
                reporter.write_line(line)
            self.run.versions_shown = True

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Under --dist loadgroup (what `ipc-conformance run -n` asks for), the E2E checks
        run on one worker, so a run starts one server per transport, as a serial run does."""
        if config.getvalue("dist") != "loadgroup":
            return None
        from conformance.plugin.parallel import E2ETogetherScheduling

        return E2ETogetherScheduling(config, log)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if check_id_of(item.nodeid) is not None:
            self.run.start_check()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        outcome = yield
        report = outcome.get_result()
        check_id = check_id_of(report.nodeid) if report.when == "call" else None
        if check_id is not None:
            from conformance.plugin import verdicts

            verdicts.judge(self.run, check_id, report, call, item)

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> Optional[tuple[str, str, str]]:
        """pytest's line counts the checks in the suite's words (records.Counts): a Recommended
        check that failed (outside --strict) as 'recommended failed', a listed failure as
        'failed (listed)', a check that was skipped as 'not tested'."""
        from conformance.plugin import verdicts
        from conformance.records import Outcome

        if check_id_of(report.nodeid) is None:
            return None
        if report.when == "call" and verdicts.outcome_of(report) is Outcome.RECOMMENDED_FAILED:
            return verdicts.RECOMMENDED_STATUS
        if report.skipped and hasattr(report, "wasxfail"):
            return verdicts.LISTED_STATUS
        if report.skipped:
            return verdicts.NOT_TESTED_STATUS
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Before pytest's --junitxml writer sees the report: its testcase is named by the check id.
        from conformance.plugin.junit import name_testcase

        name_testcase(self.config, report)
        self.run.record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.run.record_collection_error(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.run.merge_worker(getattr(node, "workeroutput", {}).get("ipc_conformance"))

    @pytest.hookimpl(tryfirst=True)  # before pytest's JUnit writer writes its file: it carries the counts
    def pytest_sessionfinish(self) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:  # a pytest-xdist worker: the controller writes the files
            workeroutput["ipc_conformance"] = self.run.worker_output()
        else:
            self.run.finish()
            from conformance.plugin.junit import add_counts

            add_counts(self.config, self.run.records)

    def _short_summary(self, terminalreporter: Any) -> None:
        """What pytest's -rs and -rx list, for checks pytest counts under the suite's words ('not
        tested', 'failed (listed)') and so no longer lists itself: each check and why."""
        from _pytest.terminal import getreportopt

        from conformance.records import Outcome

        chars = getreportopt(self.config)
        for char, outcome, word in (("s", Outcome.SKIPPED, "NOT TESTED"), ("x", Outcome.XFAILED, "FAILED (LISTED)")):
            shown = [r for r in self.run.records if r.outcome is outcome]
            if char in chars and shown:
                terminalreporter.write_sep("=", word.lower())
                for r in shown:
                    why = r.reason if outcome is Outcome.XFAILED else (r.message.strip().splitlines() or [""])[0]
                    terminalreporter.write_line(f"{word} {r.id}: {why.removeprefix('Skipped: ')}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        versions = self.run.final_versions_line()
        if versions:
            terminalreporter.write_line(versions)
        if self.run.rewrite_line:
            terminalreporter.write_line(self.run.rewrite_line)
        # `ipc-conformance run` prints the lines itself, as the very last lines.
        from conformance.plugin.summary import closing_lines, recommended_lines
        from conformance.records import Outcome

        if self.run.via_cli and self.config.getoption("tbstyle", "auto") == "no":
            # `ipc-conformance run` turns pytest's failure report off: each message once, whole
            failed = [r for r in self.run.records if r.outcome is Outcome.FAILED]
            if failed:
                terminalreporter.write_sep("=", f"failures ({len(failed)})")
                for r in failed:
                    terminalreporter.write_line(f"FAILED {r.id}")
                    terminalreporter.write_line("  " + (r.message.rstrip() or "(no message)"))
        self._short_summary(terminalreporter)
        shown = recommended_lines(self.run.records, self.run.flag_for("strict"))
        if shown:  # what pytest's -r summary shows of failures, for the checks it counts on their own
            terminalreporter.write_sep("=", "recommended checks failed")
            for line in shown:
                terminalreporter.write_line(line)
        if self.run.records and not self.run.via_cli:
            for line in closing_lines(self.run.records, self.run.flag_for("strict")):
                terminalreporter.write_line(line)
