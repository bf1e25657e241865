"""A check's verdict after pytest's: the expected-failure list, the check's level and
harness errors turn a raw pass/fail into what the run reports.

The verdict's data (its message, a Recommended failure, a note such as 'listed but passed')
travels as the test's user properties, pytest's own channel for them: set on the report and
the item, it crosses from a pytest-xdist worker to the controller with the reports and
reaches the JUnit XML as the testcase's <properties>."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from conformance.plugin.checks import HARNESS_ERROR, harness_error
from conformance.plugin.summary import NOT_REPRODUCED
from conformance.records import CheckIdentity, Note, Outcome

if TYPE_CHECKING:
    import pytest

    from conformance.plugin.run import ConformanceRun

#: user property names of a verdict, and of the check's identity (set at collection)
MESSAGE, OUTCOME, NOTE, CHECK = "ipc_message", "ipc_outcome", "ipc_note", "ipc_check"
#: pytest's report categories (the terminal's count, its letter and word) in the suite's words
#: (records.Counts): a Recommended failure, a listed failure, a check not tested
RECOMMENDED_STATUS = ("recommended failed", "R", "RECOMMENDED FAILED")
LISTED_STATUS = ("failed (listed)", "x", "FAILED (LISTED)")
NOT_TESTED_STATUS = ("not tested", "s", "NOT TESTED")


def fix_hint(run: ConformanceRun) -> str:
    command = "ipc-conformance run" if run.via_cli else "pytest"
    return f"({command} {run.flag_for('fix-expectations')})"


def _set(report: pytest.TestReport, item: Optional[pytest.Item], name: str, value: str) -> None:
    """A verdict property on the report (what the run records) and on the item (what its later
    reports, the teardown's among them, carry into the JUnit XML)."""
    for props in (report.user_properties, *([item.user_properties] if item is not None else [])):
        props[:] = [(k, v) for k, v in props if k != name] + [(name, value)]


def prop(report: Any, name: str) -> str:
    """A verdict property of a report ('' when unset)."""
    return next((str(v) for k, v in reversed(getattr(report, "user_properties", ())) if k == name), "")


def outcome_of(report: Any) -> Optional[Outcome]:
    """The outcome the verdict set, where it differs from pytest's own (a Recommended failure)."""
    value = prop(report, OUTCOME)
    return Outcome(value) if value else None


def identity_of(report: Any) -> Optional[CheckIdentity]:
    """The check's identity the item carried since collection (None for an item that had none)."""
    import json

    import msgspec

    value = prop(report, CHECK)
    return msgspec.convert(json.loads(value), CheckIdentity) if value else None


def note_of(report: Any) -> Optional[Note]:
    value = prop(report, NOTE)
    return Note(value) if value else None


def message_of(report: Any) -> str:
    """The first line pytest reports for a test that did not pass ('' when it passed)."""
    if report.passed:
        return ""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)
    if isinstance(report.longrepr, (tuple, list)):  # skipped: (file, line, reason)
        return str(report.longrepr[2])
    return str(report.longrepr).splitlines()[-1] if report.longrepr else ""


REPLAY = "  replay: "


def _with_replay(run: ConformanceRun, check_id: str, report: pytest.TestReport, message: str) -> str:
    """The failure's message with the command that runs the check again (added once, last)."""
    if report.passed or REPLAY in message:
        return message
    line = REPLAY + run.replay_command(check_id)
    if not isinstance(report.longrepr, (tuple, list)):  # a skip's (file, line, reason) stays one
        report.longrepr = f"{report.longrepr}\n{line}"
    return f"{message}\n{line}"


def _with_schema_hint(run: ConformanceRun, check_id: str, report: pytest.TestReport, message: str) -> str:
    """A failure of a struct the implementation's live catalogue changed says so (a new line:
    the expected-failure lists match the first)."""
    hint = run.schema_hint(check_id)
    if not hint or hint in message:
        return message
    if not isinstance(report.longrepr, (tuple, list)):
        report.longrepr = f"{report.longrepr}\n{hint}"
    return f"{message}\n{hint}"


def _differences_of(call: pytest.CallInfo[None]) -> list[str]:
    """The first line each difference of a suite failure (conformance/suite/failure.py) would
    have had alone; [] for any other failure."""
    failure = getattr(call.excinfo.value, "ipc_failure", None) if call.excinfo else None
    return failure.alone() if failure is not None and len(failure.differences) > 1 else []


def explained(run: ConformanceRun, check_id: str, exc: BaseException) -> Optional[str]:
    """The reason the expected-failure list gives for this failure of a check, judged as the
    verdict judges its report (the first line pytest reports; difference by difference for a
    suite failure with several), or None: what a Generated check's search stops at without
    shrinking (conformance/suite/test_generated.py)."""
    from pytest import ExceptionInfo

    expected = run.expectations.get(check_id)
    if expected is None or harness_error(exc):
        return None
    failure = getattr(exc, "ipc_failure", None)
    if failure is not None and len(failure.differences) > 1:
        return expected.explains_each(failure.alone())[0]
    if exc.__traceback__ is None:  # never raised: the first line pytest would report for it
        import traceback

        return expected.explains("".join(traceback.format_exception_only(type(exc), exc)).rstrip())
    return expected.explains(ExceptionInfo.from_exception(exc).exconly(tryshort=True))


