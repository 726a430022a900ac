"""A translation model whose decoder has no self-attention (the Bergamot students' SSRU): every page says
so in words, and shows only the kinds it has."""
from __future__ import annotations

import pytest

from browser_helpers import build_tiny_app, ok, open_app

HEAD_MAP, MODEL_PAGE = "app_pages/head_map.py", "app_pages/model_data.py"


@pytest.fixture(scope="module")
def tiny_ssru(tmp_path_factory):
    return build_tiny_app(tmp_path_factory.mktemp("app-ssru"), "marian-ssru", n_examples=8)


def test_the_head_map_names_the_missing_decoder_self_attention(tiny_ssru, tmp_path, monkeypatch):
    at = ok(open_app(monkeypatch, tmp_path / "home", tiny_ssru, HEAD_MAP, eval_limit=8))
    grids = {e.key for e in at.get("plotly_chart") if e.key and "headmap_grid" in e.key}
    assert any("encoder_self" in k for k in grids) and any("cross" in k for k in grids)
    assert not any("decoder_self" in k for k in grids), grids
    assert any(c.value.startswith("No decoder self-attention map: its decoder runs an SSRU") for c in at.caption)
    at = ok(at.switch_page(MODEL_PAGE).run())
    assert any(c.value.startswith("No decoder self-attention heads: its decoder runs an SSRU") for c in at.caption)
