"""Arrival on the Head map: scores computed once are kept on disk, so a later session (or a colleague's
shared link after a restart) sees coloured squares and enabled presets without pressing Run; a
disabled preset says why and what enables it."""
from __future__ import annotations

import streamlit as st
from streamlit.testing.v1 import AppTest

from app.core.session.selection import ScoreRequest, Selection
from app.model import jobs
from browser_helpers import ROOT, app_env, ok
from pruning_core.scoring import store as score_store
from pruning_core.scoring import gradient as gradient_scoring

TIMEOUT = 120
HEAD_MAP = "app_pages/head_map.py"
PRESETS = ("Remove 50 % least important", "Keep the best head per layer")


def open_head_map(tiny, home, monkeypatch) -> AppTest:
    for key, value in app_env(tiny, home).items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
    at.run()
    return ok(at.switch_page(HEAD_MAP).run())


def presets(at: AppTest) -> list:
    return [b for b in at.button if b.label in PRESETS]


def run_buttons(at: AppTest) -> list[str]:
    return [b.label for b in at.button if b.label.startswith("Run: Scoring")]


def test_scores_are_kept_and_a_new_session_needs_no_run(tiny_bert, tmp_path, monkeypatch):
    home = tmp_path / "home"
    st.cache_data.clear()
    at = open_head_map(tiny_bert, home, monkeypatch)
    assert not run_buttons(at) and all(not b.disabled for b in presets(at))
    kept = list((home / score_store.SCORES_DIR).rglob("*-gradient-*.json"))
    assert len(kept) == 1, kept

    # a server restart (nothing in memory) whose scoring would be long: the kept file is read, nothing scored
    st.cache_data.clear()
    monkeypatch.setattr(jobs, "scoring_seconds", lambda *a, **k: 900.0)

    def no_scoring(*args, **kwargs):
        raise AssertionError("the kept scores should have been read, not computed again")

    monkeypatch.setattr(gradient_scoring.GradientScorer, "score", no_scoring)
    at = open_head_map(tiny_bert, home, monkeypatch)
    assert not run_buttons(at), run_buttons(at)
    assert len(presets(at)) == 2 and all(not b.disabled for b in presets(at))


def test_disabled_presets_say_why_and_what_enables_them(tiny_bert, tmp_path, monkeypatch):
    st.cache_data.clear()
    monkeypatch.setattr(jobs, "scoring_seconds", lambda *a, **k: 900.0)   # a long scoring waits for Run
    at = open_head_map(tiny_bert, tmp_path / "home", monkeypatch)
    assert run_buttons(at) and "15 min" in run_buttons(at)[0]
    for b in presets(at):
        assert b.disabled and "Run" in b.proto.help and "scores" in b.proto.help, b.proto.help


def test_a_prepared_models_short_scoring_starts_by_itself(monkeypatch):
    from app.model import cache
    monkeypatch.setattr(cache, "scores_kept", lambda *a, **k: False)
    monkeypatch.setattr(cache, "load", lambda spec: type("Loaded", (), {"task_type": "classification"})())
    monkeypatch.setattr(jobs, "scoring_seconds", lambda *a, **k: 15.0)     # the default's gradient scoring
    def request(spec: str) -> ScoreRequest:
        return ScoreRequest(Selection(spec, "movie-sentiment"), "gradient", 512)

    assert not jobs.waits_for_click(request("default"), 72)
    assert jobs.waits_for_click(request("/some/folder"), 72)
    monkeypatch.setattr(jobs, "scoring_seconds", lambda *a, **k: 300.0)
    assert jobs.waits_for_click(request("default"), 72)


def test_the_landing_page_says_what_the_tool_is_for_and_offers_the_tour_and_the_head_map(tiny_bert, tmp_path,
                                                                                        monkeypatch):
    for key, value in app_env(tiny_bert, tmp_path / "home").items():
        monkeypatch.setenv(key, value)
    at = ok(AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT).run())
    first = at.main.children[0]                       # before the title and the pickers: above the fold
    texts = [m.value for m in first.markdown]
    assert texts and "attention heads" in texts[0] and "Tour" in texts[0] and "Head map" in texts[0], texts
    links = {link.proto.page.split("/")[-1]: link.proto.label for link in at.get("page_link")}
    assert set(links) >= {"tour", "head_map"}, links
    assert at.title[0].value == "Model & data"
