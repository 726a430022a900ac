"""Fixtures of the dashboard tests: an AppTest opened on a page, and stand-ins for the fetched scripts."""
from __future__ import annotations

import pytest

from app.core import webassets
from browser_helpers import open_app

TIMEOUT = 180        # seconds one AppTest run may take


@pytest.fixture
def app_eval_limit() -> int | None:
    """The example count ``app_for`` gives the dashboard (HEADPRUNE_APP_EVAL_LIMIT); a module that overrides
    this with ``None`` tests the dashboard's own default."""
    return 12


@pytest.fixture
def app_for(monkeypatch, tmp_path, app_eval_limit):
    """``app_for(tiny, page=None, mask=None)``: an AppTest of the dashboard on ``tiny`` with a private
    HEADPRUNE_HOME, run once and switched to ``page`` (``None``: stay on the first page, Model & data),
    optionally opened by a link carrying ``mask`` in the URL's text form."""
    def start(tiny, page: str | None = None, mask: str | None = None):
        return open_app(monkeypatch, tmp_path / "hp-home", tiny, page, mask, app_eval_limit, timeout=TIMEOUT)
    return start


@pytest.fixture
def stand_in_scripts(monkeypatch):
    """d3 / jQuery need not have been fetched: stand-ins when they are missing (test_app_share covers them)."""
    if webassets.missing():
        monkeypatch.setattr(webassets, "script", lambda name: f"/* {name} stand-in */")
