"""An uploaded task is shown by its file name, never by the server's temp path:
sidebar, page titles and captions, the task picker, the HTML report and error messages; the
session keeps the full ``file:`` name so links and restores still work."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from app.core.access import hide_upload_paths, task_label, upload_root
from browser_helpers import ROOT, app_env, build_tiny_app, ok

TIMEOUT = 120


def test_task_label_and_error_messages_drop_the_upload_path():
    path = upload_root() / "0123456789abcdef" / "mine.csv"
    assert task_label(f"file:{path}") == "mine.csv (uploaded)"
    assert task_label("file:/data/own.csv") == "file:/data/own.csv" and task_label("sst2") == "sst2"
    message = f"Task 'file:{path}' example 3 of 'test' has label 'x'; see {path.parent}."
    shown = hide_upload_paths(message)
    assert "headprune-uploads" not in shown and "mine.csv (uploaded)" in shown


def _texts(at: AppTest) -> list[str]:
    found = []
    for kind in ("markdown", "caption", "subheader", "title", "error", "warning", "info", "success"):
        found += [e.value for e in at.get(kind)]
    for box in at.selectbox:
        found += [str(o) for o in box.options]                 # AppTest holds the shown labels
    return found


def test_an_uploaded_task_shows_its_file_name_on_every_page(tmp_path, monkeypatch):
    tiny = build_tiny_app(tmp_path / "tiny", "bert")
    for key, value in app_env(tiny, tmp_path / "home").items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT).run()
    content = b"text,label\nthe movie was good,1\nawful plot,0\nvery fun,1\ndull acting,0\n"
    at.file_uploader(key="hp_w_model_upload").upload("mine.csv", content, "text/csv").run()
    ok(at)
    assert str(upload_root()) in at.session_state["hp_task"]                  # the session keeps the real name
    for page in ("app_pages/model_data.py", "app_pages/head_map.py", "app_pages/share.py"):
        ok(at.switch_page(page).run())
        texts = _texts(at)
        assert not [t for t in texts if "headprune-uploads" in t], page
        assert any("mine.csv (uploaded)" in t for t in texts), page
