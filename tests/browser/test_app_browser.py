"""End-to-end: the dashboard in a real browser (Debian's Chromium driven by Playwright).

Starts ``streamlit run dashboard.py`` on a free localhost port on a tiny model, clicks a head on
the head map and checks that the metric and the kept-head count change, opens the shared link in
a fresh browser session and checks the same mask shows, and saves a screenshot of every page to
test-artifacts/screenshots/ (each page opened by its deep link on the running server). The timing
of the real default is a benchmark, not a test: benchmarks/dashboard_timings.py. Skipped when Chromium is not installed (``make browser``).
"""
from __future__ import annotations

import json
import time

import pytest

from app.core.pages import URL_PATHS

from browser_helpers import ARTIFACTS, click_point, head_points, new_page, wait_idle, wait_metric

pytestmark = pytest.mark.browser
SERVER_EVAL_LIMIT = 40         # examples the dashboard evaluates (tests/browser/conftest.py)
playwright = pytest.importorskip("playwright.sync_api")
PAGES = list(URL_PATHS)        # app.core.pages: the one page list


def test_click_a_head_then_open_the_shared_link(server, browser):
    page = new_page(browser, height=1400)
    page.goto(f"{server.url}/head_map")
    assert wait_metric(page, "heads kept", lambda v: v == "8 / 8")
    loss_before = wait_metric(page, "loss", lambda v: bool(v))
    wait_idle(page)
    points = head_points(page)
    assert points.count() == 8

    started = time.perf_counter()
    click_point(page, points.nth(1))
    wait_metric(page, "heads kept", lambda v: v == "7 / 8")
    loss_after = wait_metric(page, "loss", lambda v: v != loss_before)
    toggle_to_metric = time.perf_counter() - started
    wait_idle(page)                                                 # the latency probe ends the run
    wait_metric(page, "latency (pruned)", lambda v: v.endswith("ms"))
    toggle_to_latency = time.perf_counter() - started
    assert loss_after != loss_before
    page.screenshot(path=str(ARTIFACTS / "headmap-after-click.png"), full_page=True)

    shared = page.evaluate("location.href")              # (page.url misses history.replaceState)
    assert "mask=" in shared and "model=" in shared and "task=" in shared and "scorer=" in shared
    other = new_page(browser, height=1400)                         # a colleague opening the link
    other.goto(shared)
    assert wait_metric(other, "heads kept", lambda v: v == "7 / 8")
    assert wait_metric(other, "loss", lambda v: bool(v)) == loss_after
    assert head_points(other).count() == 7
    wait_idle(other)
    other.screenshot(path=str(ARTIFACTS / "shared-link.png"), full_page=True)
    (ARTIFACTS.parent / "browser-timings.json").write_text(json.dumps(
        {"model": "tiny bert (tests)", "toggle_to_metric_s": round(toggle_to_metric, 3),
         "toggle_to_latency_s": round(toggle_to_latency, 3)}, indent=1))
    other.context.close()
    page.context.close()


@pytest.mark.parametrize("file", PAGES)
def test_screenshot_every_page(server, browser, file):
    url_path = "" if file == PAGES[0] else file                      # the default page lives at /
    page = new_page(browser, height=1800)       # Streamlit scrolls inside the page: a tall viewport shows it all
    started = time.perf_counter()
    page.goto(f"{server.url}/{url_path}")
    page.locator("h1").first.wait_for()
    wait_idle(page)
    seconds = time.perf_counter() - started
    assert page.locator('[data-testid="stException"]').count() == 0, f"{url_path} shows a traceback"
    page.screenshot(path=str(ARTIFACTS / f"{file}.png"), full_page=True)
    print(f"{url_path}: rendered in {seconds:.2f} s")
    page.context.close()
