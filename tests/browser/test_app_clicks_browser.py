"""Every click counts: heads clicked, a preset pressed and Undo pressed while the Head map's live panel is still
updating are applied, in order, and the panel ends on the metric of the mask on screen, on the default, SmolLM2,
Whisper-base and the Bergamot translation student (whose loss is drawn before its BLEU).

Drives ``streamlit run dashboard.py`` on each prepared model in Debian's Chromium. Each test ends with the
session's link carrying exactly the mask the clicks made, and the panel showing what ``python -m pruning_core
evaluate --mask-link`` computes for that link.
"""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass

import pytest

from browser_helpers import (LIVE_STRIP, POLL_MS, ROOT, Holds, head_points, new_page, page_state, wait_idle,
                             wait_live)
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.core.io.share_link import decode_mask

pytestmark = [pytest.mark.browser, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")


@dataclass(frozen=True)
class Case:
    model: str
    task: str
    limit: int              # the dashboard's evaluation size for this model: long enough to click into
    layout: HeadLayout      # the model's heads; the tests click heads of the first grid's first layers
    metric_first: bool = False  # the metric is drawn while the loss is still computed (translation, speech: they decode)

    @property
    def kind(self) -> str:
        return next(iter(self.layout.kinds))

    @property
    def total(self) -> str:
        return f"{self.layout.total_heads} / {self.layout.total_heads}"


CASES = [
    Case("default", "movie-sentiment", 128, HeadLayout({"encoder_self": (12,) * 6})),
    Case("smollm2", "movie-text", 16, HeadLayout({"decoder_self": (9,) * 30})),
    Case("whisper-base", "movie-speech", 8,
         HeadLayout({"encoder_self": (8,) * 6, "decoder_self": (8,) * 6, "cross": (8,) * 6}), metric_first=True),
    Case("bergamot-en-pt", "bible-en-pt", 128, HeadLayout({"encoder_self": (8,) * 6, "cross": (8,) * 2}),
         metric_first=True),
]
SETTLED_S = 240         # a lost click leaves the count short for good: fail after this
# Each test clicks its own heads (HEADS): a mask another test evaluated would be a cache hit, drawn before a
# second click could land.
HEADS = {"two": (1, 2), "latency": (3, 4), "five": (5, 6, 7, 8, 9), "preset": (10,), "undo": (11, 12),
         "drawing": (13, 14), "redrawn": (15, 16), "early": (17,)}
# Whether the strip ever showed the new count with its metric while its loss was still computed.
EARLY_WATCH = """([sel, kept]) => {
  window.__hpEarly = null;
  const observer = new MutationObserver(() => {
    const s = document.querySelector(sel);
    if (s && s.textContent.includes(kept) && s.textContent.includes('computing') && !/loss \\d/.test(s.textContent)) {
      window.__hpEarly = s.textContent; observer.disconnect(); }
  });
  observer.observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


@pytest.fixture(scope="module", params=CASES, ids=lambda c: c.model)
def case(request) -> Case:
    """The prepared model a module's server runs; skipped when it is not prepared."""
    from pruning_core.modeling.sources import catalog

    if not catalog.get(request.param.model).is_prepared():
        pytest.skip(f"{request.param.model} is not prepared: run `{catalog.get(request.param.model).command()}` "
                    "(make test does)")
    return request.param


@pytest.fixture(scope="module")
def holds(case, tmp_path_factory) -> Holds:
    """Work the module's server holds until a test releases it (a click made while the server is mid-work)."""
    return Holds(tmp_path_factory.mktemp(f"holds-{case.model}"))


@pytest.fixture(scope="module")
def dashboard_env(case, holds) -> dict[str, str]:
    """The dashboard on the real ``case.model`` and ``case.task`` (the conftest's ``server`` runs it)."""
    return {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "HEADPRUNE_APP_DEVICE": "cpu",
            "HEADPRUNE_APP_MODEL": case.model, "HEADPRUNE_APP_TASK": case.task,
            "HEADPRUNE_APP_EVAL_LIMIT": str(case.limit), **holds.env()}


@pytest.fixture
def page(server, case, browser, holds):
    """A fresh session on the Head map, its first metric drawn and the server done with the page load."""
    page = new_page(browser, height=1000)
    page.goto(f"{server.url}/head_map")
    wait_live(page, case.total, timeout_s=900)
    wait_idle(page, 900_000)
    yield page
    holds.release()             # a failed test leaves nothing held for the next
    page.context.close()


# The boxes of the first grid's kept heads numbered ``heads``, the last scrolled into view, read in one go (the
# server may redraw the map at any moment; a square keeps its place on a new drawing, so the boxes stay true).
BOXES = """(heads) => {
  const grid = document.querySelector('[data-testid="stPlotlyChart"]');
  const points = grid.querySelectorAll('g.trace.scatter')[2].querySelectorAll('path.point');
  points[Math.max(...heads)].scrollIntoViewIfNeeded(true);
  return heads.map(h => { const r = points[h].getBoundingClientRect();
                          return {x: r.x, y: r.y, width: r.width, height: r.height}; });
}"""


def boxes(page, case: Case, heads: tuple[int, ...]) -> list[dict]:
    """Screen boxes of the first grid's heads numbered ``heads`` (layer by layer) while every head is kept."""
    from playwright.sync_api import Error as PlaywrightError

    for _ in range(20):
        head_points(page)                   # a grid drawn
        try:
            return page.evaluate(BOXES, list(heads))
        except PlaywrightError:             # drawn anew between two reads: read it again
            page.wait_for_timeout(POLL_MS)
    raise AssertionError(f"the map never stayed drawn long enough to read: {page_state(page)}")


def wait_drawn(page, case: Case, mask: HeadMask) -> None:
    """Wait until the first grid shows ``mask``'s kept heads (plotly has drawn the new map)."""
    kept = sum(sum(row) for row in mask.kinds[case.kind])
    page.wait_for_function(
        "n => { const g = document.querySelector('[data-testid=\"stPlotlyChart\"]');"
        " const t = g && g.querySelectorAll('g.trace.scatter')[2]; return !!t && t.querySelectorAll('path.point').length === n; }",
        arg=kept, timeout=SETTLED_S * 1000, polling=POLL_MS)


def click(page, box: dict) -> None:
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


def settled(page, kept: str) -> bool:
    """Whether the panel shows ``kept`` heads with their metric drawn."""
    strip = page.locator(LIVE_STRIP).text_content()
    return kept in strip and "updating" not in strip


def link_mask(page, case: Case) -> HeadMask:
    url = page.evaluate("location.href")             # (page.url misses history.replaceState)
    return decode_mask(dict(urllib.parse.parse_qsl(urllib.parse.urlparse(url).query))["mask"], case.layout)


def without(case: Case, *heads: int) -> HeadMask:
    """All heads kept but the first grid's heads numbered ``heads`` (layer by layer)."""
    mask = HeadMask.full(case.layout)
    rows = case.layout.kinds[case.kind]
    for h in heads:
        mask = mask.toggled(case.kind, h // rows[0], h % rows[0])
    return mask


def one_fewer(case: Case) -> str:
    return f"{case.layout.total_heads - 1} / {case.layout.total_heads}"


def assert_settled_on(page, case: Case, tmp_path, expected: HeadMask) -> None:
    """The panel settles on ``expected`` (heads kept, the link's mask) with the metric and loss the command
    line computes for the session's link."""
    strip = wait_live(page, f"{expected.n_kept} / {expected.n_total}", timeout_s=SETTLED_S)
    assert link_mask(page, case) == expected
    from app.core import uncertainty
    from pruning_core.evaluation.results import EvalResult

    out = tmp_path / "eval.json"
    subprocess.run([sys.executable, "-m", "pruning_core", "evaluate", case.model, "--task", case.task,
                    "--limit", str(case.limit), "--device", "cpu", "--mask-link", page.evaluate("location.href"),
                    "--out", str(out)], cwd=ROOT, check=True, capture_output=True)
    ev = EvalResult.from_json(json.loads(out.read_text()))
    shown = " ".join(page.locator(LIVE_STRIP).text_content().split())
    value = uncertainty.unitless(ev.metric_name, uncertainty.shown(ev).value)       # the strip names the unit once
    assert f" {value} · loss {ev.loss:.4f}" in shown, (shown, strip)


def test_a_second_click_during_the_first_ones_evaluation(case, page, holds, tmp_path):
    """The second click comes while the server evaluates the first click's mask (held there until it lands)."""
    first, second = boxes(page, case, HEADS["two"])
    holds.arm("evaluation", without(case, HEADS["two"][0]))
    click(page, first)
    holds.wait_held("evaluation", SETTLED_S)
    assert not settled(page, one_fewer(case))        # nothing drawn of a mask still being evaluated
    click(page, second)
    holds.release("evaluation")
    assert_settled_on(page, case, tmp_path, without(case, *HEADS["two"]))


def test_a_click_during_the_latency_timing(case, page, holds, tmp_path):
    """The second click comes while the first click's metric is drawn and its latency is timed (the server holds
    the timing, in the CPU queue as a timing is, until the click lands)."""
    first, second = boxes(page, case, HEADS["latency"])
    holds.arm("latency", without(case, HEADS["latency"][0]))
    click(page, first)
    holds.wait_held("latency", SETTLED_S)
    wait_live(page, one_fewer(case), timeout_s=SETTLED_S)           # the metric drawn, the timing still held
    labels = [t.strip() for t in page.locator('[data-testid="stMetricLabel"]').all_inner_texts()]
    assert "latency (pruned)" not in labels          # nothing shown of a timing still held
    click(page, second)
    holds.release("latency")
    assert_settled_on(page, case, tmp_path, without(case, *HEADS["latency"]))


def test_five_clicks_as_fast_as_they_come(case, page, tmp_path):
    for box in boxes(page, case, HEADS["five"]):
        click(page, box)
    assert_settled_on(page, case, tmp_path, without(case, *HEADS["five"]))


def test_a_preset_pressed_during_an_evaluation(case, page, holds, tmp_path):
    """Invert pressed while the server evaluates the clicked mask (held there until the press lands) inverts the
    mask with that click in it."""
    (first,) = boxes(page, case, HEADS["preset"])
    holds.arm("evaluation", without(case, *HEADS["preset"]))
    click(page, first)
    holds.wait_held("evaluation", SETTLED_S)
    assert not settled(page, one_fewer(case))
    page.get_by_role("button", name="Invert").click()   # only the clicked head kept: the click, then the preset
    holds.release("evaluation")
    assert_settled_on(page, case, tmp_path, without(case, *HEADS["preset"]).inverted())


def test_undo_pressed_right_after_a_click(case, page, tmp_path):
    """Undo pressed a few milliseconds after a click takes back that click (edits are applied in the order
    made, not in the order the page lists its widgets, even when Streamlit delivers both in one rerun)."""
    first, second = boxes(page, case, HEADS["undo"])
    undo = page.get_by_role("button", name="Undo")
    click(page, first)
    undo.wait_for(state="visible")
    page.wait_for_function("() => [...document.querySelectorAll('button')].some(b => b.innerText.includes('Undo')"
                           " && !b.disabled)", polling=POLL_MS // 2)
    click(page, second)
    undo.click(no_wait_after=True)
    assert_settled_on(page, case, tmp_path, without(case, HEADS["undo"][0]))


def test_undo_redrawn_between_press_and_release(case, page, holds, tmp_path):
    """Undo counts at the press: when Streamlit redraws the button between the press and the release (the
    rerun of the click before it), the browser sends no click, and the press alone must count. The press comes
    while the server works on the click before it (held there), so it lands on the button the test aimed at."""
    first, second = boxes(page, case, HEADS["redrawn"])
    both = without(case, *HEADS["redrawn"])
    click(page, first)
    page.wait_for_function("() => [...document.querySelectorAll('button')].some(b => b.innerText.includes('Undo')"
                           " && !b.disabled)", polling=POLL_MS // 2)
    holds.arm("evaluation", both)
    click(page, second)
    holds.wait_held("evaluation", SETTLED_S)
    page.wait_for_function(                          # the second click's rerun has drawn its map and is waiting
        "([sel, kept]) => { const s = document.querySelector(sel); return !!s && s.textContent.includes(kept)"
        " && s.textContent.includes('updating'); }", arg=[LIVE_STRIP, f"{both.n_kept} / {both.n_total}"],
        timeout=SETTLED_S * 1000, polling=POLL_MS)
    wait_drawn(page, case, both)
    undo = page.get_by_role("button", name="Undo")
    undo.scroll_into_view_if_needed()
    box = undo.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    undo.evaluate("b => { const parent = b.parentNode, next = b.nextSibling;"      # Streamlit redraws it
                  " b.remove(); parent.insertBefore(b, next); }")
    page.mouse.up()
    logged = page.evaluate("() => window.__hpMapClicks.clicks.slice(-1)")
    assert logged == [["edit", "undo"]], (logged, page_state(page))      # the press landed on Undo
    holds.release("evaluation")
    assert_settled_on(page, case, tmp_path, without(case, HEADS["redrawn"][0]))


def test_a_click_on_a_grid_still_being_drawn(case, page, tmp_path):
    """A press on a grid that plotly has not laid out yet (the map of the previous click's mask, being drawn:
    up to 150 ms on a loaded machine) counts once it is, and the Undo pressed after it waits its turn."""
    first, second = boxes(page, case, HEADS["drawing"])
    undo = page.get_by_role("button", name="Undo")
    click(page, first)
    page.wait_for_function("() => [...document.querySelectorAll('button')].some(b => b.innerText.includes('Undo')"
                           " && !b.disabled)", polling=POLL_MS // 2)
    page.evaluate("""() => {          // the grid looks not drawn yet for 400 ms
      const gd = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
      gd.classList.remove('js-plotly-plot');
      setTimeout(() => gd.classList.add('js-plotly-plot'), 400);
    }""")
    click(page, second)
    undo.click(no_wait_after=True)
    assert_settled_on(page, case, tmp_path, without(case, HEADS["drawing"][0]))


def test_the_metric_shows_before_the_loss_only_where_decoding_gives_it(case, page, holds, tmp_path):
    """The student's and Whisper's clicks show the new BLEU or WER while their loss is still computed
    (``Task.metric_first``; the server holds the loss until the page shows the metric); the other models' metric and
    loss come from one pass and show together. Both settle on what the command line computes."""
    (box,) = boxes(page, case, HEADS["early"])
    mask = without(case, *HEADS["early"])
    page.evaluate(EARLY_WATCH, [LIVE_STRIP, one_fewer(case)])
    holds.arm("loss", mask)
    click(page, box)
    if case.metric_first:
        holds.wait_held("loss", SETTLED_S)
        page.wait_for_function("() => window.__hpEarly !== null", timeout=SETTLED_S * 1000, polling=POLL_MS)
        holds.release("loss")
    assert_settled_on(page, case, tmp_path, mask)
    early = page.evaluate("() => window.__hpEarly")
    if case.metric_first:
        assert "computing" in early and "updating" not in early, early
    else:
        assert early is None, f"a metric shown before its loss: {early!r}"
        assert not (holds.folder / "loss.held").exists(), "an evaluation reported its metric before its loss"
