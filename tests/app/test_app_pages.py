"""Headless page tests of the dashboard's shell pages (Model & data, Head map, Curves) on tiny models.

The app runs on a tiny random model saved to a folder and a small CSV task (``file:``), chosen
through HEADPRUNE_APP_MODEL / HEADPRUNE_APP_TASK, so nothing needs the real default.
A click on the head map is simulated by sending the plotly chart's selection state, exactly what
the browser sends when a head is clicked (AppTest has no plotly wrapper); the real click is
covered by test_app_browser.py.
"""
from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from app.core.session.selection import Selection
from apptest_helpers import assert_human_columns, button, click_head, metric, query_param
from browser_helpers import ROOT, app_env, ok

TIMEOUT = 120
HEAD_MAP = "app_pages/head_map.py"
MODEL_PAGE = "app_pages/model_data.py"
CURVES = "app_pages/curves.py"


@pytest.fixture
def app_eval_limit():
    """These pages run with the dashboard's own example count."""
    return None


def test_model_page_shows_architecture_and_unpruned_metric(app_for, tiny_bert):
    at = ok(app_for(tiny_bert))
    assert metric(at, "attention heads") == "8"
    assert metric(at, "parameters").endswith("k")
    assert "%" in metric(at, "in attention (q, k, v, out)")
    assert "%" in metric(at, "accuracy with all heads")
    assert any("examples" in c.value for c in at.caption)


def test_head_map_click_changes_kept_count_and_metric_and_undo_restores(app_for, tiny_bert):
    at = ok(app_for(tiny_bert, HEAD_MAP))
    assert metric(at, "heads kept") == "8 / 8"
    loss_full = metric(at, "loss")
    ok(click_head(at, "encoder_self", 0, 1))
    assert metric(at, "heads kept") == "7 / 8"
    assert metric(at, "loss") != loss_full
    assert query_param(at, "mask") == "e:b.f"             # the URL carries the mask: L0 H1 removed (0b1011)
    ok(button(at, "Undo").click().run())
    assert metric(at, "heads kept") == "8 / 8"
    assert metric(at, "loss") == loss_full
    ok(button(at, "Redo").click().run())
    assert metric(at, "heads kept") == "7 / 8"
    ok(click_head(at, "encoder_self", 0, 1))                                  # clicking again restores it
    assert metric(at, "heads kept") == "8 / 8"


def test_head_map_presets(app_for, tiny_bert):
    at = ok(app_for(tiny_bert, HEAD_MAP))
    ok(button(at, "Remove 50 % least important").click().run())
    assert metric(at, "heads kept") == "4 / 8"
    ok(button(at, "Invert").click().run())
    assert metric(at, "heads kept") == "4 / 8"
    ok(button(at, "Keep the best head per layer").click().run())
    assert metric(at, "heads kept") == "2 / 8"
    ok(button(at, "Reset").click().run())
    assert metric(at, "heads kept") == "8 / 8"
    assert len(at.session_state["hp_history"].entries) == 5


def test_head_map_scorer_switch_and_eval_size(app_for, tiny_bert):
    at = ok(app_for(tiny_bert, HEAD_MAP))
    at.selectbox(key="hp_w_headmap_scorer").set_value("random").run()
    ok(at)
    assert at.session_state["hp_scorer"] == "random"
    at.number_input(key="hp_w_headmap_eval_size").set_value(16).run()
    ok(at)
    assert any("first 16 examples" in c.value for c in at.caption)


def test_shared_link_restores_the_mask(app_for, tiny_bert, monkeypatch, tmp_path):
    for key, value in app_env(tiny_bert, tmp_path / "hp-home").items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
    at.query_params.update({"model": str(tiny_bert.model), "task": tiny_bert.task, "scorer": "random",
                            "mask": "e:e.7", "n": "20"})
    at.run()
    ok(at.switch_page(HEAD_MAP).run())
    assert metric(at, "heads kept") == "6 / 8"                     # e = 1110, 7 = 0111
    assert at.session_state["hp_scorer"] == "random"
    assert at.query_params["mask"] == ["e:e.7"] or at.query_params["mask"] == "e:e.7"


def test_seq2seq_model_shows_three_kinds(app_for, tiny_bart):
    at = ok(app_for(tiny_bart))
    assert metric(at, "attention heads") == "24"
    at = ok(app_for(tiny_bart, HEAD_MAP))
    kinds = [e.key for e in at.get("plotly_chart") if e.key and "grid_" in e.key]
    assert len(kinds) == 3, kinds
    ok(click_head(at, "cross", 1, 2))
    assert metric(at, "heads kept") == "23 / 24"


