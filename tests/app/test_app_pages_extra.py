"""Headless page tests of the Attention, Speed and Share pages on tiny models (AppTest).

The dashboard runs on a tiny random model saved to a folder and a small CSV task
(tests/browser_helpers.build_tiny_app); a mask comes from the link's ``mask`` query parameter,
exactly as a shared link would set it.
"""
from __future__ import annotations

import json

import pytest

from app.share import links as share
from app.share.analysis import ANALYSIS_FORMAT
from browser_helpers import ok, predictions

ATTENTION, SPEED, SHARE = "app_pages/attention.py", "app_pages/speed.py", "app_pages/share.py"
HOSTILE = "</script><img src=x onerror=alert(1)> <script>alert(1)</script>"


pytestmark = pytest.mark.usefixtures("stand_in_scripts")


# -- Attention ---------------------------------------------------------------------------------------

def test_attention_page_shows_both_predictions_and_all_views(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, ATTENTION, mask="e:7.f"))        # layer 0, head 0 removed
    preds = predictions(at)
    assert "Prediction, all heads" in preds and "Prediction, pruned (7/8 heads kept)" in preds
    assert [c.key for c in at.get("plotly_chart")] == [None, "hp_w_attention_role_map"]   # thumbnails, role probe
    frames = at.get("iframe")
    assert len(frames) == 2                                    # bertviz head view and model view
    assert at.markdown[0].value.strip()                       # the teaching explanation
    at.radio(key="hp_w_attention_arrange").set_value("grouped").run()
    at.radio(key="hp_w_attention_kept_from").set_value("dense").run()
    at.radio(key="hp_w_attention_head").set_value("pruned").run()
    ok(at)


def test_attention_words_agree_with_what_is_drawn(app_for, tiny_bert_24):
    """The intro said removed heads show "empty" while the thumbnails' legend says they
    show how they attended in the full model; the probability sat in a metric's delta (an arrow badge,
    as if it were a change); an encoder's intro talks about its own special tokens."""
    at = ok(app_for(tiny_bert_24, ATTENTION, mask="e:7.f"))
    intro = " ".join(m.value for m in at.markdown)          # the first sentence, then "About this page"
    title = at.get("plotly_chart")[0].proto.spec
    assert "as they attended in the full model" in title and "as it attended in the full model" in intro
    assert "shows them empty" not in intro and "[CLS]" in intro
    assert not [m for m in at.metric if m.proto.delta], "a value shown with a change badge"
    assert sum("probability" in c.value for c in at.caption) == 2


def test_attention_page_empty_and_hostile_sentences(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, ATTENTION))
    at.text_input(key="hp_w_attention_text").set_value("   ").run()
    ok(at)
    assert any("Type a sentence" in i.value for i in at.info)
    assert not at.get("iframe")
    at.text_input(key="hp_w_attention_text").set_value(HOSTILE).run()
    ok(at)
    assert len(at.get("iframe")) == 2


def test_attention_page_example_from_the_data(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, ATTENTION))
    at.radio(key="hp_w_attention_source").set_value("An example from the data").run()
    ok(at)
    at.selectbox(key="hp_w_attention_example").set_value(3).run()
    ok(at)
    assert len(predictions(at)) == 2


def test_attention_page_on_a_translation_model(app_for, tiny_bart_12):
    at = ok(app_for(tiny_bart_12, ATTENTION, mask="e:f.f,d:7.f,c:f.e"))
    assert len(predictions(at)) == 2
    kinds = at.selectbox(key="hp_w_attention_kind")
    assert list(kinds.options) == ["encoder self-attention", "decoder self-attention",
                                   "encoder-decoder (cross) attention"]
    kinds.set_value("cross").run()
    ok(at)
    assert any("teacher-forced" in c.value for c in at.caption)


# -- Speed -------------------------------------------------------------------------------------------

def test_speed_page_without_removed_heads_explains(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, SPEED))
    assert any("nothing to compare" in i.value for i in at.info)


