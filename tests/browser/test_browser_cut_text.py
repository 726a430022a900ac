"""Issue 22 item 5, cut text, in headless Chromium at the window sizes where it was seen: labels and
buttons show whole ('Re-sc…', 'Downl…'), number boxes keep their -/+ buttons, tables fit without
horizontal scrolling, answers wrap, and no legend covers the map's title."""
from __future__ import annotations

import pytest

from browser_helpers import ARTIFACTS, POLL_MS, ROOT, DashboardServer, app_env, build_tiny_app, wait_idle

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


def test_curves_controls_and_downloads_whole_at_1024_by_768(server, browser):
    context, page = _open(browser, f"{server.url}/curves?mask=e:7.e", 1024, 768)
    page.get_by_role("button", name="Compute the curves").click()
    wait_idle(page, 180_000)
    page.get_by_text("Download CSV").first.wait_for()
    _shot(page, "1024x768-curves-computed")
    assert not page.evaluate(CUT, LABELS)
    for step in ("stNumberInputStepDown", "stNumberInputStepUp"):
        assert page.locator(f'[data-testid="{step}"]').first.is_visible(), f"{step} hidden: the box is too narrow"
    context.close()


@pytest.fixture(scope="module")
def smollm2_like_server(tmp_path_factory):
    """A tiny Llama shaped like SmolLM2-135M's map: 30 layers of 9 query heads in 3 key/value groups."""
    import random

    import transformers

    from browser_helpers import _WORDS, TinyApp, _spread_weights
    from tiny import VOCAB, make_bert_tokenizer

    folder = tmp_path_factory.mktemp("cut-llama9")
    config = transformers.LlamaConfig(vocab_size=len(VOCAB), hidden_size=36, intermediate_size=64,
                                      num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                                      max_position_embeddings=64, pad_token_id=0, bos_token_id=5, eos_token_id=6,
                                      tie_word_embeddings=True)
    model = _spread_weights(transformers.LlamaForCausalLM(config).eval(), 0)
    model.save_pretrained(folder / "llama9")
    make_bert_tokenizer(folder / "tok").save_pretrained(folder / "llama9")
    rng = random.Random(0)
    text = folder / "docs.txt"
    text.write_text("\n".join(" ".join(rng.choices(_WORDS, k=rng.randint(6, 14))) for _ in range(24)) + "\n")
    tiny = TinyApp(folder / "llama9", f"file:{text}", "llama")
    with DashboardServer(app_env(tiny, folder / "home", eval_limit=8), folder / "server.log") as srv:
        yield srv


def _overlap(a: dict, b: dict) -> float:
    x = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
    y = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
    return min(x, y)


def test_head_map_legend_clear_of_the_title_on_a_smollm2_like_map(smollm2_like_server, browser):
    context, page = _open(browser, f"{smollm2_like_server.url}/head_map", 1366, 900)
    _shot(page, "1366x900-head_map-llama9")
    chart = page.locator('[data-testid="stPlotlyChart"]').first
    svg = chart.locator("svg.main-svg").first.bounding_box()
    title = chart.locator(".gtitle").first.bounding_box()
    assert title["x"] + title["width"] <= svg["x"] + svg["width"], (title, svg)        # not clipped
    items = [t.bounding_box() for t in chart.locator(".legend .traces").all()]
    assert len(items) == 2
    for item in items:
        assert _overlap(item, title) <= 0, (item, title)
    context.close()


def _tables_drawn(page, n: int) -> None:
    """Wait until at least ``n`` tables of the main area are drawn (each grid's scroller laid out) and the script
    has finished."""
    page.wait_for_function(
        "n => [...document.querySelectorAll('[data-testid=\"stMain\"] [data-testid=\"stDataFrame\"]')]"
        ".filter(t => { const s = t.querySelector('.dvn-scroller'); return s && s.clientWidth > 0; }).length >= n",
        arg=n, timeout=120_000, polling=POLL_MS)
    wait_idle(page, 180_000)


# a table (glide data grid) wider than its frame scrolls sideways: its scroller overflows
TABLES_SCROLL = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] [data-testid="stDataFrame"]'))
  .filter(t => { const s = t.querySelector('.dvn-scroller'); return s && s.scrollWidth > s.clientWidth + 1; })
  .map(t => t.innerText.slice(0, 40))"""


def test_per_example_tables_fit_at_1366(server, browser):
    context, page = _open(browser, f"{server.url}/examples?mask=e:7.e", 1366, 900)
    page.get_by_text("Accuracy, F1 and MCC", exact=True).wait_for()
    _tables_drawn(page, 3)
    _shot(page, "1366x900-examples")
    assert not page.evaluate(TABLES_SCROLL)
    context.close()


def test_smp_compare_table_fits_at_1366(server, browser):
    """The comparison's table (benchmarks/results/smp_compare.json) needs no sideways scrolling."""
    if not (ROOT / "benchmarks" / "results" / "smp_compare.json").is_file():
        pytest.skip("benchmarks/results/smp_compare.json is missing")
    context, page = _open(browser, f"{server.url}/smp_compare", 1366, 900)
    page.get_by_text("Fine-tuning CPU time", exact=False).first.wait_for()
    _tables_drawn(page, 1)
    _shot(page, "1366x900-smp_compare")
    assert not page.evaluate(TABLES_SCROLL)
    context.close()


@pytest.fixture(scope="module")
def long_text_server(tmp_path_factory):
    """The tiny BERT on a task of 60-word reviews, so the per-example tables hold long texts."""
    import random

    folder = tmp_path_factory.mktemp("cut-long")
    tiny = build_tiny_app(folder, "bert")
    rng = random.Random(1)
    words = "good bad movie film great awful plot acting fun dull love hate story scene".split()
    rows = ["text,label"] + [" ".join(rng.choices(words, k=60)) + f",{i % 2}" for i in range(48)]
    (folder / "tiny-bert.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with DashboardServer(app_env(tiny, folder / "home", eval_limit=24), folder / "server.log") as srv:
        yield srv


def test_per_example_tables_of_long_texts_fit_at_1366(long_text_server, browser):
    context, page = _open(browser, f"{long_text_server.url}/examples?mask=e:7.e", 1366, 900)
    page.get_by_text("Largest loss increases", exact=True).wait_for()
    _tables_drawn(page, 2)
    _shot(page, "1366x900-examples-long")
    assert not page.evaluate(TABLES_SCROLL)
    context.close()
