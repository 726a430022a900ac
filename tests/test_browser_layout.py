"""The dashboard on a projector (1024 x 768, issue 8 item 10) in headless Chromium: no metric value,
label or change is cut ('70.…', 'within n…'), and no two head-map squares overlap."""
from __future__ import annotations

import pytest

from browser_helpers import (ARTIFACTS, DashboardServer, app_env, build_tiny_app, chromium_browser, chromium_path,
                             wait_idle)

playwright = pytest.importorskip("playwright.sync_api")

PAGES = ["", "head_map", "examples", "curves", "speed"]       # "" = Model & data
MASK = "e:7.e"                                               # heads removed: changes, deltas and latency show
CUT = """() => {
  const cut = [];
  for (const box of document.querySelectorAll('[data-testid="stMetric"]')) {
    for (const e of box.querySelectorAll('*')) {
      if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1) {
        cut.push(box.innerText.replace(/\\n/g, ' | '));
        break;
      }
    }
  }
  return cut;
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("layout")
    tiny = build_tiny_app(folder, "bert")
    with DashboardServer(app_env(tiny, folder / "home", eval_limit=24), folder / "server.log") as srv:
        yield srv


@pytest.fixture(scope="module")
def browser():
    path = chromium_path()
    if path is None:
        pytest.skip("Chromium is not installed (apt-get install chromium, or `make browser`)")
    with chromium_browser(path) as b:
        yield b


def test_nothing_is_cut_at_1024_by_768(server, browser):
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(120_000)
    cut, checked = {}, 0
    for name in PAGES:
        page.goto(f"{server.url}/{name}?mask={MASK}")
        wait_idle(page, 180_000)
        page.wait_for_timeout(500)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"1024x768-{name or 'model_data'}.png"))
        checked += page.locator('[data-testid="stMetric"]').count()
        found = page.evaluate(CUT)
        if found:
            cut[name or "model_data"] = found
    assert checked >= 8                                        # the head map alone shows 6 or more
    assert not cut, cut
    context.close()


def test_head_map_squares_do_not_overlap_at_1024_by_768(server, browser):
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(f"{server.url}/head_map?mask={MASK}")
    wait_idle(page, 180_000)
    grid = page.locator('[data-testid="stPlotlyChart"]').first
    boxes = [p.bounding_box() for p in grid.locator("path.point").all()]
    boxes = [b for b in boxes if b and b["width"] > 4]
    assert len(boxes) >= 8
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            overlap_x = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
            overlap_y = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
            assert overlap_x <= 1 or overlap_y <= 1, (a, b)
    context.close()
