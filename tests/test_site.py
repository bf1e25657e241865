"""The conformance site (ipc-conformance report site): what its pages say, built from results.json files.

tests/test_site_browser.py opens the same pages in a real browser; here the HTML is read as text.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import markupsafe
import msgspec
import pytest

from conformance.cli import main
from conformance.records import CheckRecord, Outcome, ResultsFileError
from conformance.requirements import index
from conformance.site import badge, single_run_html
from conformance.site.model import load_all

ROOT = Path(__file__).resolve().parents[1]

PASSING = [
    {"id": "Required.RoundTrip.AbortReq.Identical.msgpack.minimal", "outcome": "passed", "message": ""},
    {"id": "Required.RoundTrip.AbortReq.Identical.pickle.minimal", "outcome": "passed", "message": ""},
    {"id": "Required.HttpBase64.UpdateWeightsFromTensorReqInput.RejectsMalformed", "outcome": "passed",
     "message": ""},
    {"id": "Recommended.Golden.AbortReq.EncodesVector.minimal", "outcome": "passed", "message": ""},
    {"id": "Required.Tensor.cuda.Exact.pickle", "outcome": "skipped", "message": "Skipped: no GPU"},
]
LONG = "\n".join(f"line {i} of the whole story" for i in range(2, 12))
FAILING = [
    {"id": "Required.RoundTrip.AbortReq.Identical.msgpack.minimal", "outcome": "failed",
     "message": "AbortReq over msgpack: rid came back as bytes <script>alert(1)</script>\n" + LONG},
    {"id": "Required.RoundTrip.AbortReq.Identical.pickle.minimal", "outcome": "passed", "message": ""},
    {"id": "Required.HttpBase64.UpdateWeightsFromTensorReqInput.RejectsMalformed", "outcome": "xfailed",
     "message": "accepted malformed base64", "reason": "base64 is not checked yet (tracked upstream)"},
    {"id": "Recommended.Golden.AbortReq.EncodesVector.minimal", "outcome": "recommended-failed",
     "message": "bytes differ at offset 3"},
]


def _results(folder: Path, impl: str, records: list[dict], **meta) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "results.json"
    path.write_text(json.dumps({"impl": impl, "manifest": "sglang-0.5.23", "transport": "both", "counts": {},
                                "results": records, **meta}))
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("site")
    good = _results(tmp / "good", "good-1.0", PASSING, impl_spec="reference", suite_version="0.1.0",
                    date="2026-12-01T12:00:00Z",
                    residue={"fields": [["AbortReq.extra", "Any"]], "wrapped": {"Foo": 2}})
    bad = _results(tmp / "bad", "bad-2.0", FAILING, impl_spec="cmd:./bad testee")
    out = tmp / "out"
    assert main(["report", "site", str(good), str(bad.parent), "--out", str(out)]) == 0
    return out


def test_overview_has_a_cell_per_area_and_implementation(site):
    page = (site / "index.html").read_text()
    assert page.count('<th class="impl">') == 2
    assert "good-1.0" in page and "bad-2.0" in page
    # Required and Recommended apart; the failing RoundTrip cell of bad-2.0 links to its failures.
    assert page.index("Required checks") < page.index("Recommended checks")
    assert 'href="impl/bad-2.0.html#area-Required-RoundTrip"' in page
    assert 'href="impl/good-1.0.html#matrix-Required-RoundTrip"' in page
    assert re.search(r'<td class="cell fail"><a href="impl/bad-2.0.html#area-Required-RoundTrip">', page)
    assert re.search(r'<td class="cell warn"><a href="impl/bad-2.0.html#area-Recommended-Golden">', page)
    # a listed Required failure is a Required failure: its cell is red, as the badge is
    assert re.search(r'<td class="cell fail"><a href="impl/bad-2.0.html#expected-Required-HttpBase64">', page)
    assert re.search(r'<td class="cell skip"><a href="impl/good-1.0.html#matrix-Required-Tensor">', page)
    assert "<td class=\"cell none\"><span class=\"n none\">not run</span></td>" in page  # bad-2.0 ran no Tensor
    assert "2026-12-01T12:00:00Z" in page and "0.1.0" in page


def test_implementation_page_lists_failures_first_with_message_reason_and_reproducer(site):
    page = (site / "impl" / "bad-2.0.html").read_text()
    failures, matrices, residue = (page.index(f'id="{s}"') for s in ("failures", "matrices", "residue"))
    assert failures < matrices < residue
    failed = page.index('id="f-Required.RoundTrip.AbortReq.Identical.msgpack.minimal"')
    recommended = page.index('id="f-Recommended.Golden.AbortReq.EncodesVector.minimal"')
    expected = page.index('id="f-Required.HttpBase64.UpdateWeightsFromTensorReqInput.RejectsMalformed"')
    # Failures (failed, then recommended checks that failed), then the expected ones, then the matrices.
    assert failures < failed < recommended < page.index('id="expected"') < expected < matrices
    assert "rid came back as bytes &lt;script&gt;" in page and "<script>" not in page  # escaped
    first_lines = page[failed:recommended].split("<details>")[0]
    assert "line 4 of" in first_lines and "line 5 of" not in first_lines  # four lines, then the whole message
    assert "line 11 of the whole story" in page[failed:recommended]
    assert "base64 is not checked yet (tracked upstream)" in page
    assert ("ipc-conformance run --impl &#39;cmd:./bad testee&#39; --manifest sglang-0.5.23 -- -k "
            "Required.RoundTrip.AbortReq.Identical.msgpack.minimal") in page
    assert '<details class="matrix" id="matrix-Required-RoundTrip">' in page  # collapsed by default
    assert 'href="#f-Required.RoundTrip.AbortReq.Identical.msgpack.minimal"' in page  # matrix cell -> failure
    assert "does not record the pickle residue" in page


def test_residue_table_when_results_carry_it(site):
    page = (site / "impl" / "good-1.0.html").read_text()
    assert "<code>AbortReq.extra</code></td><td><code>Any</code>" in page
    assert "<code>Foo</code></td><td>2</td>" in page
    assert "Failures (0)" in page


def test_check_page_tells_whose_bug(site):
    page = (site / "checks" / "Required.RoundTrip.Identical.html").read_text()
    assert "This check fails in 1 of 2: bad-2.0." in page
    assert "AbortReq.msgpack.minimal" in page  # the instance where they differ
    assert "AbortReq.pickle.minimal" not in page  # both passed: nothing to tell
    assert 'href="../impl/bad-2.0.html#f-Required.RoundTrip.AbortReq.Identical.msgpack.minimal"' in page
    index = (site / "checks.html").read_text()
    failing_part = index.split("Passing everywhere")[0]
    assert "Required.RoundTrip.Identical" in failing_part
    assert "Required.Tensor.Exact" not in failing_part


def test_a_check_with_listed_failures_never_passes(site):
    """bad-2.0 lists its HttpBase64 failure: the check fails there, said so, never 'passes'."""
    page = (site / "checks" / "Required.HttpBase64.RejectsMalformed.html").read_text()
    assert "This check fails in 1 of 2: bad-2.0 (listed)." in page
    index = (site / "checks.html").read_text()
    failing_part, passing_part = index.split("Passing everywhere")
    assert "Required.HttpBase64.RejectsMalformed" in failing_part
    assert "Required.HttpBase64.RejectsMalformed" not in passing_part
    row = failing_part[failing_part.index(">Required.HttpBase64.RejectsMalformed<"):]
    assert '<td class="verdict">fails in 1 of 2: bad-2.0 (listed)</td>' in row.split("</tr>")[0]


@pytest.mark.parametrize("outcomes, brief", [([], "no checks"), (["skipped", "skipped"], "2 not tested")])
def test_an_empty_run_or_one_of_skips_is_said_so_on_every_surface(tmp_path, outcomes, brief, capsys):
    records = [{"id": f"Required.A.S{i}.N", "outcome": o, "message": "Skipped: x-1 does not offer 'e2e' (a server)"}
               for i, o in enumerate(outcomes)]
    path = _results(tmp_path / "run", "x-1", records)
    assert main(["report", "compare", str(path)]) == 0
    table = capsys.readouterr().out
    phrase = f"0 passed, 0 failed (0 listed), 0 recommended failed, {len(outcomes)} not tested"
    assert f"| **all** | **{brief if outcomes else '–'}** |" in table and f"- x-1: {phrase}" in table, table
    assert main(["report", "site", str(path), "--out", str(tmp_path / "site")]) == 0
    site = tmp_path / "site"
    assert json.loads((site / "badges" / "x-1.json").read_text()) == {
        "schemaVersion": 1, "label": "ipc conformance", "message": brief, "color": "lightgrey"}
    page = (site / "impl" / "x-1.html").read_text()
    assert f'<p class="sub" id="phrase">{phrase}.</p>' in page
    if outcomes:
        assert "<li>e2e not offered: 2</li>" in page


def test_site_is_static_and_offline(site):
    pages = list(site.rglob("*.html"))
    assert len(pages) == 1 + 1 + 1 + 2 + 4  # overview, checks, requirements, two implementations, four checks
    for page in pages:
        text = page.read_text()
        assert "<script" not in text.lower()
        assert not re.search(r'(src|href)="(https?:)?//', text), page  # nothing from the network
    assert (site / "style.css").is_file()
    svg = ET.fromstring((site / "badges" / "bad-2.0.svg").read_text())
    assert svg.findtext("{http://www.w3.org/2000/svg}title") == \
        "ipc conformance: 1/4 passed, 2 failed (1 listed), 1 recommended failed"
    assert json.loads((site / "badges" / "good-1.0.json").read_text())["color"] == "brightgreen"
    assert json.loads((site / "badges" / "bad-2.0.json").read_text())["color"] == "red"


def test_check_page_says_what_the_check_tests(site):
    """Its requirement ids, linked, the clauses whose checks include it, the spec's words."""
    page = (site / "checks" / "Required.RoundTrip.Identical.html").read_text()
    proves = page[page.index('id="proves"'):]
    assert 'href="../requirements.html#R-MSG-1"' in proves and 'href="../requirements.html#R-VAL-4"' in proves
    assert "R-MSG-1b</span> one element per field follows the tag, in the manifest&#39;s field order" in proves
    spec_words = str(markupsafe.escape(index().requirements["R-MSG-1"].body))
    assert spec_words in proves and "spec/SPEC.md §2.1 Structs" in proves
    assert "R-HTTP-1" not in proves  # a clause of another area's checks
    # A Recommended check no clause names: the SHOULDs SPEC §15 lists for its area.
    golden = (site / "checks" / "Recommended.Golden.EncodesVector.html").read_text()
    assert "spec/SPEC.md §15 lists for the Golden area (its SHOULDs)" in golden
    assert 'href="../requirements.html#R-VEC-2"' in golden and "#R-VEC-1" not in golden
    requirements = (site / "requirements.html").read_text()
    assert '<section class="requirement" id="R-MSG-1">' in requirements
    assert 'href="checks/Required.RoundTrip.Identical.html"' in requirements
    assert 'R-TRN-1 <span class="tag fail">MUST</span>' in requirements  # untested here, still listed


