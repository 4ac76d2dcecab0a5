"""The HTML report in a real browser: headless Chromium (Debian's /usr/bin/chromium) driven by
Playwright. Install: apt-get install -y chromium; pip install playwright (no `playwright install`:
it would download a browser of its own)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from attnprof.cli import main

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("ATTNPROF_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed: pip install playwright"
    )
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _open(browser, path: Path):  # type: ignore[no-untyped-def]
    """Open a local file; collect console errors, page errors and every URL the page requests."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, errors, requests


@pytest.mark.parametrize("lang", ["id", "th", "en"])
def test_report_renders_offline_with_every_plot(browser, cpu_run, tmp_path: Path, lang: str) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / f"report.{lang}.html"
    assert main(["report", str(cpu_run[0]), "--lang", lang, "-o", str(out)]) == 0
    page, errors, requests = _open(browser, out)

    assert errors == []
    assert [u for u in requests if not u.startswith("file://")] == []  # nothing fetched: works offline
    plots = page.locator("#plots figure.plot svg")
    assert plots.count() == 3
    for i in range(plots.count()):
        box = plots.nth(i).bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 50, (i, box)
        # drawn, not just sized: each SVG holds its bars or boxes
        assert plots.nth(i).locator("path").count() > 5
    assert page.locator("#comparison table tbody tr").count() >= 5
    assert page.locator("#expectations table tbody tr").count() > 10
    assert page.locator("ul.summary li").count() >= 4
    assert page.locator("html").get_attribute("lang") == lang
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"report-{lang}.png"), full_page=True)
    page.close()


@pytest.mark.parametrize("lang", ["th", "id", "en"])
def test_store_report_renders_offline_with_its_scaling_plots(
    browser, cpu_store, tmp_path: Path, lang: str
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / f"store.{lang}.html"
    assert main(["report", "--store", str(cpu_store), "--lang", lang, "-o", str(out)]) == 0
    page, errors, requests = _open(browser, out)

    assert errors == []
    assert [u for u in requests if not u.startswith("file://")] == []
    plots = page.locator("figure.plot svg")
    assert plots.count() == 2  # one panel per head_dim
    for i in range(plots.count()):
        box = plots.nth(i).bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 50, (i, box)
        # one drawn line per variant that ran
        for variant in ("naive-inplace", "sdpa-flash"):
            line = plots.nth(i).locator(f'g[id$="-series-{variant}"]')
            assert line.count() == 1
            lbox = line.bounding_box()
            assert lbox is not None and lbox["width"] > 10, (i, variant, lbox)
    assert page.locator("#recommendation-table tbody tr").count() == 6
    assert page.locator("#results-table tbody tr").count() == 18
    assert page.locator("ul.summary li").count() >= 8
    assert page.locator("html").get_attribute("lang") == lang
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"store-report-{lang}.png"), full_page=True)
    page.close()


@pytest.mark.parametrize("lang", ["en", "id", "th"])
def test_comparison_table_fits_a_1200px_page(browser, cpu_run, tmp_path: Path, lang: str) -> None:  # type: ignore[no-untyped-def]
    """Every column of the comparison (findings and TFLOP/s included) is visible without a scroll
    bar on a 1200 px wide page, in every language; printing keeps it inside the page."""
    out = tmp_path / f"report.{lang}.html"
    assert main(["report", str(cpu_run[0]), "--lang", lang, "-o", str(out)]) == 0
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(out.as_uri())
    page.wait_for_load_state("load")
    scroll, client = page.evaluate(
        "() => { const t = document.querySelector('#comparison table');"
        " return [t.scrollWidth, t.parentElement.clientWidth]; }"
    )
    assert scroll <= client, (lang, scroll, client)
    page.emulate_media(media="print")
    scroll, client = page.evaluate(
        "() => { const t = document.querySelector('#comparison table');"
        " return [t.scrollWidth, t.parentElement.clientWidth]; }"
    )
    assert scroll <= client, ("print", lang, scroll, client)
    page.close()


QWEN = "AMD-AGI__TraceLens__tests__traces__mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


@pytest.mark.parametrize("lang", ["en", "id", "th"])
def test_trace_report_draws_the_roofline_and_the_per_shape_table(browser, tmp_path: Path, lang: str) -> None:  # type: ignore[no-untyped-def]
    from _paths import TRACES

    out = tmp_path / f"qwen.{lang}.html"
    assert main(["report", str(TRACES / QWEN), "--lang", lang, "-o", str(out)]) == 0
    page, errors, requests = _open(browser, out)
    assert errors == []
    assert [u for u in requests if not u.startswith("file://")] == []
    roof = page.locator("#perf figure.roofline svg")
    assert roof.count() == 1
    box = roof.first.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 150
    # the points and the roofs are drawn: paths (markers, lines) beyond the axes' own
    assert roof.first.locator("path").count() > 20
    assert page.locator("#perf table tbody tr").count() >= 10
    assert page.locator("html").get_attribute("lang") == lang
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"roofline-{lang}.png"), full_page=True)
    page.close()
