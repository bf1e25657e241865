"""The conformance site in a real browser (Debian's headless chromium, driven over its DevTools pipe).

What a person sees at 1280 x 900: the overview table in the first screen, a failure's message
one click away from the overview, what a check tests (its requirements, in the spec's words) on its
page, a red badge for a run with one Required failure, nothing wider than the window on any page
type (at 720 px too, with a long --impl).
Screenshots of each page type go to $SITE_SCREENSHOTS when set (the README's are made so:
SITE_SCREENSHOTS=docs pytest tests/test_site_browser.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from devtools_pipe import Browser, find_chromium

from conformance.site import build_site
from conformance.site.model import Run, load_all

ROOT = Path(__file__).resolve().parents[1]
WIDTH, HEIGHT = 1280, 900
SLICE = "HttpBase64 or Catalogue or Primitive or Tensor"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        if os.environ.get("CI"):  # .ci/run installs it: missing there is a failure, not a skip
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def _run(impl: str, out: Path, select: str = SLICE) -> Path:
    """A real, short conformance run: msgpack only, a few areas."""
    subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", impl, "--transport", "msgpack",
         "--report-dir", str(out), "--", "-k", select],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "tests")}, capture_output=True, timeout=600)
    return out / "results.json"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[Path]:
    tmp = tmp_path_factory.mktemp("runs")
    good = _run("reference", tmp / "reference")
    bad = _run("defective_adapters:NoBase64", tmp / "no-base64")
    assert json.loads(bad.read_text())["counts"]["failed"] > 0, "the defective adapter must fail some checks"
    return [good, bad]


@pytest.fixture(scope="module")
def one_failure(tmp_path_factory) -> Path:
    """A real run with exactly one Required failure (and one Recommended): the reference testee with
    its defaulted fields dropped, named by a long --impl (the interpreter's whole path)."""
    out = tmp_path_factory.mktemp("one") / "run"
    results = _run(f"cmd:{sys.executable} -m reference_impl.testee --break drop-defaults", out,
                   "AbortReq and (Bytes or Golden) and minimal")
    counts = json.loads(results.read_text())["counts"]
    assert counts["failed"] == 1 and counts["recommended-failed"] == 1, counts
    return out


@pytest.fixture(scope="module")
def site(results, tmp_path_factory) -> Path:
    return build_site(results, tmp_path_factory.mktemp("site")).parent


@pytest.fixture(scope="module")
def defective(results) -> Run:
    """The defective adapter's run, as the site names it."""
    return load_all(results)[1]


@pytest.fixture(scope="module")
def browser(chromium):
    with Browser(chromium, WIDTH, HEIGHT) as b:
        yield b


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("SITE_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _no_horizontal_overflow(browser: Browser) -> None:
    width = browser.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{browser.evaluate('location.pathname')} is {width} px wide at {WIDTH} px"


def test_overview_is_in_the_first_screen(site, browser, shots):
    browser.open((site / "index.html").as_uri())
    box = browser.evaluate("""(() => {
        const t = document.getElementById('overview').getBoundingClientRect();
        const heads = [...document.querySelectorAll('#overview thead th')].map(th => th.getBoundingClientRect());
        const rows = [...document.querySelectorAll('#overview tbody tr')].map(r => r.getBoundingClientRect().bottom);
        return {top: t.top, right: Math.max(...heads.map(h => h.right)), head: Math.max(...heads.map(h => h.bottom)),
                rows_in_view: rows.filter(b => b <= innerHeight).length, rows: rows.length};
    })()""")
    assert 0 <= box["top"] < 200, box  # the table starts near the top ...
    assert box["right"] <= WIDTH and box["head"] < HEIGHT / 3, box  # ... with every implementation's column ...
    assert box["rows_in_view"] == box["rows"], box  # ... and every area's row in the first screen
    _no_horizontal_overflow(browser)
    browser.screenshot(shots / "site-overview.png", height=640)


def test_failure_message_is_one_click_from_the_overview(site, defective, browser, shots):
    browser.open((site / "index.html").as_uri())
    x, y, href = browser.evaluate("""(() => {
        const a = document.querySelector('#overview td.cell.fail a');
        const r = a.getBoundingClientRect();
        return [r.left + r.width / 2, r.top + r.height / 2, a.getAttribute('href')];
    })()""")
    assert href == f"impl/{defective.slug}.html#area-Required-HttpBase64", href
    browser.events.clear()
    browser.click(x, y)
    browser.wait_for("Page.loadEventFired")
    seen = browser.evaluate("""(() => {
        const target = document.querySelector(':target');
        const pre = target && target.querySelector('pre.message');
        if (!pre) return null;
        const r = pre.getBoundingClientRect();
        return {hash: location.hash, text: pre.innerText, top: r.top, bottom: r.bottom,
                visible: pre.checkVisibility()};
    })()""")
    assert seen is not None, "the click did not land on a failure with a message"
    assert seen["hash"] == "#area-Required-HttpBase64"
    assert seen["visible"] and 0 <= seen["top"] < HEIGHT, seen  # in view, not inside a closed <details>
    messages = [r.message for r in defective.records if r.outcome == "failed"]
    assert any(seen["text"].strip().splitlines()[0] in m for m in messages), seen["text"]
    _no_horizontal_overflow(browser)
    browser.screenshot(shots / "site-implementation.png", height=640)


def test_matrices_open_fit_the_width_and_keep_their_header(site, defective, browser):
    browser.open((site / "impl" / f"{defective.slug}.html").as_uri())
    assert browser.evaluate("[...document.querySelectorAll('details.matrix')].every(d => !d.open)")
    browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    _no_horizontal_overflow(browser)
    stuck = browser.evaluate("""(() => {
        const box = document.querySelector('#matrix-Required-Catalogue .scroll');
        box.scrollIntoView();
        box.scrollTop = 400;
        const head = box.querySelector('thead th').getBoundingClientRect().top;
        return [head, box.getBoundingClientRect().top, box.scrollTop];
    })()""")
    head, box_top, scrolled = stuck
    assert scrolled > 0 and abs(head - box_top) <= 2, stuck  # the header row stays at the top of its box


def test_check_pages_fit_the_width(site, defective, browser, shots):
    browser.open((site / "checks.html").as_uri())
    _no_horizontal_overflow(browser)
    browser.open((site / "checks" / "Required.HttpBase64.RejectsMalformed.html").as_uri())
    _no_horizontal_overflow(browser)
    verdict = browser.evaluate("document.querySelector('p.verdict').innerText")
    assert verdict == f"This check fails in 1 of 2: {defective.title}.", verdict
    browser.screenshot(shots / "site-check.png", height=520)


def test_check_page_shows_the_requirement_it_tests(site, browser, shots):
    """The clause and the requirement's text from spec/SPEC.md, in view, linked to the requirements page."""
    browser.open((site / "checks" / "Required.HttpBase64.RejectsMalformed.html").as_uri())
    shown = browser.evaluate("""(() => {
        const box = document.getElementById('proves');
        box.scrollIntoView();
        const quote = box.querySelector('blockquote.spec');
        const link = box.querySelector('p.rid a');
        return {text: box.innerText, quote: quote.innerText, visible: quote.checkVisibility(),
                right: quote.getBoundingClientRect().right, href: link.getAttribute('href')};
    })()""")
    assert "R-HTTP-2a malformed base64 MUST fail validation with an error that names the field" in shown["text"]
    assert shown["visible"] and shown["right"] <= WIDTH, shown
    assert "base64" in shown["quote"] and "MUST" in shown["quote"], shown["quote"]  # the spec's words
    assert shown["href"] == "../requirements.html#R-HTTP-2", shown
    _no_horizontal_overflow(browser)
    browser.screenshot(shots / "site-check-requirements.png", height=HEIGHT)
    browser.open((site / "requirements.html").as_uri() + "#R-HTTP-2")
    assert browser.evaluate("document.querySelector(':target').id") == "R-HTTP-2"
    _no_horizontal_overflow(browser)


def test_one_required_failure_makes_the_badge_red(one_failure, browser, tmp_path):
    """report.html of a run with one Required failure: the badge is red, not orange."""
    browser.open((one_failure / "report.html").as_uri())
    fill = browser.evaluate("document.querySelector('span.badge svg rect:nth-of-type(2)').getAttribute('fill')")
    assert fill == "#e05d44", fill  # shields.io's red
    assert json.loads((one_failure / "badge.json").read_text())["color"] == "red"
    _no_horizontal_overflow(browser)
    browser.screenshot(tmp_path / "site-one-failure.png", height=640)  # not for docs/: it shows local paths


def test_long_impl_stays_beside_its_term_and_nothing_overflows_at_720px(one_failure, browser, tmp_path):
    narrow = 720
    browser.call("Emulation.setDeviceMetricsOverride", session=True, width=narrow, height=HEIGHT,
                 deviceScaleFactor=1, mobile=False)
    browser.width = narrow
    try:
        browser.open((one_failure / "report.html").as_uri())
        browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        box = browser.evaluate("""(() => {
            const dt = [...document.querySelectorAll('dl.meta dt')].find(t => t.innerText === '--impl');
            const dd = dt.nextElementSibling;
            const t = dt.getBoundingClientRect(), d = dd.getBoundingClientRect();
            return {dt_right: t.right, dd_left: d.left, dd_right: d.right, text: dd.innerText,
                    width: document.documentElement.scrollWidth, inner: innerWidth};
        })()""")
        assert "reference_impl.testee --break drop-defaults" in box["text"]
        assert box["dd_left"] >= box["dt_right"], box  # the value beside its term, never back at the page's edge
        assert box["dd_right"] <= narrow and box["width"] <= box["inner"], box
        browser.screenshot(tmp_path / "site-one-failure-720.png", height=640)
    finally:
        browser.call("Emulation.setDeviceMetricsOverride", session=True, width=WIDTH, height=HEIGHT,
                     deviceScaleFactor=1, mobile=False)
        browser.width = WIDTH


# -- the example implementation with its own expected-failure list: honest on every surface ------
EXAMPLE_SLICE = "(Refuses and Tensor) or Primitive or (ReceivePath and AbortReq) or (Accepts and AbortReq)"


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> dict:
    """A short real run of examples/minimal_impl with its list (every listed failure a Required one,
    some checks not tested for capabilities it does not declare), its JUnit file, `report compare`
    and the site built from it."""
    tmp = tmp_path_factory.mktemp("example")
    out = tmp / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", "examples.minimal_impl.adapter:MinimalAdapter",
         "--expectations", str(ROOT / "examples/minimal_impl/expectations.txt"), "--transport", "msgpack",
         "--report-dir", str(out), "--", "-k", EXAMPLE_SLICE, "--junitxml", str(tmp / "junit.xml")],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]  # listed failures fail no run
    compare = subprocess.run([sys.executable, "-m", "conformance.cli", "report", "compare", str(out)],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert compare.returncode == 0, compare.stderr
    return {"stdout": proc.stdout, "out": out, "junit": tmp / "junit.xml", "compare": compare.stdout,
            "site": build_site([out], tmp / "site").parent}


def test_example_with_its_list_is_not_green_and_says_the_same_counts_everywhere(example, browser, tmp_path):
    import re
    import xml.etree.ElementTree as ET

    from conformance.records import counts, load_results

    results = load_results(example["out"])
    c = counts(results.results)
    assert c.listed > 0 and c.failed == 0 and c.skipped > 0 and c.required_failed == c.listed, c
    phrase = c.phrase()  # 'P passed, F failed (L listed), R recommended failed, N not tested'
    assert f"{c.listed} failed ({c.listed} listed)" in phrase
    lines = example["stdout"].strip().splitlines()
    assert lines[-1] == f"conformance: {phrase}"
    assert lines[-2].startswith(f"listed failures: {c.listed} ")
    not_tested = next(line for line in lines[-4:] if line.startswith("not tested: "))
    assert not_tested.startswith(f"not tested: {c.skipped} (") and "not offered" in not_tested
    pytest_line = next(line for line in lines if re.search(r" in [0-9.]+s$", line))
    assert f"{c.passed} passed" in pytest_line and f"{c.listed} failed (listed)" in pytest_line, pytest_line
    assert f"{c.skipped} not tested" in pytest_line and "skipped" not in pytest_line, pytest_line
    assert results.counts == c  # results.json's counts are the same count
    assert phrase in (example["out"] / "report.md").read_text()
    suite = ET.parse(example["junit"]).getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}  # the suite's own
    assert props == {"ipc_passed": str(c.passed), "ipc_failed": str(c.failures), "ipc_listed": str(c.listed),
                     "ipc_recommended_failed": "0", "ipc_not_tested": str(c.skipped), "ipc_summary": phrase}
    brief = c.brief()
    assert brief == f"{c.passed}/{c.ran} passed, {c.failures} failed ({c.listed} listed), {c.skipped} not tested"
    assert f"| **all** | **{brief}** |" in example["compare"] and phrase in example["compare"]
    badge = json.loads((example["out"] / "badge.json").read_text())
    assert badge["color"] == "red" and badge["message"] == brief, badge

    site = example["site"]
    browser.open((site / "index.html").as_uri())
    seen = browser.evaluate("""(() => {
        const img = document.querySelector('#overview img.badge');
        return {badge: img.getAttribute('src'), total: document.querySelector('#overview tr.total td').className};
    })()""")
    assert seen["total"] == "cell fail", seen  # the overview's total cell is red, as the badge
    svg = (site / seen["badge"]).read_text()
    assert 'fill="#e05d44"' in svg and f"<title>ipc conformance: {brief}</title>" in svg  # red, with the counts
    browser.open((site / "impl" / "minimal-example-0.1.html").as_uri())
    shown = browser.evaluate("""(() => ({
        phrase: document.getElementById('phrase').innerText,
        fill: document.querySelector('span.badge svg rect:nth-of-type(2)').getAttribute('fill'),
        failures: document.querySelector('#failures p').innerText}))()""")
    assert shown["phrase"] == phrase + ".", shown
    assert shown["fill"] == "#e05d44", shown  # not green: every listed failure is a Required one
    assert "failures all the same" in shown["failures"], shown
    browser.open((site / "checks.html").as_uri())
    rows = browser.evaluate("""[...document.querySelectorAll('table.checks tbody tr')].map(tr => ({
        check: tr.querySelector('th').innerText, cells: [...tr.querySelectorAll('td.cell')].map(td => td.innerText),
        verdict: tr.querySelector('td.verdict').innerText}))""")
    failing = [r for r in rows if any(("≈" in cell or "✗" in cell) for cell in r["cells"])]
    assert failing, rows
    for r in failing:  # never 'passes' of a check that failed anywhere, listed or not
        assert "passes" not in r["verdict"] and r["verdict"].startswith("fails in"), r
    assert any("(listed)" in r["verdict"] for r in failing), failing
    _no_horizontal_overflow(browser)
    browser.screenshot(tmp_path / "site-example-checks.png", height=640)