def _checks(*outcomes: str) -> list[CheckRecord]:
    return [CheckRecord(id=f"Required.A.S{i}.N", outcome=Outcome(o), message="") for i, o in enumerate(outcomes)]


def test_badge_is_red_on_one_required_failure_orange_on_recommended_only():
    clean = ["passed"] * 40 + ["skipped"]
    assert badge.endpoint(_checks(*clean)) == {"schemaVersion": 1, "label": "ipc conformance",
                                               "message": "40/40 passed, 1 not tested", "color": "brightgreen"}
    assert badge.endpoint(_checks(*clean, "recommended-failed"))["color"] == "orange"
    one = badge.endpoint(_checks(*clean, "recommended-failed", "failed"))
    assert one == {"schemaVersion": 1, "label": "ipc conformance",
                   "message": "40/42 passed, 1 failed, 1 recommended failed, 1 not tested", "color": "red"}
    assert 'fill="#e05d44"' in badge.svg(_checks(*clean, "failed"))  # the SVG the pages show: red


def test_a_listed_required_failure_is_a_failure_on_the_badge():
    """`--fix-expectations` cannot turn a badge green: a listed Required failure is red and counted."""
    listed = badge.endpoint(_checks(*["passed"] * 40, "xfailed", "skipped"))
    assert listed == {"schemaVersion": 1, "label": "ipc conformance",
                      "message": "40/41 passed, 1 failed (1 listed), 1 not tested", "color": "red"}
    recommended = [CheckRecord(id="Recommended.A.S.N", outcome=Outcome.XFAILED, message="x")]
    assert badge.endpoint(_checks("passed") + recommended)["color"] == "orange"  # a listed Recommended one


