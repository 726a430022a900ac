"""Issue 22 item 5, cut text, in headless Chromium at the window sizes where it was seen: labels and
buttons show whole ('Re-sc…', 'Downl…'), number boxes keep their -/+ buttons, tables fit without
horizontal scrolling, answers wrap, and no legend covers the map's title."""
from __future__ import annotations

import pytest

from browser_helpers import ARTIFACTS, DashboardServer, app_env, build_tiny_app, chromium_browser, chromium_path, wait_idle

playwright = pytest.importorskip("playwright.sync_api")

# every visible text element of the main area whose text overflows its box (an ellipsis or a clip);
# elements 4 px wide or less are Streamlit's visually hidden accessibility texts
CUT = """(selector) => {
  const cut = [];
  for (const e of document.querySelectorAll(selector)) {
    if (e.clientWidth > 4 && e.scrollWidth > e.clientWidth + 1 && e.innerText.trim()) {
      cut.push(e.innerText.trim().slice(0, 60));
    }
  }
  return cut;
}"""
LABELS = ('[data-testid="stMain"] [data-testid="stWidgetLabel"] *, '
          '[data-testid="stMain"] [data-testid="stDownloadButton"] *, '
          '[data-testid="stMain"] [data-testid="stCheckbox"] *, [data-testid="stMain"] button *')


@pytest.fixture(scope="module")
def browser():
    path = chromium_path()
    if path is None:
        pytest.skip("Chromium is not installed (apt-get install chromium, or `make browser`)")
    with chromium_browser(path) as b:
        yield b


@pytest.fixture(scope="module")
def bert_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cut-bert")
    tiny = build_tiny_app(folder, "bert")
    with DashboardServer(app_env(tiny, folder / "home", eval_limit=24), folder / "server.log") as srv:
        yield srv


def _open(browser, url: str, width: int, height: int):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(url)
    wait_idle(page, 180_000)
    page.wait_for_timeout(500)
    return context, page


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def test_curves_controls_and_downloads_whole_at_1024_by_768(bert_server, browser):
    context, page = _open(browser, f"{bert_server.url}/curves?mask=e:7.e", 1024, 768)
    page.get_by_role("button", name="Compute the curves").click()
    wait_idle(page, 180_000)
    page.get_by_text("Download CSV").first.wait_for()
    _shot(page, "1024x768-curves-computed")
    assert not page.evaluate(CUT, LABELS)
    for step in ("stNumberInputStepDown", "stNumberInputStepUp"):
        assert page.locator(f'[data-testid="{step}"]').first.is_visible(), f"{step} hidden: the box is too narrow"
    context.close()