def test_curves_page_draws_curves_and_tables(app_for, tiny_bert):
    at = ok(app_for(tiny_bert, CURVES))
    # every job says how long it takes before it starts, and starts on a button
    assert any(c.value.startswith("Computing them takes about") for c in at.caption), [c.value for c in at.caption]
    runs = {b.label.split(" (")[0]: b for b in at.button if b.label.startswith("Run: ")}
    assert set(runs) == {"Run: Single-head ablation", "Run: One head per layer"}, list(runs)
    assert all(" s on 2 CPU cores)" in b.label or " min on 2 CPU cores)" in b.label for b in runs.values())
    assert "9 evaluations of" in runs["Run: Single-head ablation"].label
    ok(next(b for b in at.button if b.label == "Compute the curves").click().run())   # curves start on a click
    assert any(e.key is None for e in at.get("plotly_chart"))      # the curves figure
    assert len(at.get("download_button")) >= 2
    ok(next(b for b in at.button if b.label.startswith("Run: Single-head ablation")).click().run())
    ok(next(b for b in at.button if b.label.startswith("Run: One head per layer")).click().run())
    assert len(at.dataframe) >= 3                                  # curves, ablation, one head per layer
    assert_human_columns([d.value for d in at.dataframe])


def test_bad_model_path_shows_an_error_and_the_session_stays_usable(app_for, tiny_bert):
    at = ok(app_for(tiny_bert))
    at.radio(key="hp_w_model_source").set_value("local")
    at.text_input(key="hp_w_model_where").set_value("/no/such/model-folder")
    next(b for b in at.button if b.label == "Use this model").click().run()
    assert not at.exception
    assert any("does not exist" in e.value and "stays in use" in e.value for e in at.error)
    assert at.session_state["hp_model"] == str(tiny_bert.model)   # the failed model never replaces it
    at.switch_page(HEAD_MAP).run()
    ok(at)                                                         # the working model, no error left behind
    assert metric(at, "heads kept") == "8 / 8"
    at.switch_page(MODEL_PAGE).run()
    at.radio(key="hp_w_model_source").set_value("local")
    at.text_input(key="hp_w_model_where").set_value(str(tiny_bert.model))
    next(b for b in at.button if b.label == "Use this model").click().run()
    ok(at)


def test_malformed_upload_shows_an_error_and_keeps_the_task(app_for, tiny_bert):
    at = ok(app_for(tiny_bert))
    at.file_uploader(key="hp_w_model_upload").upload("broken.csv", b"text,label\nfine,0\n\"unterminated,1\n",
                                                     "text/csv").run()
    assert not at.exception
    assert any("broken.csv" in e.value for e in at.error)
    assert at.session_state["hp_task"] == tiny_bert.task


def test_good_upload_becomes_the_task(app_for, tiny_bert):
    at = ok(app_for(tiny_bert))
    content = b"text,label\nthe movie was good,1\nawful plot,0\nvery fun,1\ndull acting,0\n"
    at.file_uploader(key="hp_w_model_upload").upload("mine.csv", content, "text/csv").run()
    ok(at)
    assert at.session_state["hp_task"].startswith("file:") and at.session_state["hp_task"].endswith("mine.csv")
    assert "%" in metric(at, "accuracy with all heads")


def test_unprepared_default_offers_preparation(monkeypatch, tmp_path):
    monkeypatch.setenv("HEADPRUNE_HOME", str(tmp_path / "empty-home"))
    monkeypatch.delenv("HEADPRUNE_APP_MODEL", raising=False)
    monkeypatch.delenv("HEADPRUNE_APP_TASK", raising=False)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert any("not prepared" in w.value for w in at.warning)
    assert any(b.label.startswith("Run: Preparing") for b in at.button)


def test_mask_link_codec_round_trips_and_rejects_other_layouts():
    from pruning_core.core.io.share_link import decode_mask as mask_from_param, encode_mask as mask_to_param
    from pruning_core.core.errors import FormatError
    from pruning_core.core.heads import HeadLayout, HeadMask

    layout = HeadLayout({"encoder_self": (12, 12), "decoder_self": (8, 8), "cross": (8, 8)})
    mask = HeadMask.full(layout).toggled("encoder_self", 1, 0).toggled("cross", 0, 7).toggled("decoder_self", 1, 3)
    text = mask_to_param(mask)
    assert text == "e:fff.7ff,d:ff.ef,c:fe.ff"
    assert mask_from_param(text, layout) == mask
    assert mask_from_param(mask_to_param(mask.inverted()), layout) == mask.inverted()
    for bad in ("e:fff", "e:fff.fff.fff", "x:ff", "e:zzz.fff", "e:1fff.fff,d:ff.ff,c:ff.ff"):
        with pytest.raises(FormatError):
            mask_from_param(bad, layout)


def test_a_link_made_for_another_model_says_so_and_keeps_all_heads(tiny_bert, monkeypatch, tmp_path):
    for key, value in app_env(tiny_bert, tmp_path / "hp-home").items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
    at.query_params.update({"mask": "e:fff.fff.fff"})
    at.run()
    at.switch_page(HEAD_MAP).run()
    assert not at.exception
    assert any("another model" in e.value for e in at.error)
    assert metric(at, "heads kept") == "8 / 8"


