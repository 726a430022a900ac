"""The dashboard's layers: the pure modules of ``app`` import no Streamlit, and the page scripts
live outside Streamlit's auto-discovered ``pages/`` folder (no private Streamlit API needed)."""
from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest

from browser_helpers import ROOT

PURE = ["app", "app.share.analysis", "app.share.links", "app.share.report", "app.curves.figures",
        "app.headmap.figures", "app.speed.figures", "app.attention.figures", "app.curves.dynamics",
        "app.core.webassets", "app.core.text", "app.core.access", "app.core.uncertainty", "app.tour.steps",
        "app.core.mask_history", "app.roles.probe",
        "pruning_core.analysis.attention_maps", "pruning_core.core.share_link"]


@pytest.mark.heavy
def test_pure_app_modules_do_not_import_streamlit():
    code = (f"import sys\nfor name in {PURE!r}:\n    __import__(name)\n"
            "bad = sorted(m for m in sys.modules if m == 'streamlit' or m.startswith('streamlit.'))\n"
            "assert not bad, bad[:5]\nprint('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def _calls_to(tree: ast.AST, names: set[str]) -> int:
    return sum(isinstance(n, ast.Attribute) and n.attr in names for n in ast.walk(tree))


def test_every_streamlit_cache_lives_in_app_cache():
    """Cached calls live in the shared app/jobs/cache.py and each feature's own app/<feature>/cache.py, nowhere else."""
    found = {}
    for path in [*ROOT.joinpath("app").rglob("*.py"), *ROOT.joinpath("app_pages").glob("*.py"), ROOT / "dashboard.py"]:
        count = _calls_to(ast.parse(path.read_text(encoding="utf-8")), {"cache_data", "cache_resource"})
        if count:
            found[path.relative_to(ROOT).as_posix()] = count
    assert "app/jobs/cache.py" in found, found
    assert all(re.fullmatch(r"app/[a-z]+/cache\.py", name) for name in found), found


def test_pages_are_not_in_the_auto_discovered_folder_and_no_private_streamlit_api_is_used():
    """Streamlit 1.67 still runs an app with a ``pages/`` folder beside its main script as an old-style
    multipage app (``PagesManager.uses_pages_directory``): the page scripts live in ``app_pages/``."""
    assert not (ROOT / "pages").exists()
    for path in [*ROOT.joinpath("app").rglob("*.py"), ROOT / "dashboard.py"]:
        text = path.read_text(encoding="utf-8")
        assert "PagesManager" not in text and "streamlit.runtime.pages_manager" not in text, path


def _literal(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant) and isinstance(node.value, str)


def _session_state(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "session_state"


def test_only_app_state_names_session_keys_and_touches_the_url():
    """``app/core/state.py`` holds every session-state key and the URL's query parameters: other modules
    index ``st.session_state`` only with its names or widget keys, never a literal, and never touch
    ``st.query_params``."""
    found = []
    for path in [*ROOT.joinpath("app").rglob("*.py"), *ROOT.joinpath("app_pages").glob("*.py"), ROOT / "dashboard.py"]:
        if path == ROOT / "app" / "core" / "state.py":
            continue
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            literal_key = (isinstance(n, ast.Subscript) and _session_state(n.value) and _literal(n.slice)) or (
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and _session_state(n.func.value)
                and n.args and _literal(n.args[0]))
            if literal_key or (isinstance(n, ast.Attribute) and n.attr == "query_params"):
                found.append(f"{path.relative_to(ROOT).as_posix()}:{n.lineno}")
    assert not found, found


def test_app_state_holds_keys_and_url_only():
    """The feature logic that once lived in ``app/core/state.py`` (mask history, jobs, notices, kept results) stays in
    its feature's module: state imports no other app module but the Markdown escaping of :mod:`app.core.text`."""
    tree = ast.parse((ROOT / "app" / "core" / "state.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert {m for m in imported if m == "app" or m.startswith("app.")} <= {"app.core.text"}, imported
    assert not [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
