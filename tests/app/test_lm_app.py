"""The dashboard on a language model: a tiny random Llama (4 query heads sharing 2 key/value heads per
layer) saved to a folder and a ``.txt`` file task. Model & data shows perplexity with all heads and its
interval, the Head map toggles heads with perplexity live (lower is better) and explains the key/value
groups, Curves plots perplexity against heads removed, Attention draws causal maps."""
from __future__ import annotations


import pytest
from streamlit.testing.v1 import AppTest

from apptest_helpers import button, click_head, metric
from browser_helpers import ROOT, app_env, ok, predictions

TIMEOUT = 120
K = "decoder_self"


@pytest.fixture
def app(monkeypatch, tmp_path, tiny_llama):
    def start(page: str | None = None) -> AppTest:
        for key, value in app_env(tiny_llama, tmp_path / "hp-home").items():
            monkeypatch.setenv(key, value)
        at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
        at.run()
        if page:
            at.switch_page(page).run()
        return ok(at)
    return start


def _texts(at: AppTest) -> str:
    parts = [e.value for kind in ("caption", "markdown", "info", "warning", "success") for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def test_model_page_shows_perplexity_and_its_interval(app):
    at = app()
    assert metric(at, "attention heads") == "8"
    value = metric(at, "perplexity with all heads")
    assert float(value.replace(",", "")) > 1.0
    assert "95 %" in _texts(at) or "interval" in _texts(at).lower()
    # the perplexity next to a reference, a unigram model on the same tokens
    reference = next(c.value for c in at.caption if "unigram" in c.value)
    assert f"with all heads the model's perplexity is {value}" in reference and "add-one" in reference


def test_head_map_toggles_heads_with_live_perplexity_and_groups(app):
    at = app("app_pages/head_map.py")
    assert metric(at, "heads kept") == "8 / 8"
    before = metric(at, "perplexity")
    ok(click_head(at, K, 0, 1))
    assert metric(at, "heads kept") == "7 / 8"
    after = metric(at, "perplexity")
    assert after != before
    shown = next(m for m in at.metric if m.label == "perplexity").proto
    print("DELTA", shown)
    # lower is better: a rise in perplexity is red (a worsening), a fall green; "within noise" is grey
    if "within noise" not in shown.delta and "no change" not in shown.delta:
        rose = float(after.replace(",", "")) > float(before.replace(",", ""))
        assert shown.direction == (1 if rose else 0) and shown.color == (0 if rose else 1)
    assert "key/value" in _texts(at).lower()
    # the click left layer 0's groups uneven (1 and 2 query heads), and the model still shrinks;
    # the figure says what a click saves
    params = next(m for m in at.metric if m.label == "parameters").proto
    assert params.delta.startswith("-") and "W_Q rows and W_O columns" in params.help
    assert "its K/V head is shared by 1 other" in params.help
    ok(button(at, "Reset").click().run())
    assert metric(at, "perplexity") == before


def test_curves_page_plots_perplexity(app):
    at = app("app_pages/curves.py")
    at = next(b for b in at.button if b.label == "Compute the curves").click().run()   # curves start on a click
    assert not at.exception
    figures = [e for e in at.get("plotly_chart") if e.key is None]
    assert figures
    assert "perplexity" in figures[0].proto.spec.lower()
    assert any("unigram" in c.value and "same" in c.value for c in at.caption)


def test_attention_page_draws_causal_maps(app):
    at = app("app_pages/attention.py")
    answers = list(predictions(at).values())
    assert len(answers) == 2 and answers[0].startswith("'")                        # the next token, quoted
    intro = " ".join(m.value for m in at.markdown)     # a decoder-only model's intro (and "About this page")
    assert "[CLS]" not in intro and "decoder-only" in intro and "first token" in intro
    assert any("Causal attention" in c.value for c in at.caption)
    assert len(at.get("iframe")) + len(at.get("html")) >= 1                       # the bertviz views


def test_causal_maps_are_lower_triangular_and_removed_heads_blank(tiny_llama):
    import numpy as np

    from pruning_core.analysis.attention_maps import run_attention
    from pruning_core.core.heads import HeadMask
    from pruning_core.modeling.sources.loading import load_model

    loaded = load_model(str(tiny_llama.model), device="cpu")
    mask = HeadMask({K: ((0, 1, 1, 1), (1, 1, 1, 1))})
    run = run_attention(loaded, "the good movie was fun", mask)
    assert run.tokens_for(K)[0] == run.encoder_tokens
    for layer in run.dense[K]:
        assert np.allclose(np.triu(layer, 1), 0) and np.allclose(layer.sum(-1), 1, atol=1e-4)
    assert np.allclose(run.pruned[K][0][0], 0)
    assert run.dense_prediction.label == run.dense_prediction.probabilities[0][0]


def test_choosing_a_prepared_llm_switches_to_its_task(monkeypatch, tmp_path, tiny_llama):
    """Picking a prepared language model (here a fake zoo entry holding the tiny Llama, prepared for
    movie-text) while the default classifier's task is in use moves the task along with it."""
    from pruning_core.modeling.sources import catalog

    for key, value in app_env(tiny_llama, tmp_path / "hp-home").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HEADPRUNE_APP_TASK", "movie-sentiment")
    entry = catalog.ZooModel("tinyllm", "a tiny random Llama", task="movie-text", prepare="x:y", cost="instant")
    catalog.register(entry)
    try:
        _switch(entry, tiny_llama)
    finally:
        catalog.ZOO._entries.pop(entry.name, None)
        catalog.ZOO._items.pop(entry.name, None)


def _switch(entry, tiny_llama) -> None:
    import shutil

    from pruning_core.core.io import storage
    from pruning_core.modeling.sources import catalog

    shutil.copytree(tiny_llama.model, entry.folder())
    storage.write_json(entry.folder() / catalog.MANIFEST, {"format": "test", "files": {
        p.name: storage.sha256_file(p) for p in entry.folder().iterdir()}})
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
    at.run()
    at.radio(key="hp_w_model_source").set_value("prepared")
    at.selectbox(key="hp_w_model_prepared").set_value("tinyllm")
    next(b for b in at.button if b.label == "Use this model").click().run()
    assert at.session_state["hp_model"] == "tinyllm" and at.session_state["hp_task"] == "movie-text"
    assert any("Task switched to" in i.value for i in at.info)
