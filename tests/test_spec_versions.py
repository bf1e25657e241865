"""The spec's version (SPEC.md first line, §14), the table that dates every check id
(conformance/spec_versions.py), and what a declared target does to a run."""

from __future__ import annotations

import json
import re
import sys

import pytest
from inprocess_pytest import run_pytest, warm  # noqa: F401 - warm: the fixture the tests below use

from conformance import spec_versions
from conformance.paths import data_root
from conformance.testee import protocol

ROOT = data_root()

pytest_plugins = ["pytester"]


def test_the_spec_states_the_current_version_and_lists_every_version():
    text = (ROOT / "spec" / "SPEC.md").read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert first.endswith(f"version {spec_versions.CURRENT}"), first
    section = text[text.index("## 14."):text.index("## 15.")]
    listed = re.findall(r"^\| (\d+\.\d+) \| ([^|]+) \|", section, flags=re.M)
    assert [(n, d.strip()) for n, d in listed] == [(v.number, v.date) for v in spec_versions.VERSIONS]
    assert len([v for v in spec_versions.VERSIONS if v.date != "unreleased"]) >= 2


def test_the_changelog_has_a_section_per_spec_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## Spec (\d+\.\d+) \(([^;)]+)", text, flags=re.M)
    assert [(n, d) for n, d in sections] == [(v.number, v.date) for v in reversed(spec_versions.VERSIONS)]


def test_the_reference_testee_declares_the_current_version():
    from reference_impl import testee

    assert testee.SPEC_VERSION == spec_versions.CURRENT
    assert testee.Testee(set()).started()["spec"] == spec_versions.CURRENT


def test_versions_are_ordered_and_globs_name_known_versions():
    numbers = [spec_versions.parse(v.number) for v in spec_versions.VERSIONS]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    known = {v.number for v in spec_versions.VERSIONS}
    assert all(version in known for _, version in spec_versions.INTRODUCED)
    globs = [g for g, _ in spec_versions.INTRODUCED]
    assert len(globs) == len(set(globs))


def test_a_check_takes_the_newest_version_of_the_globs_that_match_it():
    assert spec_versions.introduced_in("Required.RoundTrip.AbortReq.Identical.msgpack.typical") == "1.0"
    assert spec_versions.introduced_in("Required.RoundTrip.AbortReq.EveryArm.msgpack") == "2.0"
    assert spec_versions.introduced_in("Required.ReceivePath.AbortReq.Controller.msgpack") == "1.1"
    assert spec_versions.introduced_in("Required.NoSuchArea.X.Y") is None
    assert spec_versions.newer_than("Required.Bytes.AbortReq.MatchesVector.minimal", "1.1") == "2.0"
    assert spec_versions.newer_than("Required.Bytes.AbortReq.MatchesVector.minimal", "2.0") is None


def test_declared_versions_are_read_or_refused():
    assert spec_versions.normalize("1") == "1.0" and spec_versions.normalize("2.0") == "2.0"
    for bad in ("9.9", "v2", "", "1.0.1"):
        with pytest.raises(ValueError):
            spec_versions.normalize(bad)


def test_the_header_counts_the_newer_checks_by_family():
    ids = ["Required.Golden.A.DecodesVector.typical", "Required.Bytes.A.MatchesVector.typical",
           "Required.Bytes.B.MatchesVector.typical", "Required.RoundTrip.A.EveryArm.msgpack"]
    line = spec_versions.header_line(ids, "1.1")
    assert line.startswith(f"spec {spec_versions.CURRENT}; the implementation targets spec 1.1: 3 of 4 ")
    assert "Required.Bytes.* (2.0): 2" in line and "Required.RoundTrip.*.EveryArm.* (2.0): 1" in line
    assert spec_versions.header_line(ids, spec_versions.CURRENT).endswith("no selected check is newer")
    assert "new in spec 2.0" in spec_versions.failure_note(ids[1], "1.0")
    assert spec_versions.failure_note(ids[0], "1.0") == ""


def test_the_handshake_declares_a_version_or_is_refused():
    hello = {"type": "started", "protocol": 1, "implementation": {"name": "x", "version": "1"},
             "manifest": "sglang-0.5.23"}
    assert protocol.spec_version(protocol.check_started(hello)) == spec_versions.CURRENT
    assert protocol.spec_version(protocol.check_started({**hello, "spec": "1.1"})) == "1.1"
    for bad in ("7.0", 2, "two"):
        with pytest.raises(protocol.ProtocolError, match="'spec'"):
            protocol.check_started({**hello, "spec": bad})


