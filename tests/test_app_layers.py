"""The dashboard's layers: the pure modules of ``app`` import no Streamlit, and the page scripts
live outside Streamlit's auto-discovered ``pages/`` folder (no private Streamlit API needed)."""
from __future__ import annotations

import ast
import re
import subprocess
import sys

from browser_helpers import ROOT

PURE = ["app", "app.analysis", "app.share", "app.report", "app.charts", "app.headmap", "app.speed",
        "app.attention", "app.dynamics_charts", "app.webassets", "app.text", "app.access", "app.uncertainty",
        "app.tour", "app.mask_history", "app.role_probe",
        "pruning_core.attention_maps", "pruning_core.share_link"]


def test_pure_app_modules_do_not_import_streamlit():
    code = (f"import sys\nfor name in {PURE!r}:\n    __import__(name)\n"
            "bad = sorted(m for m in sys.modules if m == 'streamlit' or m.startswith('streamlit.'))\n"
            "assert not bad, bad[:5]\nprint('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def _calls_to(tree: ast.AST, names: set[str]) -> int:
    return sum(isinstance(n, ast.Attribute) and n.attr in names for n in ast.walk(tree))


def test_every_streamlit_cache_lives_in_app_cache():
    """Cached calls live in app/cache.py and its feature modules app/cache_<feature>.py, nowhere else."""
    found = {}
    for path in [*ROOT.joinpath("app").glob("*.py"), *ROOT.joinpath("app_pages").glob("*.py"), ROOT / "dashboard.py"]:
        count = _calls_to(ast.parse(path.read_text(encoding="utf-8")), {"cache_data", "cache_resource"})
        if count:
            found[path.relative_to(ROOT).as_posix()] = count
    assert "app/cache.py" in found, found
    assert all(re.fullmatch(r"app/cache(_[a-z]+)?\.py", name) for name in found), found


def test_pages_are_not_in_the_auto_discovered_folder_and_no_private_streamlit_api_is_used():
    assert not (ROOT / "pages").exists()
    for path in ROOT.joinpath("app").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "PagesManager" not in text and "streamlit.runtime.pages_manager" not in text, path
