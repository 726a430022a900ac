"""Scores ready on arrival (issue 30, item 1): :mod:`app.sidebar.warm` computes what a new session's Head map
would compute by itself, keeps it on disk, and leaves a long scoring to its button."""
from __future__ import annotations

import pytest

from app.core.session.selection import Selection
from app.model import workload
from app.sidebar import warm



@pytest.fixture
def prepared(tiny_bert, monkeypatch, tmp_path):
    """The tiny BERT standing in for a prepared model, its scores kept under a fresh home."""
    monkeypatch.setenv("HEADPRUNE_HOME", str(tmp_path))
    monkeypatch.setattr(warm.catalog, "prepared_names", lambda: [str(tiny_bert.model)])
    return str(tiny_bert.model), tiny_bert.task


def test_scored_ahead_once_then_kept(prepared):
    spec, task = prepared
    sel = workload.default_selection(spec, task)
    assert warm.why_not(sel) == ""
    thread = warm.start(spec, task)
    thread.join(300)
    assert not thread.is_alive()
    assert warm.why_not(sel) == "kept already"
    assert warm.start(spec, task) is None                  # a second server start computes nothing


def test_the_dashboard_starts_it_once_per_server(prepared, monkeypatch):
    spec, task = prepared
    calls = []
    monkeypatch.setattr(warm, "start", lambda *a: calls.append(a))
    monkeypatch.setattr(warm, "_started", set())
    for _ in range(3):                                     # three runs of dashboard.py
        warm.start_once(spec, task)
    assert calls == [(spec, task)]


def test_a_long_scoring_keeps_its_button(prepared, monkeypatch):
    spec, task = prepared
    monkeypatch.setattr(warm.jobs, "waits_for_click", lambda *a: True)
    monkeypatch.setattr(warm.jobs, "scoring_seconds", lambda *a: 58.0)
    assert "the Head map starts it on a click" in warm.why_not(workload.default_selection(spec, task))
    assert warm.start(spec, task) is None


def test_only_prepared_models(tiny_bert, capsys):
    assert warm.why_not(Selection(str(tiny_bert.model), tiny_bert.task)) == "not a prepared model"
    assert warm.wanted(str(tiny_bert.model), tiny_bert.task) is None
    assert warm.main(["no-such-model"]) == 2
    assert "no such model; the models are" in capsys.readouterr().err


def test_the_command_line_shows_its_own_words_not_streamlits_warnings():
    """`make run` warms the default: no "No runtime found" per cached function, yet a real error still shows."""
    import subprocess
    import sys

    from browser_helpers import ROOT

    done = subprocess.run([sys.executable, "-m", "app.sidebar.warm", "nosuchmodel"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2
    assert "No runtime found" not in done.stderr and "ScriptRunContext" not in done.stderr, done.stderr
    assert "nosuchmodel: no such model" in done.stderr


def test_preparing_a_translation_model_drops_only_the_sacremoses_hint(monkeypatch):
    import warnings

    from pruning_core.zoo import bergamot

    def fake(name, force, progress):
        warnings.warn(bergamot.SACREMOSES_HINT)
        warnings.warn("a real problem")
        return name

    monkeypatch.setattr(bergamot, "prepare_bergamot", fake)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert bergamot.prepare_en_pt() == "bergamot-en-pt"
        warnings.warn(bergamot.SACREMOSES_HINT)             # outside the prepare call: shown as before
    assert [str(w.message) for w in seen] == ["a real problem", bergamot.SACREMOSES_HINT]


def test_the_warm_up_prints_no_streamlit_server_warning_even_after_streamlit_resets_its_levels():
    """``python -m app.model.warm`` on a fresh cache printed "No runtime found" once: Streamlit sets its loggers'
    levels again when it first reads its config, after the command had lowered them."""
    import logging

    import streamlit.logger

    warm.quiet_without_server()
    streamlit.logger.set_log_level("info")                 # what Streamlit does on reading its config
    logger = streamlit.logger.get_logger(warm.NO_RUNTIME_LOGGERS[0])
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record)
    handler = Keep()
    logger.addHandler(handler)
    try:
        logger.warning("No runtime found, using MemoryCacheStorageManager")
        logger.error("a real error")
    finally:
        logger.removeHandler(handler)
        streamlit.logger.set_log_level("warning")
    assert [r.getMessage() for r in seen] == ["a real error"]
