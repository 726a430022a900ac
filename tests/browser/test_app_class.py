"""A class on one dashboard server (issue 17): what keeps eight sessions' evaluations from slowing each other.

- torch's OpenMP threads sleep while they wait (``OMP_WAIT_POLICY=PASSIVE``), set by the server's entry
  before anything loads torch: spinning threads took the cores the co-located browsers and the other
  evaluation thread needed (eight queued evaluations of the default: 3x the wall time, 2x the CPU seconds);
- a click's evaluation is started before the map and the panel are redrawn, so eight sessions' evaluations
  join the CPU's queue at once, not after eight redraws that share the server's interpreter.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_dashboard_sets_the_openmp_wait_policy_before_any_import_that_can_load_torch():
    tree = ast.parse((ROOT / "dashboard.py").read_text(encoding="utf-8"))
    body = [node for node in tree.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    sets = [i for i, node in enumerate(body) if "OMP_WAIT_POLICY" in ast.unparse(node)]
    assert sets, "dashboard.py does not set OMP_WAIT_POLICY"
    before = [ast.unparse(n) for n in body[:sets[0]] if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert before == ["import os"], before              # nothing before it can have loaded torch's OpenMP
    assert "setdefault" in ast.unparse(body[sets[0]])   # a policy the user set stays theirs


def test_streamlit_itself_does_not_load_torch_before_the_dashboard_runs():
    """The policy is read when torch's OpenMP library loads: the server must not have loaded it before."""
    code = "import sys, streamlit, streamlit.web.bootstrap; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert out.stdout.strip() == "False"


# -- the evaluation of a click joins the CPU's queue before the map is redrawn --------------------------
import pytest  # noqa: E402

from apptest_helpers import click_head, metric  # noqa: E402
from browser_helpers import build_tiny_app, ok, open_app  # noqa: E402


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return build_tiny_app(tmp_path_factory.mktemp("class-bert"), "bert", n_examples=24)


def test_a_click_starts_its_evaluation_before_the_map_is_drawn(monkeypatch, tmp_path, tiny_bert):
    from app.model import cache, jobs as model_jobs
    from app.runtime import board as jobs, work
    from app.sidebar import pickers
    from app.headmap import ui as headmap_ui

    at = ok(open_app(monkeypatch, tmp_path / "hp-home", tiny_bert, "app_pages/head_map.py"))
    started: list[bool] = []
    original = headmap_ui.show_grid

    def spying(kind, mask, *args, **kwargs):
        found = work.job_board().get(model_jobs.EVAL_JOB)
        started.append(found is not None and found.ident == jobs.identity(
            cache.evaluate, (pickers.selection(), mask), {}))
        return original(kind, mask, *args, **kwargs)

    monkeypatch.setattr(headmap_ui, "show_grid", spying)
    ok(click_head(at, "encoder_self", 1, 2))
    assert metric(at, "heads kept") == "7 / 8"
    assert started and all(started), started     # this mask's evaluation was running when its map was drawn
