"""A translation model whose decoder has no self-attention (the Bergamot students' SSRU): every page says
so in words, and shows only the kinds it has."""
from __future__ import annotations

import json

from app.core.text import md_escape
from browser_helpers import ok, open_app
from pruning_core.evaluation.kinds import KindPoint, KindSensitivity

HEAD_MAP, MODEL_PAGE, CURVES = "app_pages/head_map.py", "app_pages/model_data.py", "app_pages/curves.py"


def test_the_head_map_names_the_missing_decoder_self_attention(tiny_ssru, tmp_path, monkeypatch):
    at = ok(open_app(monkeypatch, tmp_path / "home", tiny_ssru, HEAD_MAP, eval_limit=8))
    grids = {e.key for e in at.get("plotly_chart") if e.key and "headmap_grid" in e.key}
    assert any("encoder_self" in k for k in grids) and any("cross" in k for k in grids)
    assert not any("decoder_self" in k for k in grids), grids
    assert any(c.value.startswith("No decoder self-attention map: its decoder runs an SSRU") for c in at.caption)
    at = ok(at.switch_page(MODEL_PAGE).run())
    assert any(c.value.startswith("No decoder self-attention heads: its decoder runs an SSRU") for c in at.caption)


def test_the_attention_kinds_borrow_the_missing_kind_from_a_saved_run(tiny_ssru, tmp_path, monkeypatch):
    """Michel et al. §5 on a model without decoder self-attention: that kind comes from another model's saved run,
    in a panel of its own that names the model, task and metric (never an empty row)."""
    from app.curves import kinds as kinds_view
    speech = KindSensitivity("wer", 0.2, 0.1, 0.3, 4, {"decoder_self": 8}, (),
                             (KindPoint("decoder_self", 0.5, 4, "importance", None, 0.4, 1.2, 0.3, 0.5),),
                             {"model": "speech-stand-in", "task": "movie-speech"})
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "kinds-speech.json").write_text(json.dumps(speech.to_json()))
    monkeypatch.setattr(kinds_view, "REFERENCE_RUNS", tmp_path / "runs")
    monkeypatch.setattr(kinds_view, "FRACTIONS", (0.5,))
    monkeypatch.setattr(kinds_view, "SEEDS", 1)
    at = ok(open_app(monkeypatch, tmp_path / "home", tiny_ssru, CURVES, eval_limit=8))
    ok(next(b for b in at.button if b.label.startswith("Run: Attention kinds")).click().run())
    spec = json.loads(next(e for e in at.get("plotly_chart") if e.key == "kinds_figure").proto.spec)
    names = {t["name"] for t in spec["data"] if t.get("name")}
    assert {"encoder self-attention (8 heads)", "encoder-decoder (cross) attention (8 heads)",
            "decoder self-attention (8 heads, speech-stand-in)"} <= names, names
    titles = [a["text"] for a in spec["layout"]["annotations"]]
    assert "speech-stand-in on movie-speech, WER, 4 utterances" in titles and len(titles) == 2, titles
    said = "Decoder self-attention: borrowed from " + md_escape("speech-stand-in on movie-speech, WER, 4 utterances")
    assert any(c.value.startswith(said) for c in at.caption), [c.value for c in at.caption]


def test_the_bundled_run_holds_whisper_bases_decoder_self_attention():
    """The run the Attention kinds tab borrows by default: a `headprune kinds` result that reads, says where it
    comes from, and measured the kind the Bergamot students lack at every share, by I_h and in random orders."""
    from app.curves.kinds import REFERENCE_RUNS
    runs = [KindSensitivity.from_json(json.loads(p.read_text())) for p in sorted(REFERENCE_RUNS.glob("kinds-*.json"))]
    speech = next(r for r in runs if r.provenance["model"] == "whisper-base")
    assert "decoder_self" in speech.heads and speech.metric_name == "wer" and speech.provenance["task"] == "movie-speech"
    for share in (0.1, 0.25, 0.5):
        methods = [p.method for p in speech.points if p.kind == "decoder_self" and p.fraction == share]
        assert methods.count("importance") == 1 and methods.count("random") == 3, (share, methods)


def test_the_head_map_shows_example_translations_under_the_metric(tiny_ssru, tmp_path, monkeypatch):
    """Gold, all heads and this mask for the first verses, in the live panel below the metric, from the same
    evaluations as the metric (so they change with it)."""
    from app.core.session.selection import Selection
    from app.model import cache
    from pruning_core.core.heads import HeadMask
    from pruning_core.core.io.share_link import encode_mask

    layout = cache.load(str(tiny_ssru.model)).layout
    mask = HeadMask.from_removed(layout, [("cross", 0, h) for h in range(layout.kinds["cross"][0])])
    at = ok(open_app(monkeypatch, tmp_path / "home", tiny_ssru, HEAD_MAP, mask=encode_mask(mask), eval_limit=8))
    block = [m.value for m in at.markdown if m.value.startswith("**1.**") or m.value.startswith("**2.**")]
    assert block, [m.value for m in at.markdown]
    sel = Selection(str(tiny_ssru.model), tiny_ssru.task, 8)
    dense, pruned = cache.evaluate(sel, None), cache.evaluate(sel, mask)
    for text, a, b in zip(block, dense.extra["samples"], pruned.extra["samples"]):
        assert f"gold: {md_escape(a['reference'])}" in text
        assert f"all heads: {md_escape(a['hypothesis'])}" in text and f"this mask: " in text
        assert md_escape(b["hypothesis"]) in text.split("this mask: ", 1)[1]
    labels = [m.value for m in at.markdown]
    assert labels.index(next(v for v in labels if v.startswith("**Example outputs**"))) < labels.index(block[0])
    at = ok(open_app(monkeypatch, tmp_path / "home2", tiny_ssru, HEAD_MAP, eval_limit=8))   # all heads: no mask line
    assert not any("this mask:" in m.value for m in at.markdown if m.value.startswith("**1.**"))
