"""Head roles on the dashboard on tiny models: the Head map coloured by one role or by the
strongest role, with role scores in every head's hover text and clicks that still toggle heads; presets
that protect role heads; the live panel's "removes k of n ... heads"; the Attention page's role probe with
its induction stripe; and role scores computed once for two sessions (st.cache_data, counted).

The tiny Llama has an exact previous-token head (constructed as in tests/test_roles.py) and is a language
model, so its roles wait for a click like SmolLM2's; the tiny BERT's are cheap and start by themselves.
"""
from __future__ import annotations

import json
import random
import re

import pytest
import torch
from streamlit.testing.v1 import AppTest

from app.model import cache as model_cache
from app.headmap import figures as headmap
from app.headmap.ui import chart_key
from apptest_helpers import button, click_head, metric, query_param
from browser_helpers import _WORDS, TinyApp, app_env, build_tiny_app, ok
from pruning_core.modeling.sources.loading import load_model
from pruning_core.analysis.roles import compute_roles, get_role, removal_summary
from pruning_core.core.heads import HeadMask
from pruning_core.core.io.share_link import decode_mask
from pruning_core.tasks import get_task

HEAD_MAP, ATTENTION = "app_pages/head_map.py", "app_pages/attention.py"
K = "decoder_self"
COLOUR, PROTECT = "hp_w_headmap_colour", "hp_w_headmap_protect"


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> TinyApp:
    """A tiny Llama language model (with attention biases) whose layer 0 head 0 is an exact previous-token
    head, built as tests/test_roles.py builds its Qwen2 one: constant query and key (weights 0, biases set),
    so rotary embeddings make q_i . k_j = 100 * sum_f cos((i - j - 1) theta_f), largest at j = i - 1. Saved
    like a real model, with a text file task."""
    from transformers import LlamaForCausalLM

    from tiny import make_bert_tokenizer, tiny_config

    folder = tmp_path_factory.mktemp("roles-llama")
    config = tiny_config("llama")
    config.attention_bias = True
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    attn = model.model.layers[0].self_attn
    d = attn.head_dim
    inv = 1.0 / (config.rope_parameters["rope_theta"] ** (torch.arange(0, d, 2).float() / d))
    with torch.no_grad():
        attn.q_proj.weight[:d] = 0
        attn.q_proj.bias[:d] = torch.cat([torch.cos(-inv), torch.sin(-inv)]) * 100.0
        attn.k_proj.weight[:d] = 0                                      # key/value head 0
        attn.k_proj.bias[:d] = torch.cat([torch.ones(d // 2), torch.zeros(d // 2)])
    model.save_pretrained(folder / "model")
    make_bert_tokenizer(folder / "tok").save_pretrained(folder / "model")
    rng = random.Random(0)
    text = folder / "docs.txt"
    text.write_text("\n".join(" ".join(rng.choices(_WORDS, k=rng.randint(6, 14))) for _ in range(40)) + "\n")
    return TinyApp(folder / "model", f"file:{text}", "llama")


@pytest.fixture(scope="module")
def lm_roles(tiny_lm):
    """The tiny model's role report, computed here by the library (what the dashboard must agree with)."""
    report = compute_roles(load_model(str(tiny_lm.model)), task=get_task(tiny_lm.task))
    assert (K, 0, 0) in report.heads("previous_token")                  # the constructed head is found
    return report


def figure(at: AppTest, kind: str) -> dict:
    return json.loads(next(e for e in at.get("plotly_chart") if e.key and e.key.startswith(chart_key(kind) + "_")).proto.spec)


def kept_trace(fig: dict) -> dict:
    return fig["data"][2]                       # legend entries, kept heads, removed heads (app.headmap.figures.figure)


def colour_by(at: AppTest, option: str) -> AppTest:
    return ok(next(s for s in at.selectbox if s.key == COLOUR).set_value(option).run())


def find_roles(at: AppTest) -> AppTest:
    """Press the roles job's button (a language model's roles wait for a click, with a time estimate)."""
    found = next(b for b in at.button if b.label.startswith("Run: Finding head roles"))
    assert "about" in found.label and "on 2 CPU cores" in found.label
    return ok(found.click().run())


def texts(at: AppTest) -> str:
    """The page's captions, Markdown and notes, Markdown escapes undone (app.core.text.md_escape: ``previous\\_token``)."""
    return re.sub(r"\\(.)", r"\1", "\n".join(e.value for kind in ("caption", "markdown", "info") for e in at.get(kind)))


def test_one_role_colours_the_map_and_hover_text_carries_role_scores(app_for, tiny_lm, lm_roles):
    at = ok(app_for(tiny_lm, HEAD_MAP))
    before = kept_trace(figure(at, K))
    assert before["marker"]["colorscale"][0][1] != "#440154"            # cividis by importance, not viridis
    at = colour_by(at, "previous_token")
    assert "until the head roles are found" in texts(at)               # not computed yet: still importance
    at = find_roles(at)
    trace = kept_trace(figure(at, K))
    assert [c[1] for c in trace["marker"]["colorscale"]][0].lower() == "#440154"     # viridis
    detected = {(l, h) for _, l, h in lm_roles.heads("previous_token")}
    for (layer, head), value, width, hover in zip(trace["customdata"], trace["marker"]["color"],
                                                  trace["marker"]["line"]["width"], trace["hovertext"]):
        expected = lm_roles.score("previous_token", (K, layer, head))
        assert value == pytest.approx(expected, abs=1e-12)             # the same float64 the library wrote
        assert (width > 1) == ((layer, head) in detected)               # framed = has the role
        assert f"previous token {expected:.2f}" in hover and "first token (sink)" in hover
        assert "induction" in hover and "retrieval" in hover


def test_strongest_role_has_a_legend_and_a_click_still_toggles(app_for, tiny_lm, lm_roles):
    at = find_roles(colour_by(ok(app_for(tiny_lm, HEAD_MAP)), headmap.STRONGEST))
    fig = figure(at, K)
    legend = {t["name"]: t["marker"]["color"] for t in fig["data"][4:]}
    present = [r for r in lm_roles.roles if lm_roles.heads(r)]
    assert list(legend) == [get_role(r).title for r in present] + ["no role"]
    strongest = lm_roles.strongest()[K]
    trace = kept_trace(fig)
    for (layer, head), colour in zip(trace["customdata"], trace["marker"]["color"]):
        role = strongest[layer][head]
        assert colour == legend[get_role(role).title if role else "no role"]
    assert trace["marker"]["color"][0] == legend["previous token"]       # the constructed head, (0, 0)
    at = ok(click_head(at, K, 0, 1))
    assert metric(at, "heads kept") == "7 / 8"
    fig = figure(at, K)
    assert [tuple(p) for p in fig["data"][3]["customdata"]] == [(0, 1)]   # removed, still role-coloured
    assert [t["name"] for t in fig["data"][4:]] == list(legend)


def test_protected_presets_never_remove_protected_heads_and_the_panel_says_what_goes(app_for, tiny_lm, lm_roles):
    at = find_roles(colour_by(ok(app_for(tiny_lm, HEAD_MAP)), "previous_token"))
    assert f"this mask {removal_summary(lm_roles, HeadMask.full(lm_roles.layout))}" in texts(at)
    assert "this mask removes 0 of 1 previous token head" in texts(at)
    ok(next(b for b in at.button if b.label.startswith("Run: Scoring heads")).click().run())   # a language model
    next(s for s in at.slider if s.label.startswith("Share of heads")).set_value(100).run()
    ok(button(at, "Remove 100 % least important").click().run())
    assert metric(at, "heads kept") == "0 / 8"                           # unprotected: every head goes
    gone = decode_mask(query_param(at, "mask"), lm_roles.layout)
    assert f"this mask {removal_summary(lm_roles, gone)}" in texts(at) and "previous token head" in texts(at)
    ok(button(at, "Reset").click().run())
    ok(next(m for m in at.multiselect if m.key == PROTECT).set_value(["previous_token"]).run())
    ok(button(at, "Remove 100 % least important").click().run())
    protected = set(lm_roles.heads("previous_token"))
    mask = decode_mask(query_param(at, "mask"), lm_roles.layout)
    assert set(mask.removed()).isdisjoint(protected) and len(mask.removed()) == 8 - len(protected)
    assert metric(at, "heads kept") == f"{len(protected)} / 8"
    assert f"this mask {removal_summary(lm_roles, mask)}" in texts(at)
    assert f"0 of {len(protected)} previous token head" in texts(at)
    ok(button(at, "Keep the best head per layer").click().run())
    assert set(decode_mask(query_param(at, "mask"), lm_roles.layout).removed()).isdisjoint(protected)


def test_cheap_roles_start_by_themselves_and_a_model_without_role_heads_says_so(app_for, tmp_path_factory):
    tiny = build_tiny_app(tmp_path_factory.mktemp("roles-bert"), "bert")
    at = colour_by(ok(app_for(tiny, HEAD_MAP)), "previous_token")
    assert not [b for b in at.button if b.label.startswith("Run: Finding head roles")]
    trace = kept_trace(figure(at, "encoder_self"))
    assert trace["marker"]["colorbar"]["title"]["text"] == "previous token score"
    assert "this mask no role heads detected" in texts(at)
    assert "induction" not in [s.options for s in at.selectbox if s.key == COLOUR][0]   # no decoder: no induction


def test_role_scores_are_computed_once_for_two_sessions(app_for, tiny_lm, monkeypatch):
    calls = []
    real = model_cache.compute_roles

    def counting(*args, **kwargs):
        calls.append(kwargs.get("roles"))
        return real(*args, **kwargs)

    monkeypatch.setattr(model_cache, "compute_roles", counting)
    model_cache._roles.clear()
    first = find_roles(colour_by(ok(app_for(tiny_lm, HEAD_MAP)), "previous_token"))
    second = find_roles(colour_by(ok(app_for(tiny_lm, HEAD_MAP)), "previous_token"))   # another browser session
    assert len(calls) == 1
    assert kept_trace(figure(first, K))["marker"]["color"] == kept_trace(figure(second, K))["marker"]["color"]


def test_attention_page_shows_the_induction_probe_and_its_stripe(app_for, tiny_lm):
    at = ok(app_for(tiny_lm, ATTENTION))
    assert "[BOS] + R + R" in texts(at)
    chart = next(e for e in at.get("plotly_chart") if e.key == "hp_w_attention_role_map")
    fig = json.loads(chart.proto.spec)
    heat, stripe = fig["data"][0], fig["data"][1]
    shape = heat["z"]["shape"] if isinstance(heat["z"], dict) else f"{len(heat['z'])}, {len(heat['z'][0])}"
    assert shape.replace(" ", "") == "41,41"                              # [BOS] + 20 + 20 tokens (plotly's typed array)
    assert stripe["x"] == [2, 21] and stripe["y"] == [21, 40]             # key = query - 19 over the second copy
    ok(next(s for s in at.selectbox if s.label == "Role").set_value("previous_token").run())
    assert "first sentence of" in texts(at)


@pytest.mark.browser
def test_in_chromium_colouring_by_a_role_keeps_clicks_toggling_heads(tmp_path_factory, browser):
    pytest.importorskip("playwright.sync_api")
    from browser_helpers import (ARTIFACTS, DashboardServer, click_point, head_points, new_page, wait_idle,
                                 wait_live)

    folder = tmp_path_factory.mktemp("roles-browser")
    tiny = build_tiny_app(folder, "bert")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with DashboardServer(app_env(tiny, folder / "hp-home", eval_limit=24), folder / "streamlit.log") as server:
        page = new_page(browser, height=1400)
        page.goto(f"{server.url}/head_map")
        wait_live(page, "8 / 8")
        wait_idle(page)
        page.locator('[data-testid="stSelectbox"]', has_text="Colour heads by").click()
        page.get_by_role("option", name="role: previous token").click()
        grid = page.locator('[data-testid="stPlotlyChart"]').first
        grid.locator("text=previous token score").wait_for()             # the colour bar of the role's score
        wait_idle(page)
        points = head_points(page)
        assert points.count() == 8
        click_point(page, points.nth(1))
        assert "Heads kept 7 / 8" in wait_live(page, "7 / 8").replace("*", "")
        wait_idle(page)
        assert head_points(page).count() == 7                            # the clicked head is now a removed one
        grid.locator("text=previous token score").wait_for()             # still coloured by the role
        page.screenshot(path=str(ARTIFACTS / "headmap-role-colouring.png"), full_page=True)
        page.context.close()


def test_the_alignment_caption_sets_the_detectors_top_heads_beside_the_models_list():
    from streamlit.testing.v1 import AppTest

    def script():
        import numpy as np

        from app.roles.ui import alignment_caption
        from pruning_core.analysis.roles import RoleReport
        from pruning_core.core.heads import HeadLayout
        grid = np.array([[0.1, 0.9, 0.2], [0.8, 0.05, 0.7]])
        report = RoleReport(HeadLayout({"cross": (3, 3)}), {"alignment": {"cross": grid}}, {"alignment": 0.3})
        alignment_caption(report, [(0, 1), (1, 1), (1, 2)])
        alignment_caption(report, None)

    at = AppTest.from_function(script).run()
    assert not at.exception
    first, second = (c.value for c in at.caption)
    assert "top 3 cross-attention heads are L0H1 ✔, L1H0, L1H2 ✔" in first and "2 of them" in first
    assert "precision 67%" in first and "lists no alignment heads" in second