def test_every_check_of_a_run_is_named_once_by_the_site(example):
    """Check ids whose parts hold dots (a refusal case `Tensor.DtypeNotStr`, an accepted form
    `AbortReq.wide_ints`): the run records each check's parts, and the site names every check once,
    under its own name, never a page per fragment of an id."""
    import html

    from conformance.records import load_results
    from conformance.site.model import check_page

    results = load_results(example["out"])
    by_check: dict = {}
    for r in results.results:
        assert r.check is not None and r.check.id == r.id, r  # the parts, as data, that make the id
        by_check.setdefault((r.check.level, r.check.area, r.check.name), []).append(r)
    dotted = [r for r in results.results if "." in r.check.subject]
    assert dotted, "the slice has checks whose case holds a dot"
    site = example["site"]
    pages = sorted(p.name for p in (site / "checks").glob("*.html"))
    assert pages == sorted(check_page(key) for key in by_check), pages  # one page per check, no invented one
    assert "Required.Refuses.Decode.html" in pages and "Required.Refuses.DtypeNotStr.html" not in pages
    impl = (site / "impl" / "minimal-example-0.1.html").read_text()
    for key, records in by_check.items():
        page = (site / "checks" / check_page(key)).read_text()
        for r in records:
            instance = ".".join([r.check.subject, *(value for _, value in r.check.axes)])
            if r.outcome.problem:  # each problem once: its row on the check's page, its anchor on the run's
                assert page.count(f'<th scope="row">{html.escape(instance)}</th>') == 1, (r.id, key)
                assert impl.count(f'id="f-{html.escape(r.id)}"') == 1, r.id
    dtype = (site / "checks" / "Required.Refuses.Decode.html").read_text()
    assert '<th scope="row">Tensor.DtypeNotStr</th>' in dtype  # its subject whole, not "Tensor" and "Decode"
