"""JUnit XML for CI dashboards: each conformance check is one testcase named by its check id.

pytest's --junitxml names a testcase after the test function and its parameter
(`test_roundtrip[Required.RoundTrip.X.Identical.msgpack.edge]`, class `test_roundtrip`);
dashboards group by class and show the name, so the file is rewritten once pytest wrote it:
name = the check id, classname = Level.Area. Other testcases are left as they are.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from conformance.plugin.checks import check_id_of


def name_by_check_id(path: Path) -> int:
    """Rename the check testcases of a JUnit XML file in place; returns how many were renamed."""
    tree = ET.parse(path)
    renamed = 0
    for case in tree.iter("testcase"):
        check_id = check_id_of(f"{case.get('classname', '')}::{case.get('name', '')}")
        if check_id is None:
            continue
        level, area = check_id.split(".")[:2]
        case.set("classname", f"{level}.{area}")
        case.set("name", check_id)
        renamed += 1
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return renamed
