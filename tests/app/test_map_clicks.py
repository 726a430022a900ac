"""The Head map's edit log (app.headmap.clicks) applies head clicks and edit buttons in the order they were
made, each once, whichever way Streamlit delivers them (the browser half is tests/browser/test_app_clicks_browser.py)."""
from __future__ import annotations

import pytest
import streamlit

from app.core.session import state
from app.headmap import clicks
from pruning_core.core.heads import HeadLayout, HeadMask

LAYOUT = HeadLayout({"encoder_self": (4, 4)})


@pytest.fixture
def session(monkeypatch):
    """A plain dict as the session state (the functions under test only read and write keys)."""
    store = {state.MAP_LOG: {}, state.MAP_EDITS: {}}
    monkeypatch.setattr(streamlit, "session_state", store)
    state.current_mask(LAYOUT)
    store[state.MAP_EDITS].update(undo=state.undo, redo=state.redo)
    return store


def report(session, *entries, page="p1"):
    session[clicks.KEY] = {"clicks": {"page": page, "clicks": [list(e) for e in entries]}}
    clicks._on_clicks(LAYOUT)


def without(*heads):
    mask = HeadMask.full(LAYOUT)
    for layer, head in heads:
        mask = mask.toggled("encoder_self", layer, head)
    return mask


def test_an_undo_logged_after_a_click_undoes_that_click(session):
    a, b = ("encoder_self", 0, 1), ("encoder_self", 1, 2)
    report(session, a)
    report(session, a, b, ("edit", "undo"))          # the click and Undo delivered in one rerun
    assert state.current_mask(LAYOUT) == without((0, 1))


def test_each_logged_edit_is_applied_once(session):
    a = ("encoder_self", 0, 1)
    report(session, a, ("edit", "undo"))
    report(session, a, ("edit", "undo"))             # the same log sent again: nothing new
    report(session, a, ("edit", "undo"), ("edit", "redo"))
    assert state.current_mask(LAYOUT) == without((0, 1))


def test_a_press_its_button_applied_before_the_log_reported_is_not_applied_twice(session):
    report(session, ("encoder_self", 0, 0), page="p0")
    session[state.MAP_LOG] = {}                      # a new page whose log has not reported yet
    clicks._pressed("undo")                          # its button acts itself ...
    assert state.current_mask(LAYOUT) == HeadMask.full(LAYOUT)
    report(session, ("edit", "undo"), ("encoder_self", 1, 3))    # ... and the log's first report skips it
    assert state.current_mask(LAYOUT) == without((1, 3))


def test_a_button_does_nothing_itself_once_the_log_reports(session):
    report(session, ("encoder_self", 0, 0))
    clicks._pressed("undo")                          # the log holds this press and applies it in order
    assert state.current_mask(LAYOUT) == without((0, 0))


def test_entries_that_do_not_fit_the_model_are_ignored(session):
    report(session, ("encoder_self", 5, 0), ("cross", 0, 0), ("edit", "nothing"), ("edit",), ("encoder_self", 0, 3))
    assert state.current_mask(LAYOUT) == without((0, 3))


def test_a_click_is_named_in_words_in_the_history(session):
    report(session, ("encoder_self", 1, 2))
    assert [e.label for e in state.history()][-1] == "encoder self-attention L1 H2 removed"
