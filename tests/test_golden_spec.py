"""The written spec stays true to the code: SPEC.md's check index covers every suite check and
cites requirement ids that exist; the vector formats, JSON view markers and testee protocol
documented there are the ones the code uses."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conformance.schema.golden import view
from conformance.schema.golden.store import (
    FORMAT,
    INDEX,
    MSGPACK_SUFFIX,
    VECTORS,
    VIEW_SUFFIX,
    read_index,
    vector_paths,
)
from conformance.testee import protocol

ROOT = Path(__file__).resolve().parents[1]
SPEC = (ROOT / "spec" / "SPEC.md").read_text()
TESTEE = (ROOT / "spec" / "testee.md").read_text()
DEFINED = re.findall(r"\*\*\[(R-[A-Z]+-\d+)\]\*\*", SPEC)


def _suite_checks() -> set[tuple[str, str]]:
    checks = set()
    for path in (ROOT / "conformance" / "suite").glob("test_*.py"):
        for match in re.finditer(r"@check\(\s*\"(\w+)\"(.*?)\)\n(?:@[^\n]*\n)*def (test_\w+)", path.read_text(), re.S):
            area, options, fn = match.groups()
            name = re.search(r"name=\"(\w+)\"", options)
            checks.add((area, name.group(1) if name else fn.removeprefix("test_")))
    return checks


def _index_rows() -> dict[str, tuple[str, str]]:
    section = SPEC.split("## 15.")[1].split("\n---")[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("area", "---"):
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def test_requirement_ids_are_unique():
    assert len(DEFINED) == len(set(DEFINED)), sorted({d for d in DEFINED if DEFINED.count(d) > 1})


def test_every_suite_check_is_in_the_check_index():
    rows = _index_rows()
    missing = sorted(f"{area}.{name}" for area, name in _suite_checks()
                     if area not in rows or f"`{name}`" not in rows[area][0])
    assert not missing, (f"checks missing from the check index of spec/SPEC.md (section 15): {missing}; "
                         "add a row or the check name, with the requirement ids it tests")


def test_the_check_index_cites_requirements_that_exist():
    for area, (_, cited) in _index_rows().items():
        for rid in re.findall(r"R-[A-Z]+-(?:\d+|\*)", cited):
            if rid.endswith("*"):
                assert any(d.startswith(rid[:-1]) for d in DEFINED), f"{area}: no requirement {rid}"
            else:
                assert rid in DEFINED, f"{area} cites {rid}, which spec/SPEC.md does not define"


def test_golden_check_messages_cite_their_requirements():
    suite = (ROOT / "conformance" / "suite" / "test_golden.py").read_text()
    for rid in ("R-VEC-1", "R-VEC-2"):
        assert rid in DEFINED and f"SPEC {rid}" in suite


def test_vector_file_formats_are_the_documented_ones():
    assert f"golden/{VECTORS}/<Struct>.<variant>.<h16>{MSGPACK_SUFFIX}" in SPEC
    assert f"golden/{VECTORS}/<Struct>.<variant>.<h16>{VIEW_SUFFIX}" in SPEC
    assert f"golden/<manifest id>/{INDEX}" in SPEC and f"Golden format {FORMAT}." in SPEC
    documented = json.loads(re.search(r"`index.json` \(UTF-8 JSON\):\n\n```json\n(.*?)```", SPEC, re.S).group(1))
    actual = read_index("sglang-0.5.23")
    assert documented["format"] == actual["format"] == FORMAT
    assert set(documented) == set(actual) and set(documented["cases"][0]) == set(actual["cases"][0])
    first = actual["cases"][0]  # AbortReq.minimal, 16 bytes, its msgpack path exactly as documented
    assert documented["cases"][0]["size"] == first["size"] and documented["cases"][0]["msgpack"] == first["msgpack"]
    assert f"`golden/{first['msgpack']}`" in SPEC  # Appendix A's worked bytes name the real file
    view_doc = re.search(r"```json\n(\{\"struct\": \"AbortReq\".*?)```", SPEC, re.S).group(1)
    keys = re.findall(r"\"(\w+)\":", view_doc)
    real = json.loads((ROOT / "golden" / first["view"]).read_text())
    assert keys == list(real)


def test_every_json_view_marker_is_documented():
    for marker in view.MARKERS:
        assert f'"{marker}"' in SPEC, f"JSON view marker {marker} is not in spec/SPEC.md section 13.3"


def test_worked_bytes_match_the_vector():
    block = SPEC.split("## Appendix A.")[1].split("```")[1]
    hex_bytes = "".join(re.findall(r"^((?:[0-9a-f]{2} )*[0-9a-f]{2})\s", block, re.M)).replace(" ", "")
    path = vector_paths("sglang-0.5.23")[("AbortReq", "minimal")]
    assert bytes.fromhex(hex_bytes) == path.read_bytes()


def test_testee_doc_covers_the_protocol():
    for op in (*protocol.REQUIRED_OPS, *protocol.OPTIONAL_OPS, "start", "stop"):
        assert f"`{op}`" in TESTEE, f"op {op} is not described in spec/testee.md"
    for result in protocol.RESULTS:
        assert f"`{result}`" in TESTEE, f"result {result} is not described in spec/testee.md"
    assert "little-endian" in TESTEE and f"protocol, version {protocol.PROTOCOL}" in TESTEE
