"""End-to-end (Chromium + Playwright): a crafted link cannot make the dashboard fetch or link to
another site (issue 8, item 3). The link puts Markdown image and link syntax, broken out of a
backtick, into the task, scorer and model; the page must send no request beyond the dashboard's
own server and hold no ``<a>`` or ``<img>`` pointing at another host (the menu's links to the
dashboard's own pages keep the query string, crafted text included).
Skipped when Chromium is not installed (``make browser``).
"""
from __future__ import annotations

from urllib.parse import quote, urlsplit

import pytest

from browser_helpers import ARTIFACTS, new_page

pytestmark = pytest.mark.browser
SERVER_EVAL_LIMIT = 40         # examples the dashboard evaluates (tests/browser/conftest.py)
playwright = pytest.importorskip("playwright.sync_api")
EVIL = "x` ![pic](http://example.invalid/track.png) [click me](http://example.invalid/phish) `y"


@pytest.mark.parametrize("params", [{"task": EVIL}, {"task": EVIL, "scorer": EVIL, "model": EVIL, "mask": EVIL}])
def test_a_crafted_link_fetches_and_links_nothing_elsewhere(server, browser, params):
    page = new_page(browser)
    foreign = []
    page.on("request", lambda r: foreign.append(r.url)
            if urlsplit(r.url).hostname not in ("127.0.0.1", "localhost") and not r.url.startswith(("data:", "blob:"))
            else None)
    query = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items())
    page.goto(f"{server.url}/head_map?{query}")
    page.wait_for_selector('[data-testid="stSidebar"] [data-testid="stMarkdown"]')
    page.get_by_text("Task").first.wait_for()
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidgetRunningIcon\"]')"
                           " && !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=90_000)
    page.wait_for_timeout(1500)
    page.screenshot(path=str(ARTIFACTS / f"crafted-link-{len(params)}.png"), full_page=True)
    # the menu's own links carry the query string (with the crafted text in it): only the host counts
    hosts = page.evaluate("() => [...document.querySelectorAll('a[href], img[src]')]"
                          ".map(e => new URL(e.href || e.src, location.href).hostname)")
    bad = page.evaluate("() => [...document.querySelectorAll('a[href], img[src]')].filter(e => new URL(e.href || e.src, location.href).hostname === 'example.invalid').map(e => e.outerHTML + ' IN ' + (e.closest('[data-testid]') || {}).getAttribute?.('data-testid') + ' / ' + e.parentElement.outerHTML.slice(0, 300))")
    assert not bad, bad
    assert hosts and not [h for h in hosts if h not in ("127.0.0.1", "localhost")], hosts
    assert page.locator('img[src*="example.invalid"]').count() == 0
    sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
    # shown as text: in the sidebar, or, for a model that cannot load, in the error that says the default is used
    shown = page.locator('[data-testid="stAlert"]').all_inner_texts() if "model" in params else [sidebar]
    assert any("![pic](http://example.invalid/track.png)" in t for t in shown), shown
    if "scorer" in params:
        assert "Score gradient" in " ".join(sidebar.split())            # the scorer in use, not the link's
    assert foreign == [], foreign
