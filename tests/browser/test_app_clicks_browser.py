"""Every click counts (issue 31): heads clicked, and a preset pressed, while the Head map's live panel is
still updating are applied, in order, and the panel ends on the metric of the mask on screen.

Drives ``streamlit run dashboard.py`` on the embedded default (MiniLM-L6, 6 x 12 heads, 128 examples: an
evaluation takes long enough to click into) in Debian's Chromium. Each test ends with the session's link
carrying exactly the mask the clicks made, and the panel showing what ``python -m pruning_core evaluate
--mask-link`` computes for that link.
"""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.parse

import pytest

from browser_helpers import (ARTIFACTS, DashboardServer, LIVE_STRIP, POLL_MS, ROOT, head_points, new_page,
                             wait_idle, wait_live)
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.core.share_link import decode_mask

pytestmark = [pytest.mark.browser, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")

LIMIT = 128                                      # the benchmark's size: about a second per evaluation here
LAYOUT = HeadLayout({"encoder_self": (12,) * 6})  # the default's heads
KIND = "encoder_self"
SETTLED_S = 120                                  # a lost click leaves the count short for good: fail after this
# Each test clicks its own heads: a mask another test evaluated would be a cache hit, drawn before a second click.


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from pruning_core.modeling.loading import default_model_dir

    if not (default_model_dir() / "config.json").is_file():
        pytest.skip("the embedded default is not prepared (`headprune prepare`)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "HEADPRUNE_APP_DEVICE": "cpu",
           "HEADPRUNE_APP_EVAL_LIMIT": str(LIMIT)}
    with DashboardServer(env, ARTIFACTS.parent / "streamlit-clicks.log") as srv:
        yield srv


@pytest.fixture
def page(server, browser):
    """A fresh session on the Head map, its first metric drawn and the server done with the page load."""
    page = new_page(browser, height=1000)
    page.goto(f"{server.url}/head_map")
    wait_live(page, "72 / 72", timeout_s=600)
    wait_idle(page, 600_000)
    yield page
    page.context.close()


def boxes(page, heads: list[int]) -> list[dict]:
    """Screen boxes of layer 0's heads ``heads`` while every head is kept (one marker per head, in order)."""
    points = head_points(page)
    assert points.count() == 72
    return [points.nth(h).bounding_box() for h in heads]


def click(page, box: dict) -> None:
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


def settled(page, kept: str) -> bool:
    """Whether the panel shows ``kept`` heads with their metric drawn."""
    strip = page.locator(LIVE_STRIP).text_content()
    return kept in strip and "updating" not in strip


def link_mask(page) -> HeadMask:
    url = page.evaluate("location.href")             # (page.url misses history.replaceState)
    return decode_mask(dict(urllib.parse.parse_qsl(urllib.parse.urlparse(url).query))["mask"], LAYOUT)


def without(*heads: int) -> HeadMask:
    mask = HeadMask.full(LAYOUT)
    for h in heads:
        mask = mask.toggled(KIND, 0, h)
    return mask


def assert_settled_on(page, tmp_path, expected: HeadMask) -> None:
    """The panel settles on ``expected`` (heads kept, the link's mask) with the metric and loss the command
    line computes for the session's link."""
    strip = wait_live(page, f"{expected.n_kept} / {expected.n_total}", timeout_s=SETTLED_S)
    assert link_mask(page) == expected
    from app.core import uncertainty
    from pruning_core.evaluation.results import EvalResult

    out = tmp_path / "eval.json"
    subprocess.run([sys.executable, "-m", "pruning_core", "evaluate", "default", "--task", "movie-sentiment",
                    "--limit", str(LIMIT), "--device", "cpu", "--mask-link", page.evaluate("location.href"),
                    "--out", str(out)], cwd=ROOT, check=True, capture_output=True)
    ev = EvalResult.from_json(json.loads(out.read_text()))
    shown = " ".join(page.locator(LIVE_STRIP).text_content().split())
    assert f" {uncertainty.shown(ev).value} · loss {ev.loss:.4f}" in shown, (shown, strip)


def test_two_clicks_200_ms_apart(page, tmp_path):
    first, second = boxes(page, [1, 2])
    click(page, first)
    page.wait_for_timeout(200)
    assert not settled(page, "71 / 72")            # the second click comes before the first one's metric
    click(page, second)
    assert_settled_on(page, tmp_path, without(1, 2))


def test_a_click_during_the_latency_timing(page, tmp_path):
    first, second = boxes(page, [3, 4])
    click(page, first)
    page.wait_for_function(                          # the metric is drawn, the latency still being timed
        "sel => { const s = document.querySelector(sel); return !!s && s.textContent.includes('71 / 72')"
        " && !s.textContent.includes('updating') && document.body.textContent.includes('latency: updating'); }",
        arg=LIVE_STRIP, timeout=SETTLED_S * 1000, polling=POLL_MS // 2)
    click(page, second)
    assert_settled_on(page, tmp_path, without(3, 4))


def test_five_clicks_as_fast_as_they_come(page, tmp_path):
    heads = [5, 6, 7, 8, 9]
    for box in boxes(page, heads):
        click(page, box)
    assert_settled_on(page, tmp_path, without(*heads))


def test_a_preset_pressed_during_an_evaluation(page, tmp_path):
    (first,) = boxes(page, [10])
    click(page, first)
    page.wait_for_timeout(150)
    assert not settled(page, "71 / 72")
    page.get_by_role("button", name="Invert").click()   # only head 10 kept: the click, then the preset, in order
    assert_settled_on(page, tmp_path, without(10).inverted())
