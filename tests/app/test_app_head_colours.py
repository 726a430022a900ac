"""bertviz's views give every head (head view) and every layer (model view) a colour of its own
(a scheme of 10 colours would repeat colours 0 and 1 for heads 10 and 11 of a 12-head model)."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from app.attention import figures as attention
from pruning_core.analysis import attention_maps
from pruning_core.core.heads import HeadMask

CSS_COLOUR = re.compile(r"^(#[0-9A-Fa-f]{6}|hsl\(\d+, \d+%, \d+%\))$")


def _run(layers: int, heads: int) -> attention_maps.AttentionRun:
    tokens = ("[CLS]", "a", "b", "[SEP]")
    rng = np.random.default_rng(0)
    maps = {"encoder_self": tuple(rng.dirichlet(np.ones(4), size=(heads, 4)).astype(np.float32)
                                  for _ in range(layers))}
    mask = HeadMask({"encoder_self": tuple((1,) * heads for _ in range(layers))})
    pred = attention_maps.Prediction("a", (("a", 0.6), ("b", 0.4)))
    return attention_maps.AttentionRun(text="a b", encoder_tokens=tokens, decoder_tokens=None, sentence_b_start=None,
                                       dense=maps, pruned=maps, mask=mask, dense_prediction=pred,
                                       pruned_prediction=pred, truncated=False)


@pytest.mark.parametrize("n", [1, 10, 12, 16, 40])
def test_head_colours_are_distinct_css_colours(n):
    colours = attention.head_colours(n)
    assert len(colours) >= n and len(set(colours[:n])) == n
    assert all(CSS_COLOUR.match(c) for c in colours)


@pytest.mark.parametrize("view, layers, heads", [("head", 2, 12), ("head", 3, 16), ("model", 14, 4)])
def test_bertviz_views_have_a_colour_per_head_and_layer(view, layers, heads, stand_in_scripts):
    document = (attention.head_view_html if view == "head" else attention.model_view_html)(_run(layers, heads), "dense")
    assert "d3.schemeCategory10" not in document and "% 10]" not in document
    lists = [json.loads(m) for m in re.findall(r'\[(?:"[^"\]]+", ?)+"[^"\]]+"\]', document)]
    palette = max(lists, key=len)
    assert len(set(palette)) >= max(layers, heads)


def test_every_role_has_its_own_hue_previous_token_apart_from_positional():
    """Issue 40: "previous token" and "positional (fixed offset)" were rose and wine, one hue."""
    import colorsys

    from app.headmap.figures import role_colour
    from pruning_core.analysis.roles import role_names

    roles = tuple(role_names())
    colours = [role_colour(r, roles) for r in roles]
    assert len(set(colours)) == len(roles), colours

    def hue(hex_colour: str) -> float:
        return 360 * colorsys.rgb_to_hsv(*(int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)))[0]

    apart = abs(hue(role_colour("previous_token", roles)) - hue(role_colour("positional", roles))) % 360
    assert min(apart, 360 - apart) > 90, apart
