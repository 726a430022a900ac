"""Picking the smp scorer scores with the bundled pruner at once; where no pruner exists at all (a damaged
install) it offers to train one from the dashboard (a job with progress), instead of an error that names a
command to run by hand."""
from __future__ import annotations

from types import SimpleNamespace

from streamlit.testing.v1 import AppTest

from browser_helpers import ROOT, app_env
from pruning_core.core.progress import ProgressEvent
from pruning_core.scoring.smp import default_pruner

TIMEOUT = 120


def test_smp_without_a_pruner_offers_training_and_runs_it(tiny_bert, monkeypatch, tmp_path):
    from pruning_core.scoring.smp import scorer as smp_scorer
    monkeypatch.setattr(smp_scorer, "BUNDLED_DIR", tmp_path / "no-bundled-pruner")    # a damaged install
    home = tmp_path / "hp-home"
    for key, value in app_env(tiny_bert, home).items():
        monkeypatch.setenv(key, value)
    calls = []

    def fake_train_and_save(progress=None, **kwargs):
        calls.append(kwargs)
        progress and progress(ProgressEvent("smp:train", 1, 2))
        folder = home / "smp" / "pruner"
        folder.mkdir(parents=True)
        (folder / "pruner.json").write_text("{}")
        return SimpleNamespace(summary=lambda: "trained the SMP pruner for 2 steps in 1 s\nmore"), folder

    monkeypatch.setattr(default_pruner, "train_and_save", fake_train_and_save)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
    at.run()
    at.switch_page("app_pages/head_map.py").run()
    at.selectbox(key=[w.key for w in at.selectbox if w.label == "Importance score"][0]).set_value("smp").run()
    assert any("needs a trained SMP pruner" in i.value for i in at.info), [i.value for i in at.info]
    button = [b for b in at.button if b.label.startswith("Run: Training the SMP pruner")]
    assert button and "minutes" in button[0].label
    assert calls == []                                   # nothing trains before the click
    button[0].click().run()
    assert len(calls) == 1 and default_pruner.is_trained(home / "smp" / "pruner")
    at.run()                                             # the next run finds the pruner: no offer left
    assert not any("needs a trained SMP pruner" in i.value for i in at.info)
    assert not [b for b in at.button if b.label.startswith("Run: Training the SMP pruner")]


def test_is_trained_needs_the_config_written_last(tmp_path):
    assert not default_pruner.is_trained(tmp_path)
    (tmp_path / "pruner.safetensors").write_bytes(b"")   # weights alone: a stopped save, not a pruner
    assert not default_pruner.is_trained(tmp_path)
    (tmp_path / "pruner.json").write_text("{}")
    assert default_pruner.is_trained(tmp_path)


def test_smp_scores_at_once_with_the_bundled_pruner(tiny_bert, monkeypatch, tmp_path):
    for key, value in app_env(tiny_bert, tmp_path / "hp-home").items():      # nothing trained in this home
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
    at.run()
    at.switch_page("app_pages/head_map.py").run()
    at.selectbox(key=[w.key for w in at.selectbox if w.label == "Importance score"][0]).set_value("smp").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not any("needs a trained SMP pruner" in i.value for i in at.info)
    assert not [b for b in at.button if b.label.startswith("Run:")]           # scored by itself, no training
    assert not next(b for b in at.button if b.label == "Remove 50 % least important").disabled