def test_speed_page_runs_a_sweep(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, SPEED, mask="e:3.c"))
    assert any("Run the sweep" in i.value for i in at.info)
    at.multiselect(key="hp_w_speed_batches").set_value([1, 2])
    at.selectbox(key="hp_w_speed_seq").set_value(16)
    at.button(key="hp_w_speed_run").click().run()
    ok(at)
    assert len(at.get("plotly_chart")) == 1
    table = at.dataframe[0].value
    assert set(table["variant"]) == {"dense", "masked", "pruned"} and set(table["batch"]) == {1, 2}
    assert any("no implementation can be more than" in m.value for m in at.markdown)
    at.switch_page(SHARE).run()                                # the Share page picks the sweep up
    ok(at)
    assert any("bench" in c.value for c in at.caption)


# -- Share -------------------------------------------------------------------------------------------

def test_share_page_offers_downloads_and_a_link(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, SHARE, mask="e:7.f"))
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels[:2] == ["JSON bundle", "HTML report"] and labels[2].startswith("Pruned model (7/8 heads")
    link = at.code[0].value
    assert "/head_map?" in link
    decoded = share.decode_link(link)
    assert decoded["mask"] == "e:7.f" and decoded["model"] == str(tiny_bert_24.model)


def test_share_page_restores_an_uploaded_analysis(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, SHARE))
    layout = {"encoder_self": [4, 4]}
    bundle = {"format": ANALYSIS_FORMAT, "model": {"id": str(tiny_bert_24.model), "layout": layout},
              "task": tiny_bert_24.task, "scorer": "random", "eval_limit": 8,
              "mask": {"format": "headprune.mask/1", "kinds": {"encoder_self": [[1, 0, 1, 1], [0, 1, 1, 1]]}}}
    at.file_uploader(key="hp_w_share_upload").set_value(
        ("analysis.json", json.dumps(bundle).encode(), "application/json")).run()
    ok(at)
    at.button(key="hp_w_share_restore").click().run()
    ok(at)
    assert any("Restored" in s.value for s in at.success)
    assert "mask=e:b.7" in at.code[0].value and "scorer=random" in at.code[0].value and "n=8" in at.code[0].value


def test_share_page_refuses_a_file_for_another_model(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, SHARE))
    bundle = {"format": ANALYSIS_FORMAT, "model": {"id": str(tiny_bert_24.model), "layout": {"encoder_self": [2]}},
              "mask": {"format": "headprune.mask/1", "kinds": {"encoder_self": [[1, 0]]}}}
    at.file_uploader(key="hp_w_share_upload").set_value(
        ("other.json", json.dumps(bundle).encode(), "application/json")).run()
    assert not at.exception
    # refused at preview time, naming the real mismatch (the file names the loaded model itself)
    errors = [e.value.replace("\\", "") for e in at.error]        # shown Markdown-escaped
    assert any("cannot be restored" in e and "heads per layer [2]" in e and "[4, 4]" in e for e in errors), errors
    assert not any("Choose model" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "hp_w_share_restore"]   # no Restore offered
    assert "mask=" not in at.code[0].value                      # the session's mask is unchanged


def test_share_page_refuses_a_bare_mask_of_the_wrong_shape_at_preview(app_for, tiny_bert_24):
    """A mask file naming the loaded model but of another shape is not previewed as
    "n/n heads kept" with a Restore button; the preview says what does not fit."""
    at = ok(app_for(tiny_bert_24, SHARE))
    mask = {"format": "headprune.mask/1", "model": str(tiny_bert_24.model), "kinds": {"encoder_self": [[1] * 5] * 3}}
    at.file_uploader(key="hp_w_share_upload").set_value(
        ("mask.json", json.dumps(mask).encode(), "application/json")).run()
    assert not at.exception
    assert not any("heads kept" in m.value for m in at.markdown)
    assert not [b for b in at.button if b.key == "hp_w_share_restore"]
    errors = [e.value.replace("\\", "") for e in at.error]
    assert any("does not fit" in e and "[5, 5, 5]" in e for e in errors), errors


def test_share_page_bad_upload_is_a_message(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, SHARE))
    at.file_uploader(key="hp_w_share_upload").set_value(("broken.json", b"{nope", "application/json")).run()
    assert not at.exception
    assert any("not valid JSON" in e.value for e in at.error)
