"""One page list (app.core.pages): the navigation, shared links and the tests all read it, and the
sidebar names a real evaluation size."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.share import links as share
from app.core.pages import PAGES, URL_PATHS
from browser_helpers import ROOT, app_env, build_tiny_app

TIMEOUT = 120


def test_every_page_script_is_listed_once_and_exists():
    scripts = sorted(p.name for p in (ROOT / "app_pages").glob("*.py"))
    assert sorted(Path(p.file).name for p in PAGES) == scripts
    assert len(set(URL_PATHS)) == len(URL_PATHS) and URL_PATHS[1] == "head_map"


@pytest.mark.parametrize("page", URL_PATHS)
def test_a_link_to_any_listed_page_gives_its_app_address(page):
    assert share.link_base(f"http://host:8501/{page}") == "http://host:8501/head_map"


def test_sidebar_names_the_evaluation_size(monkeypatch, tmp_path):
    tiny = build_tiny_app(tmp_path / "app", "bert")
    env = app_env(tiny, tmp_path / "home")
    env.pop("HEADPRUNE_APP_EVAL_LIMIT", None)           # the model's own size, not a chosen one
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("HEADPRUNE_APP_EVAL_LIMIT", raising=False)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT).run()
    text = " ".join(m.value for m in at.sidebar.markdown)
    assert "Evaluated on None" not in text and "Evaluated on " in text, text