def _newer_note(run: ConformanceRun, check_id: str) -> str:
    from conformance import spec_versions

    return spec_versions.failure_note(check_id, run.target_spec)


def judge(run: ConformanceRun, check_id: str, report: pytest.TestReport, call: pytest.CallInfo[None],
          item: Optional[pytest.Item] = None) -> None:
    """Rewrite the call-phase report of check `check_id` into the run's verdict."""
    def put(name: str, value: str) -> None:
        _set(report, item, name, value)

    _judge(run, check_id, report, call, put)
    if not prop(report, OUTCOME):  # every check's testcase says its outcome in the suite's words (JUnit)
        listed = bool(getattr(report, "wasxfail", "")) and report.skipped
        put(OUTCOME, (Outcome.XFAILED if listed else Outcome(report.outcome)).value)
    if call.excinfo is not None and (report.failed or outcome_of(report) is Outcome.RECOMMENDED_FAILED):
        message = _with_schema_hint(run, check_id, report, prop(report, MESSAGE) or message_of(report))
        put(MESSAGE, _with_replay(run, check_id, report, message))


def _judge(run: ConformanceRun, check_id: str, report: pytest.TestReport, call: pytest.CallInfo[None],
           put: Any) -> None:
    if report.failed and harness_error(call.excinfo.value if call.excinfo else None):
        # The testee crashed, hung or broke the protocol: no verdict on the check was
        # reached, so this is a failure whatever the check's level or the list says.
        put(MESSAGE, HARNESS_ERROR + message_of(report))
        put(NOTE, Note.HARNESS_ERROR.value)
        return
    expected = run.expectations.get(check_id)
    if expected is None:
        newer = _newer_note(run, check_id) if report.failed else ""
        if newer:
            # Newer than the spec version the implementation targets: it fails all the same
            # (SPEC §15), and says which version added it.
            put(MESSAGE, f"{message_of(report)} {newer}")
            report.longrepr = f"{report.longrepr}\n{newer}"
        if report.failed and check_id.startswith("Recommended.") and not run.options["strict"]:
            # Recommended: reported and counted on its own (pytest_report_teststatus gives it its
            # own category and letter), but only fails the run in strict mode. Like an xfail its
            # pytest outcome is the non-failing 'skipped', so the exit status agrees with the
            # summary; the (file, line, reason) form is what JUnit's <skipped> shows.
            message = prop(report, MESSAGE) or message_of(report)
            put(MESSAGE, message)
            put(OUTCOME, Outcome.RECOMMENDED_FAILED.value)
            report.outcome = "skipped"
            strict = run.flag_for("strict")
            report.longrepr = (str(report.location[0]), 0, f"Recommended check failed (fails with {strict}): {message}")
        return
    reason = expected.explains(message_of(report)) if report.failed else None
    each = _differences_of(call) if report.failed else []
    unexplained: list[str] = []
    if each:  # judged difference by difference: a known defect never hides a new one
        reason, unexplained = expected.explains_each(each)
        if len(unexplained) == len(each):
            unexplained = []  # nothing is explained: the plain 'listed, failing otherwise' below
    if reason is not None:
        report.outcome = "skipped"
        report.wasxfail = reason
        put(MESSAGE, call.excinfo.exconly() if call.excinfo else "")
    elif report.passed and ".Generated." in check_id:
        # A search that met no counterexample proves nothing (even derandomized, hypothesis
        # bounds its effort by time, so a loaded machine draws less): noted, never failed.
        put(MESSAGE, NOT_REPRODUCED)
        put(NOTE, Note.NOT_REPRODUCED.value)
    elif report.passed:
        report.outcome = "failed"
        fix = "remove it" if expected.own else "narrow the globs of " + expected.describe()
        report.longrepr = f"{check_id} is listed in {run.expectations_path} but passed: {fix} {fix_hint(run)}"
        put(NOTE, Note.LISTED_BUT_PASSED.value)
    elif unexplained:
        listed = (f"(listed in {run.expectations_path} as failing with: {expected.describe()}; "
                  f"{len(each) - len(unexplained)} of its {len(each)} differences are, these are not:\n    "
                  + "\n    ".join(unexplained) + ")")
        put(MESSAGE, f"{message_of(report)}\n  {listed}")
        report.longrepr = f"{report.longrepr}\n{listed}"
    else:
        # Keep the actual error in front: the list only tells what was expected instead.
        listed = f"(listed in {run.expectations_path} as failing with: {expected.describe()})"
        put(MESSAGE, f"{message_of(report)}\n  {listed}")
        report.longrepr = f"{report.longrepr}\n{listed}"