def test_every_collected_check_is_dated():
    """A new check family needs its line in INTRODUCED (the failure names the ids)."""
    from reference_tools.proof.table import collected_checks

    ids = collected_checks()
    assert len(ids) > 1000, "collection found too few checks"
    undated = sorted({spec_versions.family_hint(i) for i in ids if spec_versions.introduced_in(i) is None})
    assert not undated, ("checks no line of conformance/spec_versions.py INTRODUCED dates (add one line per family, "
                         f"at the version that adds it): {undated}")


def test_a_run_with_an_old_target_names_the_newer_checks(tmp_path, capsys):
    """The header line, the failure's note and results.json, through the testee protocol."""
    from conformance import runner

    report = tmp_path / "results.json"
    impl = f"cmd:{sys.executable} -m reference_impl.testee --spec 1.1 --break float32"
    selection = "Bytes and BatchEmbeddingOutput and typical or Golden and AbortReq and minimal"
    code = runner.run(impl=impl, transport="msgpack", report=str(report), report_dir=str(tmp_path / "site"),
                      expectations="/dev/null", pytest_args=["-k", selection])
    data = json.loads(report.read_text())
    out = capsys.readouterr().out
    assert code == 1
    header = next(line for line in out.splitlines() if line.startswith(f"spec {spec_versions.CURRENT}; "))
    newer = sum(1 for r in data["results"] if spec_versions.newer_than(r["id"], "1.1"))
    assert header.startswith(f"spec {spec_versions.CURRENT}; the implementation targets spec 1.1: {newer} of "
                             f"{len(data['results'])} selected checks are newer"), header
    assert f"Required.Bytes.* (2.0): {newer}" in header, header
    assert data["spec_version"] == spec_versions.CURRENT and data["target_spec_version"] == "1.1"
    assert data["newer_than_target"] == {"Required.Bytes.* (2.0)": newer}
    failed = [r for r in data["results"] if r["outcome"] == "failed"]
    assert [r["id"] for r in failed] == ["Required.Bytes.BatchEmbeddingOutput.MatchesVector.typical"]
    assert "this check is new in spec 2.0, newer than the 1.1 the implementation targets" in failed[0]["message"]
    markdown = (tmp_path / "site" / "report.md").read_text()
    assert f"Spec {spec_versions.CURRENT}; the implementation targets spec 1.1: {newer} checks are newer" in markdown


def test_the_spec_states_the_formats_the_code_uses():
    """SPEC §14's line on the other formats names the versions the code reads and writes."""
    import re

    from conformance.schema.golden import refusals, store
    from conformance.schema.manifest.model import FORMAT_VERSION
    from conformance.testee.protocol import PROTOCOL

    text = (ROOT / "spec" / "SPEC.md").read_text()
    line = next(line for line in text.split("\n- ") if line.startswith("Versions of this suite's other formats"))
    stated = {name: int(n) for name, n in re.findall(r"(manifest format|golden format|format|testee protocol) (\d+)",
                                                        " ".join(line.split()))}
    assert stated == {"manifest format": FORMAT_VERSION, "golden format": store.FORMAT, "format": refusals.FORMAT,
                      "testee protocol": PROTOCOL}, line
    assert f"# The testee protocol, version {PROTOCOL}" in (ROOT / "spec" / "testee.md").read_text()


@pytest.mark.slow
@pytest.mark.usefixtures("warm")
def test_the_changelog_names_real_check_ids(pytester):
    """Every check id the CHANGELOG names in backticks (`<...>` a placeholder, `*` a glob, `{a,b}`
    alternatives) matches a check the suite collects: a third party updates from these names."""
    import fnmatch

    listed = run_pytest(pytester, "--ipc-impl", "reference", "--ipc-e2e", "--ipc-peer", "sglang-0.5.22",
                        "--collect-only", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                        str(ROOT / "conformance" / "suite")).stdout.str()
    ids = [m.group(1) for m in re.finditer(r"\[((?:Required|Recommended)\.[^\]]*)\]", listed)]
    assert len(ids) > 1000, listed[-2000:]
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    named = sorted(set(re.findall(r"`((?:Required|Recommended)\.[^`\s]+)`", text)))
    assert named
    unknown = []
    for name in named:
        alternatives = re.match(r"(.*)\{([^}]*)\}(.*)", name)
        spelled = ([alternatives.group(1) + a + alternatives.group(3) for a in alternatives.group(2).split(",")]
                   if alternatives else [name])
        for one in spelled:
            glob = re.sub(r"<[^>]+>", "*", one)
            if not any(fnmatch.fnmatchcase(i, glob) or fnmatch.fnmatchcase(i, glob + ".*") for i in ids):
                unknown.append(one)
    assert not unknown, f"CHANGELOG.md names check ids no check has: {unknown}"
