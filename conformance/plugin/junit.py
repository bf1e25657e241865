"""JUnit XML for CI dashboards: each conformance check is one testcase named by its check id.

pytest's --junitxml names a testcase after the test function and its parameter
(`test_roundtrip[Required.RoundTrip.X.Identical.msgpack.edge]`, class `test_roundtrip`);
dashboards group by class and show the name, so a check's testcase gets name = the check id
and classname = Level.Area as pytest's writer records the report (the attributes pytest's
`record_xml_attribute` sets, set from the hook because under pytest-xdist only the controller
writes the file). The verdict's data reaches the testcase as its user properties
(plugin/verdicts.py). Other testcases are left as they are.
"""

from __future__ import annotations

from typing import Any

from conformance.plugin.checks import check_id_of


def name_testcase(config: Any, report: Any) -> None:
    """Name the testcase of a check's report in pytest's JUnit XML writer, when one is on."""
    try:
        # the writer's stash key: pytest offers no public accessor for it
        from _pytest.junitxml import xml_key
    except ImportError:  # a pytest that moved it: the file keeps pytest's own names
        return
    writer = config.stash.get(xml_key, None)
    check_id = check_id_of(report.nodeid) if writer is not None else None
    if check_id is None:
        return
    level, area = check_id.split(".")[:2]
    testcase = writer.node_reporter(report)
    testcase.add_attribute("classname", f"{level}.{area}")
    testcase.add_attribute("name", check_id)
