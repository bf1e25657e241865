"""The conformance site in a real browser (Debian's headless chromium, driven over its DevTools pipe).

What a person sees at 1280 x 900: the overview table in the first screen, a failure's message
one click away from the overview, nothing wider than the window on any page type.
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


def _run(impl: str, out: Path) -> Path:
    """A real, short conformance run: msgpack only, a few areas."""
    subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", impl, "--transport", "msgpack",
         "--report-dir", str(out), "--", "-k", SLICE],
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
