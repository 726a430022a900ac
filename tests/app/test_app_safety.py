"""Values from links, files and users are shown as text, and an exposed server
opens local paths only inside the operator's data folders.

Markdown is checked by rendering it with a CommonMark parser (markdown-it, what Streamlit's
react-markdown follows) and looking for links and images in the HTML.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from app.core.access import (
    DataAccess,
    PathNotAllowedError,
    data_access_from,
    is_loopback,
    is_within,
    upload_root,
)
from app.core.text import md_code, md_escape
from browser_helpers import ROOT, app_env

TIMEOUT = 120
HEAD_MAP = "app_pages/head_map.py"
MODEL_PAGE = "app_pages/model_data.py"
EVIL = "x` ![pic](http://example.invalid/track.png) [click me](http://example.invalid/phish) <img src=x> `y"
_MD = MarkdownIt("commonmark")        # raw HTML passes through, so an <img> would show


def html_of(markdown: str) -> str:
    return _MD.render(markdown)


def assert_inert(markdown: str) -> None:
    """No link or image, and (as GFM links bare URLs found in text) no URL outside a code span."""
    out = html_of(markdown)
    assert "<a " not in out and "<img" not in out, (markdown, out)
    outside_code = re.sub(r"<code>.*?</code>", "", out, flags=re.S)
    assert not re.search(r"(?i)://|www\.|@\w+\.", outside_code), (markdown, out)


# -- app.core.text ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [EVIL, "``", "`", " a ", "a\n\nb [x](http://example.invalid)", "", "plain",
                                   "http://example.invalid/x www.example.invalid", ":red[x] $x$ **b** _i_ # h",
                                   "a`b``c```d"])
def test_md_code_and_md_escape_render_exactly_the_text(value):
    for md in (md_code(value), md_escape(value), f"Task {md_code(value)}  \nScore {md_code(value)}"):
        assert_inert(md)
    if value.strip() and "\n" not in value:
        rendered = html_of(md_code(value))
        import html
        assert f"<code>{html.escape(value, quote=False)}</code>" in rendered.replace("&quot;", '"')
    text = html_of(md_escape(value))
    assert "<em>" not in text and "<strong>" not in text and "<h1>" not in text


def test_md_code_keeps_ordinary_values_readable():
    assert md_code("movie-sentiment") == "`movie-sentiment`"
    assert md_code("a`b") == "``a`b``"
    assert md_escape("file:a_b.csv") == "file\\:a\\_b\\.csv"
    assert md_escape("see http://example.invalid/x.") == "see `http://example.invalid/x.`"


# -- app.core.access --------------------------------------------------------------------------------------
def test_loopback_addresses():
    assert all(map(is_loopback, ["127.0.0.1", "::1", "localhost", "127.1.2.3", "[::1]"]))
    assert not any(map(is_loopback, ["0.0.0.0", "", None, "192.168.1.5", "::", "example.org"]))


def test_is_within_resolves_symlinks_and_dotdot(tmp_path):
    allowed, other = tmp_path / "allowed", tmp_path / "other"
    allowed.mkdir(), other.mkdir()
    (other / "secret.csv").write_text("x")
    (allowed / "ok.csv").write_text("x")
    (allowed / "link.csv").symlink_to(other / "secret.csv")
    (allowed / "dirlink").symlink_to(other)
    assert is_within(allowed / "ok.csv", [allowed])
    assert is_within(allowed / "missing.csv", [allowed])
    assert not is_within(allowed / ".." / "other" / "secret.csv", [allowed])
    assert not is_within(allowed / "link.csv", [allowed])
    assert not is_within(allowed / "dirlink" / "secret.csv", [allowed])
    assert not is_within("/etc/passwd", [allowed])
    assert is_within(other / "secret.csv", [allowed, other])


def test_policy_from_environment_and_address(tmp_path):
    assert not data_access_from({}, "127.0.0.1").restricted
    assert not data_access_from({}, None).restricted
    assert data_access_from({}, "0.0.0.0").restricted
    policy = data_access_from({"HEADPRUNE_DATA_DIRS": f"{tmp_path}{os.pathsep}/srv/x"}, "0.0.0.0")
    assert policy.restricted and policy.roots == (tmp_path, Path("/srv/x"), upload_root())
    assert data_access_from({"HEADPRUNE_DATA_DIRS": ""}, "127.0.0.1").roots == (upload_root(),)


def test_restricted_policy_refuses_paths_alike_whether_they_exist_or_not(tmp_path):
    policy = DataAccess(True, (tmp_path, upload_root()))
    (tmp_path / "d.csv").write_text("text,label\n")
    policy.check_task(f"file:{tmp_path / 'd.csv'}")
    policy.check_task("movie-sentiment")
    policy.check_model("default")
    policy.check_model("org/name")
    policy.check_task(f"file:{upload_root() / 'abc' / 'x.csv'}")
    messages = []
    for bad in ("/etc/passwd", "/no/such/file", f"{tmp_path}/../x.csv"):
        with pytest.raises(PathNotAllowedError) as info:
            policy.check_task(f"file:{bad}")
        messages.append(str(info.value).replace(bad, "PATH"))
        with pytest.raises(PathNotAllowedError):
            policy.check_model(bad)
    assert len(set(messages)) == 1 and "root:" not in messages[0]
    DataAccess().check_task("file:/etc/passwd")          # loopback: as before


# -- headprune app: the command line -----------------------------------------------------------------
def test_app_binds_loopback_by_default_and_the_given_host_on_purpose(tmp_path):
    from pruning_core.cli.main import build_parser
    from pruning_core.cli.setup import app_command
    from pruning_core.core.errors import HeadpruneError

    cmd, env = app_command(build_parser().parse_args(["app"]), Path("dashboard.py"))
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1" and env == {}
    cmd, env = app_command(build_parser().parse_args(["app", "--host", "0.0.0.0", "--port", "9000",
                                                      "--data-dir", str(tmp_path)]), Path("dashboard.py"))
    assert cmd[cmd.index("--server.address") + 1] == "0.0.0.0" and cmd[cmd.index("--server.port") + 1] == "9000"
    assert env == {"HEADPRUNE_DATA_DIRS": str(tmp_path.resolve())}
    _, env = app_command(build_parser().parse_args(["app", "--host", "0.0.0.0"]), Path("dashboard.py"))
    assert env == {"HEADPRUNE_DATA_DIRS": ""}
    with pytest.raises(HeadpruneError):
        app_command(build_parser().parse_args(["app", "--host", "::", "--data-dir", str(tmp_path / "nope")]),
                    Path("dashboard.py"))


def test_streamlit_config_binds_loopback():
    import tomllib
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"


# -- the dashboard ------------------------------------------------------------------------------------
@pytest.fixture
def env(monkeypatch, tmp_path, tiny_bert):
    for key, value in app_env(tiny_bert, tmp_path / "hp-home").items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("HEADPRUNE_DATA_DIRS", raising=False)
    return monkeypatch


def all_markdown(at: AppTest) -> list[str]:
    found = []
    for kind in ("markdown", "caption", "error", "warning", "info", "success", "title", "header", "subheader"):
        found += [e.value for e in at.get(kind)]
    found += [e.label for e in at.get("button")]
    return found


def assert_page_inert(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    texts = all_markdown(at)
    assert texts
    for md in texts:
        assert_inert(md)


def test_crafted_link_values_render_as_text(env, tiny_bert):
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
    at.query_params.update({"task": EVIL, "scorer": EVIL, "model": EVIL, "mask": EVIL, "n": EVIL})
    at.run()
    assert_page_inert(at)
    sidebar = [m.value for m in at.sidebar.markdown]
    assert any(md_code(EVIL) in e.value for e in at.error), [e.value for e in at.error]   # said, then the default
    assert at.session_state["hp_model"] != EVIL
    assert any("Score `gradient`" in m for m in sidebar), sidebar           # the scorer in use, after fallback
    assert at.session_state["hp_scorer"] == "gradient"
    assert any("Unknown scorer" in e.value for e in at.error)
    for page in (HEAD_MAP, "app_pages/curves.py", "app_pages/attention.py", "app_pages/share.py", MODEL_PAGE):
        at.switch_page(page).run()
        assert_page_inert(at)


def test_crafted_task_with_a_good_model(env, tiny_bert):
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
    at.query_params.update({"model": str(tiny_bert.model), "task": EVIL, "scorer": "random", "mask": "e:e.7"})
    at.run()
    for page in (HEAD_MAP, MODEL_PAGE):
        at.switch_page(page).run()
        assert_page_inert(at)
        assert at.error                                            # the task cannot be loaded: said so


def test_exposed_server_refuses_a_model_folder_outside_the_data_dirs(env, tiny_bert, tmp_path):
    env.setenv("HEADPRUNE_DATA_DIRS", str(tmp_path / "data"))
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
    at.query_params.update({"model": str(tiny_bert.model), "task": "file:/etc/passwd"})
    at.run()
    assert not at.exception
    errors = " ".join(e.value for e in at.error)
    assert "not allowed" in errors and "root:" not in errors


def test_exposed_server_checks_tasks_and_allows_uploads(env, tiny_bert, tmp_path):
    env.setenv("HEADPRUNE_DATA_DIRS", str(tiny_bert.model))        # the model folder is allowed, the csv is not
    messages = []
    for task in ("file:/etc/passwd", "file:/etc/no-such-file"):
        at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
        at.query_params.update({"task": task})
        at.run()
        assert not at.exception
        errors = [e.value for e in at.error]
        assert any("not allowed" in e for e in errors), errors
        assert not any("root:" in e for e in errors)
        messages.append(" ".join(errors).replace(md_escape(task[5:]), "PATH").replace(md_code(task), "TASK"))
    assert messages[0] == messages[1]                               # existence is not confirmed
    content = b"text,label\nthe movie was good,1\nawful plot,0\nvery fun,1\ndull acting,0\n"
    at.file_uploader(key="hp_w_model_upload").upload("mine.csv", content, "text/csv").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.session_state["hp_task"].endswith("mine.csv")


def test_upload_error_names_the_file_not_the_server_path(env, tiny_bert):
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT).run()
    at.file_uploader(key="hp_w_model_upload").upload("broken.csv", b"text,label\nfine,0\n\"unterminated,1\n",
                                                     "text/csv").run()
    errors = [e.value for e in at.error]
    assert any("broken" in e for e in errors), errors
    assert not any("headprune-uploads" in e or str(upload_root()) in e or "/tmp" in e for e in errors), errors
