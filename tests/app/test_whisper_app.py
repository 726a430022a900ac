"""The dashboard on a tiny random Whisper and a speech listing (AppTest, headless): three head maps, WER with
its interval, and the Attention page speaking the sentence and showing cross-attention over audio frames."""
from __future__ import annotations

import shutil

import pytest
from streamlit.testing.v1 import AppTest

from browser_helpers import ROOT, app_env, build_tiny_whisper, ok, predictions

TIMEOUT = 120


@pytest.fixture(scope="module")
def tiny_whisper(tmp_path_factory):
    return build_tiny_whisper(tmp_path_factory.mktemp("app-whisper"))


@pytest.fixture
def app(monkeypatch, tmp_path, tiny_whisper):
    for key, value in app_env(tiny_whisper, tmp_path / "hp-home").items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
    at.run()
    return at


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_model_and_head_map_pages_show_wer_and_three_maps(app):
    at = ok(app)
    assert _metrics(at)["model type"] == "whisper" and "WER with all heads" in _metrics(at)
    at = ok(at.switch_page("app_pages/head_map.py").run())
    keys = [e.key for e in at.get("plotly_chart")]
    assert all(any(key and key.startswith(f"hp_w_headmap_grid_{k}_") for key in keys)
               for k in ("encoder_self", "decoder_self", "cross"))
    wer = next(m for m in at.metric if m.label == "WER")
    assert "95 % interval" in wer.proto.help
    sidebar = " ".join(m.value for m in at.sidebar.markdown)
    counted = next(c.value for c in at.caption if c.value.startswith("On the first "))
    assert "utterances" in sidebar.split("Evaluated on", 1)[1]         # the panel names what the sidebar counts
    assert counted.split()[4].startswith("utterance"), counted          # "On the first 4 utterances of …"
    assert "example" not in counted and "utterance" in wer.proto.help
    outputs = [m.value for m in at.markdown if m.value.startswith("**1.**")]      # a transcript under the metric
    assert outputs and "gold: " in outputs[0] and "all heads: " in outputs[0]


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_attention_page_speaks_the_sentence_and_maps_cross_attention_over_audio(app):
    at = ok(app.switch_page("app_pages/attention.py").run())
    assert "Prediction, all heads" in predictions(at)
    intro = " ".join(m.value for m in at.markdown)     # a speech model's intro (and "About this page")
    assert "[CLS]" not in intro and "audio frames" in intro
    kinds = next(b for b in at.selectbox if b.label == "Attention kind")
    assert len(kinds.options) == 3
    assert at.get("plotly_chart"), "no attention thumbnails drawn"
    players = at.get("audio")                     # the sentence the model heard can be heard
    assert len(players) == 1 and players[0].proto.url
    assert any("What the model heard" in c.value for c in at.caption)


def test_model_and_data_shows_audio_files_relative_to_the_data_set(app, tiny_whisper):
    at = ok(app)
    table = next(d.value for d in at.dataframe if "audio" in d.value.columns)
    audio_root = tiny_whisper.task.removeprefix("speech:")
    shown = [str(v) for v in table["audio"]]
    assert shown and all(not v.startswith("/") and audio_root not in v for v in shown), shown
    assert shown[0] == "0.wav"