def test_a_cancelled_job_waits_for_a_click_and_the_map_still_works(app_for, tiny_bert):
    at = ok(app_for(tiny_bert, HEAD_MAP))
    at.session_state["hp_cancelled"] = {"score_random"}
    at.selectbox(key="hp_w_headmap_scorer").set_value("random").run()
    ok(at)
    rerun = next(b for b in at.button if b.label == "Cancelled. Run: Scoring heads (random)")
    assert button(at, "Remove 50 % least important").disabled        # presets need scores
    ok(click_head(at, "encoder_self", 1, 3))                          # toggling still works
    assert metric(at, "heads kept") == "7 / 8"
    ok(rerun.click().run())
    assert not button(at, "Remove 50 % least important").disabled
    assert "score_random" not in at.session_state["hp_cancelled"]


def test_unsupported_architecture_and_too_large_models_are_refused_politely(app_for, tiny_bert, tmp_path,
                                                                            monkeypatch):
    import shutil

    import app.model.cache

    odd = tmp_path / "opt-like"
    odd.mkdir()
    (odd / "config.json").write_text('{"model_type": "opt", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8}')
    (odd / "model.safetensors").write_bytes(b"")
    big = tmp_path / "big-copy"
    shutil.copytree(tiny_bert.model, big)
    at = ok(app_for(tiny_bert))
    for folder, words in ((odd, "not supported"), (big, "memory")):
        if folder == big:
            monkeypatch.setattr(app.model.cache, "MEMORY_HEADROOM", 1e-12)
        at.radio(key="hp_w_model_source").set_value("local")
        at.text_input(key="hp_w_model_where").set_value(str(folder))
        next(b for b in at.button if b.label == "Use this model").click().run()
        assert not at.exception
        assert any(words in e.value for e in at.error), [e.value for e in at.error]


def test_concurrent_sessions_on_the_shared_model_get_their_own_numbers(tiny_bert):
    """Two users at once on the one cached model (what two browser sessions do through app.model.cache):
    each evaluation sees exactly its own mask, and the shared model is left untouched."""
    import threading

    from app.model import cache
    from pruning_core.core.io.share_link import decode_mask as mask_from_param
    from pruning_core.modeling.masking import installed_hook_count

    spec, task_name = str(tiny_bert.model), tiny_bert.task
    loaded = cache.load(spec)
    before = {k: v.clone() for k, v in loaded.model.state_dict().items()}
    masks = [mask_from_param(t, loaded.layout) for t in ("e:e.7", "e:3.c", "e:8.1", "e:f.0")]
    task = cache.task(task_name)
    data = cache.data(Selection(spec, task_name, 30))
    expected = [task.evaluate(loaded, data, m).loss for m in masks]
    assert len(set(expected)) == len(expected)
    got: dict[tuple[int, int], float] = {}

    def user(u: int) -> None:
        for r in range(3):
            for i in range(len(masks)):
                j = (i + u) % len(masks)              # the two users ask for different masks at once
                got[(u, j, r)] = task.evaluate(loaded, data, masks[j]).loss
                got[(u, j, r, "cached")] = cache.evaluate(Selection(spec, task_name, 30), masks[j]).loss

    threads = [threading.Thread(target=user, args=(u,)) for u in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for key, loss in got.items():
        assert loss == pytest.approx(expected[key[1]], abs=1e-6), key
    assert installed_hook_count(loaded.model) == 0
    for k, v in loaded.model.state_dict().items():
        assert v.equal(before[k]), k


@pytest.mark.heavy
def test_curves_page_compares_attention_kinds_of_a_translation_model(app_for, tiny_bart, tiny_bert, monkeypatch):
    from app.curves import kinds as kinds_view
    monkeypatch.setattr(kinds_view, "FRACTIONS", (0.5,))     # 3 kinds x 1 share x (1 + 1 seed) + 1 evaluations
    monkeypatch.setattr(kinds_view, "SEEDS", 1)
    at = ok(app_for(tiny_bart, CURVES))
    at.number_input(key="hp_w_curves_eval_size").set_value(8).run()
    ok(next(b for b in at.button if b.label.startswith("Run: Attention kinds")).click().run())
    chart = next(e for e in at.get("plotly_chart") if e.key == "kinds_figure")
    names = {t["name"] for t in json.loads(chart.proto.spec)["data"] if t.get("name")}
    assert {"encoder self-attention (8 heads)", "decoder self-attention (8 heads)",
            "encoder-decoder (cross) attention (8 heads)"} <= names, names
    assert any(c.value.startswith("Most sensitive, least important first:") and "in random order:" in c.value
               for c in at.caption)
    at = ok(app_for(tiny_bert, CURVES))                       # an encoder: one kind, nothing to compare
    assert any("only encoder self-attention heads" in i.value for i in at.info)
