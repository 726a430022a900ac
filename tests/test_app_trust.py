"""Issue 8 (dashboard part): numbers people can trust. A wrong-shape mask is refused at preview (in
test_app_pages_extra), every share bundle and report carries complete provenance, every metric shows
its 95 % interval and example count, deltas inside the noise say so, curves get a chance line, and
the small items of point 11. AppTest on tiny models (see test_app_pages.py)."""
from __future__ import annotations

import json

import pytest

from app import share_ui, webassets
from browser_helpers import build_tiny_app, ok, open_app

TIMEOUT = 120
SHARE, HEAD_MAP, MODEL_PAGE, CURVES = ("app_pages/share.py", "app_pages/head_map.py", "app_pages/model_data.py",
                                       "app_pages/curves.py")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return build_tiny_app(tmp_path_factory.mktemp("trust-bert"), "bert", n_examples=24)


@pytest.fixture(autouse=True)
def stand_in_scripts(monkeypatch):
    if webassets.missing():
        monkeypatch.setattr(webassets, "script", lambda name: f"/* {name} stand-in */")


@pytest.fixture
def app_for(monkeypatch, tmp_path):
    def start(tiny, page: str, mask: str | None = None, eval_limit: int = 12):
        return open_app(monkeypatch, tmp_path / "hp-home", tiny, page, mask, eval_limit, timeout=TIMEOUT)
    return start


# -- item 9: provenance --------------------------------------------------------------------------------

def test_share_bundle_and_report_carry_split_examples_seeds_and_versions(app_for, tiny_bert, monkeypatch):
    made = []
    real = share_ui.gather_analysis
    monkeypatch.setattr(share_ui, "gather_analysis", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    ok(app_for(tiny_bert, SHARE, mask="e:7.f"))
    analysis = made[-1]
    data = json.loads(analysis.to_bytes())
    prov = data["provenance"]
    assert prov["split"] and prov["n_examples"] == 12
    assert prov["versions"]["torch"] and prov["settings"]["score_seed"] == 0
    for name in ("masked", "dense"):
        own = data["eval"][name]["provenance"]
        assert own["split"] == prov["split"] and own["n_examples"] == 12 and own["versions"] and own["task"]
    from app import report
    html = report.build_report(analysis)
    assert f"first 12 examples of the <b>{prov['split']}</b> split" in html
