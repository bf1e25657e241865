"""JUnit XML for CI dashboards: each conformance check is one testcase named by its check id.

pytest's --junitxml names a testcase after the test function and its parameter
(`test_roundtrip[Required.RoundTrip.X.Identical.msgpack.edge]`, class `test_roundtrip`);
dashboards group by class and show the name, so a check's testcase gets name = the check id
and classname = Level.Area as pytest's writer records the report (the attributes pytest's
`record_xml_attribute` sets, set from the hook because under pytest-xdist only the controller
writes the file). The verdict's data reaches the testcase as its user properties
(plugin/verdicts.py), `ipc_outcome` among them in the suite's words; the test suite's
<properties> carry the run's counts (records.Counts) as every other report reads them. Other
testcases are left as they are.
"""

from __future__ import annotations

from typing import Any, Sequence

from conformance.plugin.checks import check_id_of
from conformance.records import CheckRecord, counts


def name_testcase(config: Any, report: Any) -> None:
    """Name the testcase of a check's report in pytest's JUnit XML writer, when one is on."""
    try:
        # the writer's stash key: pytest offers no public accessor for it
        from _pytest.junitxml import xml_key
    except ImportError:  # a pytest that moved it: the file keeps pytest's own names
        return
    from conformance.plugin.verdicts import identity_of

    writer = config.stash.get(xml_key, None)
    check_id = check_id_of(report.nodeid) if writer is not None else None
    if check_id is None:
        return
    identity = identity_of(report)
    level, area = (identity.level, identity.area) if identity is not None else check_id.split(".")[:2]
    testcase = writer.node_reporter(report)
    testcase.add_attribute("classname", f"{level}.{area}")
    testcase.add_attribute("name", check_id)


def add_counts(config: Any, records: Sequence[CheckRecord]) -> None:
    """The run's counts as the JUnit file's global properties (`ipc_passed`, `ipc_failed` (every
    failure, listed or not), `ipc_listed`, `ipc_recommended_failed`, `ipc_not_tested`,
    `ipc_summary`), when pytest writes one: JUnit's own failures/skipped attributes count a
    listed failure as skipped."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:
        return
    writer = config.stash.get(xml_key, None)
    if writer is None or not records:
        return
    c = counts(records)
    for name, value in (("passed", c.passed), ("failed", c.failures), ("listed", c.listed),
                        ("recommended_failed", c.recommended_failed), ("not_tested", c.skipped),
                        ("summary", c.phrase())):
        writer.add_global_property(f"ipc_{name}", str(value))
