"""Work the server has already done is shown, not offered again: a fresh session opening Curves after another
session computed the curves sees them at once, with no "Compute" or "Run" button and no estimate of their cost."""
from __future__ import annotations

import json

import pytest
import streamlit as st

from app.runtime.work import Work, in_server_cache
from browser_helpers import ok

CURVES = "app_pages/curves.py"

pytestmark = pytest.mark.usefixtures("stand_in_scripts")


def _curve_figures(at) -> list:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.key is None]


def test_a_cached_result_is_shown_without_a_run_button(app_for, tiny_bert_24):
    first = ok(app_for(tiny_bert_24, CURVES))
    assert not _curve_figures(first)
    ok(next(b for b in first.button if b.label == "Compute the curves").click().run())
    assert _curve_figures(first)
    fresh = ok(app_for(tiny_bert_24, CURVES))               # another session: the server holds the curves
    assert _curve_figures(fresh)
    labels = [b.label for b in fresh.button]
    assert "Compute the curves" not in labels and not [l for l in labels if l.startswith("Run: Pruning curve")]
    assert not [c.value for c in fresh.caption if c.value.startswith("Computing")]


def test_the_cache_is_read_without_computing():
    calls = []

    @st.cache_data(show_spinner=False)
    def double(x: int, _progress=None) -> int:
        calls.append(x)
        return 2 * x

    work = Work("double", "Doubling", double, (21,), start="button")
    assert not work.cached() and not calls
    assert double(21) == 42 and calls == [21]
    assert work.cached() and in_server_cache(double, (21,), {}) and not in_server_cache(double, (22,), {})
    assert calls == [21]
    assert not in_server_cache(lambda x: x, (1,), {})       # not a cached function: counted as not cached