def test_badge_of_a_run_with_no_check_tested_is_grey_and_says_so():
    assert badge.endpoint(_checks("skipped", "skipped")) == {
        "schemaVersion": 1, "label": "ipc conformance", "message": "2 not tested", "color": "lightgrey"}
    assert badge.endpoint([]) == {"schemaVersion": 1, "label": "ipc conformance", "message": "no checks",
                                  "color": "lightgrey"}


def test_failures_group_by_first_line_required_first(tmp_path):
    """Identical first lines are one group with its count; Required areas before Recommended ones,
    whatever their sizes; each check id keeps its anchor."""
    tag = "AbortReq over msgpack: the tag came back as bytes"
    records = [
        *({"id": f"Required.RoundTrip.{s}.Identical.msgpack.typical", "outcome": "failed",
           "message": f"{tag}\nat {s}"} for s in ("AbortReq", "FlushCacheReqInput")),
        {"id": "Required.RoundTrip.KvMetrics.Identical.msgpack.typical", "outcome": "failed", "message": "other"},
        *({"id": f"Recommended.Golden.{s}.EncodesVector.typical", "outcome": "recommended-failed",
           "message": "bytes differ at offset 3"} for s in ("A", "B", "C")),
    ]
    path = _results(tmp_path / "run", "grouped", records)
    assert main(["report", "site", str(path), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "impl" / "grouped.html").read_text()
    failures = page[page.index('id="failures"'):page.index('id="matrices"')]
    assert failures.count('<article class="problem') == 3
    assert "Failures (6)" in page and "(3 in 2 groups)" in failures
    groups = [failures.index(s) for s in (tag, ">other<", "bytes differ at offset 3")]
    assert groups == sorted(groups), "Required groups first (the biggest first), then the Recommended one"
    # the group's message once, and the second check's own message (its second line differs) on request
    assert failures.count(tag) == 2 and '<span class="count"' in failures and ">2 checks<" in failures
    assert ">3 checks<" in failures
    for r in records:  # every id is an anchor: the matrix cells and the check pages link to it
        assert f'id="f-{r["id"]}"' in page
    assert "<summary>its message</summary><pre class=\"message\">" + tag + "\nat FlushCacheReqInput" in failures
    assert "-k &#39;Required.RoundTrip.AbortReq.Identical.msgpack.typical or " in failures  # the group's command


def test_same_implementation_twice_gets_two_pages(tmp_path):
    a = _results(tmp_path / "msgpack-run", "x-1", PASSING)
    b = _results(tmp_path / "pickle-run", "x-1", PASSING)
    runs = load_all([a, b])
    assert [r.title for r in runs] == ["x-1 (msgpack-run)", "x-1 (pickle-run)"]
    assert len({r.slug for r in runs}) == 2
    c = _results(tmp_path / "c", "x-1", PASSING, impl_spec="defective_adapters:NoBase64")
    assert [r.title for r in load_all([a, c])] == ["x-1 (msgpack-run)", "x-1 (defective_adapters:NoBase64)"]


def test_bad_results_name_file_and_field(tmp_path, capsys):
    broken = tmp_path / "results.json"
    broken.write_text(json.dumps({"impl": "x", "results": [{"id": "Required.A.B.C"}]}))
    assert main(["report", "site", str(broken), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert str(broken) in err and "results[0]" in err and "'outcome'" in err
    broken.write_text(json.dumps({"impl": "x"}))
    with pytest.raises(ResultsFileError, match=f"{re.escape(str(broken))}: .*'results'"):
        load_all([broken])
    with pytest.raises(ResultsFileError, match="nothing.json: cannot read results"):
        load_all([tmp_path / "nothing.json"])


def test_single_run_report_is_the_implementation_page():
    page = single_run_html({"impl": "bad-2.0", "manifest": "sglang-0.5.23", "transport": "both"},
                           msgspec.convert(FAILING, list[CheckRecord]))
    assert "<style>" in page and 'rel="stylesheet"' not in page  # one file: opens anywhere
    assert 'id="f-Required.RoundTrip.AbortReq.Identical.msgpack.minimal"' in page
    assert 'href="../' not in page and "checks/" not in page  # no links into a site that is not there


@pytest.mark.slow
def test_site_from_a_real_run_of_a_defective_adapter(tmp_path):
    """A real run (the reference with its base64 check removed) and the site built from it."""
    run = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", "defective_adapters:NoBase64",
         "--transport", "msgpack", "--report-dir", str(tmp_path / "run"), "--", "-k", "HttpBase64 or Primitive"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
        capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    out = tmp_path / "site"
    assert main(["report", "site", str(tmp_path / "run"), "--out", str(out)]) == 0
    data = json.loads((tmp_path / "run" / "results.json").read_text())
    assert data["impl_spec"] == "defective_adapters:NoBase64" and data["transports"] == ["msgpack"]
    assert data["suite_version"] and data["date"] and data["impl_version"] and "fields" in data["residue"]
    records = data["results"]
    failed = [r for r in records if r["outcome"] == "failed"]
    assert failed and all(".HttpBase64." in r["id"] for r in failed)
    (slug,) = [p.stem for p in (out / "impl").glob("*.html")]
    page = (out / "impl" / f"{slug}.html").read_text()
    for r in failed:
        assert f'id="f-{r["id"]}"' in page
        assert str(markupsafe.escape(r["message"].strip().splitlines()[0])) in page
    assert f'href="impl/{slug}.html#area-Required-HttpBase64"' in (out / "index.html").read_text()
    assert "ipc-conformance run --impl defective_adapters:NoBase64 --manifest" in page
    single = (tmp_path / "run" / "report.html").read_text()  # report.html of the run: the same page, one file
    first_lines = {r["message"].strip().splitlines()[0] for r in failed}  # one box per first line
    assert single.count('<article class="problem') == len(first_lines) and "<style>" in single


def test_the_site_never_imports_report():
    """report writes report.html and badge.json through the site; the site needs nothing back
    (one direction, no import cycle hidden inside a function)."""
    found = []
    for path in sorted((ROOT / "conformance" / "site").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            found += [f"{path.name}: {n}" for n in names if n.split(".")[:2] == ["conformance", "report"]]
    assert not found, found


def test_what_a_check_tests_comes_from_the_clause_table_else_spec_section_15():
    idx = index()
    # SPEC §15's rows: ranges (R-MSG-1 … R-MSG-5), families (R-MSG-*), aliases in brackets
    assert idx.areas["RoundTrip"][:5] == ["R-MSG-1", "R-MSG-2", "R-MSG-3", "R-MSG-4", "R-MSG-5"]
    assert "R-MSG-11" in idx.areas["Generated"] and idx.areas["Security"] == ["R-PW-5", "R-SEC-1"]
    assert len(idx.areas) >= 30  # every area row was read
    by_clause = idx.proves(["Required.Accepts.KvHintAction.MapDefaultsFilled"])
    assert [c.id for p in by_clause for c in p.clauses if p.requirement.id == "R-MSG-4"] == ["R-MSG-4c"]
    generated = [p.requirement.id for p in idx.proves(["Required.Generated.AbortReq.RoundTrip.msgpack"])]
    assert "R-MSG-1" in generated and "R-MSG-3" not in generated  # a Required check: the row's MUSTs
    assert idx.requirements["R-MSG-4"].section == "2.1 Structs"
