"""The Head map's KV-cache mode on a tiny grouped-query Llama (2 layers, 4 query heads sharing 2 key/value heads,
4,096 positions, a byte tokenizer): the switch, a click switching a key/value head to streaming, the KV memory
equal to the library's arithmetic, accuracy as the CLI computes it, no figure of another policy shown, the intro and
legend of the mode on screen, and the mode kept across a visit to another page."""
from __future__ import annotations

import json

import pytest
import torch

from app.core import uncertainty
from apptest_helpers import click_grid, metric
from browser_helpers import TinyApp, ok, open_app
from long_context_tiny import WORDS, save_long_model
from pruning_core.evaluation.metrics import get_metric
from pruning_core.modeling.kv import kv_policy as kvp
from pruning_core.modeling.sources.loading import load_model
from pruning_core.tasks.data import wordlists
from pruning_core.tasks.long_context import LongContextTask

PAGE = "app_pages/head_map.py"
MODE = "hp_w_headmap_kv_mode"
GRID = "hp_w_headmap_kvgrid"
HEAD_DIM, DTYPE_BYTES, CONTEXT = 8, 4, 1024        # the tiny model: hidden 32 / 4 heads, float32


@pytest.fixture(autouse=True)
def one_thread():
    """The tiny model's operations are so small that with several threads their synchronisation dominates: on a
    loaded 2-core machine one evaluation of 5 examples at 1,024 tokens took 31 s, 1.6 s on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def long_app(tmp_path_factory) -> TinyApp:
    folder = tmp_path_factory.mktemp("kv-app")
    text = folder / "docs.txt"
    text.write_text("\n".join(f"line {i} of a small text about grass, sky and numbers" for i in range(40)) + "\n")
    return TinyApp(save_long_model(folder / "tiny-long"), f"file:{text}", "llama")


@pytest.fixture
def kv_page(monkeypatch, tmp_path, long_app):
    """The Head map on the tiny model, switched to the KV-cache mode (the RULER word lists are the tests' own)."""
    monkeypatch.setattr(wordlists, "load_words", lambda *a, **k: WORDS)
    at = ok(open_app(monkeypatch, tmp_path / "hp-home", long_app, PAGE))
    at.radio(key=MODE).set_value("kv").run()
    return ok(at)


def click_kv_head(at, layer: int, j: int):
    return ok(click_grid(at, GRID + "_", layer, j))


def _memory(rows) -> str:
    return _memory_at(rows, 128, 256)


def _memory_at(rows, sink: int, window: int) -> str:
    policy = kvp.KVPolicy(tuple(map(tuple, rows)), sink, window)
    return f"{kvp.kv_bytes(policy, HEAD_DIM, CONTEXT, DTYPE_BYTES) / 2 ** 20:.2f} MiB"


def test_the_switch_shows_key_value_heads_and_a_click_streams_one(kv_page):
    at = kv_page
    assert [e.key for e in at.get("plotly_chart") if e.key and e.key.startswith(GRID)] == [f"{GRID}_0000"]
    assert metric(at, "KV cache at 1,024 tokens") == _memory([[0, 0], [0, 0]]) == "0.25 MiB"
    at = click_kv_head(at, 1, 0)
    assert [e.key for e in at.get("plotly_chart") if e.key and e.key.startswith(GRID)] == [f"{GRID}_0010"]
    assert metric(at, "KV cache at 1,024 tokens") == _memory([[0, 0], [1, 0]])
    shown = next(m for m in at.metric if m.label == "KV cache at 1,024 tokens").proto
    full = kvp.kv_bytes(kvp.KVPolicy(((False,) * 2,) * 2, 128, 256), HEAD_DIM, CONTEXT, DTYPE_BYTES)
    assert shown.delta == f"{full / (3 * 1024 + 384) / (2 * HEAD_DIM * DTYPE_BYTES):.2f}x smaller"
    assert metric(at, "full cache") == "0.25 MiB"
    assert "1 of 4 key/value heads stream" in " ".join(c.value for c in at.caption)
    at.number_input(key="hp_w_headmap_kv_sink").set_value(32).run()
    at = ok(at.number_input(key="hp_w_headmap_kv_window").set_value(96).run())
    policy = kvp.KVPolicy(((False, False), (True, False)), 32, 96)
    assert metric(at, "KV cache at 1,024 tokens") == f"{kvp.kv_bytes(policy, HEAD_DIM, CONTEXT, DTYPE_BYTES) / 2 ** 20:.2f} MiB"
    at = click_kv_head(at, 1, 0)                                     # back to full
    assert metric(at, "KV cache at 1,024 tokens") == "0.25 MiB"


def _texts(at, kind: str) -> str:
    return " ".join(e.value for e in getattr(at, kind))


def test_the_intro_says_what_a_click_does_in_the_mode_on_screen(monkeypatch, tmp_path, long_app):
    monkeypatch.setattr(wordlists, "load_words", lambda *a, **k: WORDS)
    at = ok(open_app(monkeypatch, tmp_path / "hp-home", long_app, PAGE))
    assert "remove or restore" in _texts(at, "markdown")
    at = ok(at.radio(key=MODE).set_value("kv").run())
    intro = _texts(at, "markdown")
    assert "remove or restore" not in intro
    assert "switch it between the **full cache**" in intro and "last W tokens" in intro
    at = ok(at.radio(key=MODE).set_value("heads").run())
    assert "remove or restore" in _texts(at, "markdown")


def test_the_legend_names_full_and_streaming_heads_and_what_s_and_w_keep(kv_page):
    at = kv_page
    chart = next(c for c in at.get("plotly_chart") if c.key and c.key.startswith(GRID))
    spec = json.loads(chart.proto.spec)
    assert [t["name"] for t in spec["data"] if t.get("showlegend", True)] == [
        "full cache: every token", "streaming: S 128 + W 256 tokens"]                  # both, though none streams
    assert spec["layout"]["legend"]["itemclick"] is False          # a legend click would hide a kind of head
    legend = _texts(at, "caption")
    assert "keeps all 1,024 tokens" in legend and "first S = 128 tokens" in legend and "last W = 256" in legend
    assert "384 of 1,024" in legend and "changes nothing" not in legend
    assert "(the same: no key/value head streams)" in legend and "1.00x" not in legend
    help_text = next(m for m in at.metric if m.label == "KV cache at 1,024 tokens").proto.help
    assert "weights are not included" in help_text and "not measured" in help_text
    at = ok(at.number_input(key="hp_w_headmap_kv_window").set_value(1024).run())
    legend = _texts(at, "caption")
    assert "1,024 of 1,024" in legend and "changes nothing" in legend
    button = next(b for b in at.button if b.label.startswith("Evaluate on niah-single"))
    assert "(estimate: about" in button.label and "not measured" in button.proto.help


def test_the_mode_and_its_settings_survive_another_page(kv_page):
    at = kv_page
    at.number_input(key="hp_w_headmap_kv_sink").set_value(32).run()
    at = click_kv_head(at, 1, 0)
    at = ok(at.switch_page("app_pages/model_data.py").run())
    assert not [r for r in at.radio if r.key == MODE]
    at = ok(at.switch_page(PAGE).run())
    assert at.radio(key=MODE).value == "kv"
    assert at.number_input(key="hp_w_headmap_kv_sink").value == 32
    assert [e.key for e in at.get("plotly_chart") if e.key and e.key.startswith(GRID)] == [f"{GRID}_0010"]
    assert metric(at, "KV cache at 1,024 tokens") == _memory_at([[0, 0], [1, 0]], 32, 256)


def test_the_evaluations_progress_counts_examples():
    from app.core.progress_text import describe
    from app.headmap.cache import _per_example
    from pruning_core.core.progress import ProgressEvent
    events = []
    _per_example(events.append)(ProgressEvent("evaluate", 2, 5, "niah-single"))
    _per_example(events.append)(ProgressEvent("queue", 1, None))
    assert [e.stage for e in events] == ["evaluate-examples", "queue"]
    assert describe(events[0], "Evaluating this policy on niah-single")[1] == \
        "Evaluating this policy on niah-single: example 2 of 5\\, niah\\-single"


def test_the_downloaded_policy_is_the_file_the_cli_reads(long_app):
    from app.headmap.kv_mode import policy_file
    loaded = load_model(str(long_app.model), device="cpu")
    policy = kvp.KVPolicy(((True, False), (False, True)), 64, 128, {"method": "by hand"})
    text = policy_file(loaded, policy, kvp.memory_report(policy, loaded, CONTEXT))
    back = kvp.KVPolicy.from_json(json.loads(text))
    assert back == policy and back.source == {"method": "by hand"}
    back.check_fits(loaded)
    assert json.loads(text)["provenance"]["settings"]["memory"]["kv_bytes"] == kvp.kv_bytes(policy, HEAD_DIM, CONTEXT, 4)


def test_accuracy_is_the_clis_and_a_stale_result_is_not_shown(kv_page, long_app):
    at = click_kv_head(kv_page, 0, 1)
    at.selectbox(key="hp_w_headmap_kv_n").set_value(5).run()
    evaluate = next(b for b in at.button if b.label.startswith("Evaluate on niah-single: 5 examples"))
    at = ok(evaluate.click().run())
    shown = metric(at, "exact match, this policy"), metric(at, "exact match, full cache")
    loaded = load_model(str(long_app.model), device="cpu")
    data = LongContextTask("niah-single", words=WORDS).encode(loaded, "test", 5, max_length=CONTEXT)
    expected = []
    for rows in (((False, True), (False, False)), ((False, False), (False, False))):
        with torch.no_grad(), kvp.applied(loaded, kvp.KVPolicy(rows, 128, 256)):
            res = LongContextTask("niah-single", words=WORDS).evaluate(loaded, data, None, batch_size=1)
        expected.append(res)
    seen = [uncertainty.shown(r) for r in expected]             # rounded as the Head map rounds: one rule
    assert shown == tuple(s.value for s in seen)
    caption = next(c.value for c in at.caption if "first 5 examples" in c.value)
    assert f"this policy {seen[0].value} ({seen[0].interval})" in caption
    delta = next(m for m in at.metric if m.label == "exact match, this policy").proto.delta
    # 5 examples are too few for a paired test: any change is tagged as noise, as on the Head map
    assert "within noise" in delta or "no change" in delta, delta
    at = click_kv_head(at, 1, 1)                                      # another policy: its figure is not known
    assert not [m for m in at.metric if m.label.startswith("exact match")]
    assert any(b.label.startswith("Evaluate on niah-single") for b in at.button)
    at = click_kv_head(at, 1, 1)                                      # the evaluated policy again: its figures
    assert metric(at, "exact match, this policy") == shown[0]
    # two policies side by side: keep this one, change the map, and both are in one table
    at = ok(next(b for b in at.button if b.label == "Keep this policy for comparison").click().run())
    at = click_kv_head(at, 1, 0)                # another square: the same chart's last selection would not count
    side = next(d.value for d in at.dataframe if "policy" in d.value.columns)
    assert list(side["policy"]) == ["on screen", "kept"]
    assert list(side["exact match"]) == ["not evaluated", shown[0]]
    assert list(side["streaming key/value heads"]) == ["2 of 4", "1 of 4"]


def test_fill_from_scores_streams_the_lowest_retrieval_groups(kv_page, monkeypatch):
    """The share of key/value heads whose query heads' retrieval scores sum lowest stream, as ``headprune kv-policy``
    chooses them (a role report given to the page: the roles job is tested in test_app_roles)."""
    import numpy as np

    from app.headmap import roles as role_ui
    from pruning_core.analysis.roles import RoleReport
    from pruning_core.core.heads import HeadLayout
    grid = np.array([[0.9, 0.8, 0.1, 0.0], [0.0, 0.1, 0.5, 0.6]])          # groups: 1.7, 0.1 | 0.1, 1.1
    report = RoleReport(HeadLayout({"decoder_self": (4, 4)}), {"retrieval": {"decoder_self": grid}}, {"retrieval": 0.3})
    monkeypatch.setattr(role_ui, "ready", lambda sel: report)
    at = ok(kv_page.run())
    at = ok(next(b for b in at.button if b.label.startswith("Fill from scores: stream the 50%")).click().run())
    expected = kvp.from_scores(report.head_scores("retrieval"), {"decoder_self": (((0, 1), (2, 3)),) * 2}, 0.5)
    bits = "".join("1" if s else "0" for row in expected.streaming for s in row)
    assert bits == "0110"
    assert [e.key for e in at.get("plotly_chart") if e.key and e.key.startswith(GRID)] == [f"{GRID}_{bits}"]
    assert metric(at, "KV cache at 1,024 tokens") == _memory(expected.streaming)


def test_the_mode_is_not_offered_for_an_encoder(app_for, tiny_bert):
    at = ok(app_for(tiny_bert, PAGE))
    assert not [r for r in at.radio if r.key == MODE]


# -- the Attention page's logit attribution view ---------------------------------------------------------

SENTENCE = "The plot was dull, but the acting was really great."


def test_logit_attribution_view_is_the_librarys_and_cached(monkeypatch, tmp_path, long_app, stand_in_scripts):
    from pruning_core.analysis import logit_attribution as dla
    monkeypatch.setattr(wordlists, "load_words", lambda *a, **k: WORDS)
    calls = []
    real = dla.attribute_head
    monkeypatch.setattr(dla, "attribute_head", lambda *a, **k: calls.append((a[2:4], k)) or real(*a, **k))
    at = ok(open_app(monkeypatch, tmp_path / "hp-home", long_app, "app_pages/attention.py"))
    at.selectbox(key="hp_w_attention_dla_layer").set_value(1).run()
    at = ok(at.selectbox(key="hp_w_attention_dla_head").set_value(3).run())
    loaded = load_model(str(long_app.model), device="cpu")
    expected = real(loaded, loaded.tokenizer(SENTENCE, return_tensors="pt")["input_ids"], 1, 3)
    frame = next(d.value for d in at.dataframe if "All heads" in d.value.columns)
    assert list(frame["All heads"]) == [repr(t.token) for t in expected.before]
    assert list(frame["Layer 1, head 3 removed"]) == [repr(t.token) for t in expected.after]
    assert frame["Probability, head removed"].tolist() == [round(t.value, 4) for t in expected.after]
    bars = next(c for c in at.get("plotly_chart") if "promotes" in c.proto.spec)
    assert json.loads(bars.proto.spec)["data"][0]["y"][::-1] == [repr(t.token) for t in expected.promoted]
    assert calls[-1][0] == (1, 3)
    n = len(calls)
    ok(at.run())                                           # the same model, head and input: from the cache
    assert len(calls) == n
    at = ok(at.radio(key="hp_w_attention_dla_source").set_value("example").run())
    caption = next(c.value for c in at.caption if "answer's first token" in c.value)
    assert calls[-1][1]["target"] is not None and "without this head" in caption



def _sidebar(at) -> str:
    return " ".join(m.value for m in at.sidebar.markdown)


def test_the_kv_mode_hides_the_pruning_scorer_and_the_heads_mode_shows_it(monkeypatch, tmp_path, long_app):
    monkeypatch.setattr(wordlists, "load_words", lambda *a, **k: WORDS)
    at = ok(open_app(monkeypatch, tmp_path / "hp-home", long_app, PAGE))
    assert "Score" in _sidebar(at) and [s for s in at.selectbox if s.label == "Importance score"]
    at = ok(at.radio(key=MODE).set_value("kv").run())
    assert "Score" not in _sidebar(at) and not [s for s in at.selectbox if s.label == "Importance score"]
    at = ok(at.switch_page("app_pages/model_data.py").run())
    assert "Score" in _sidebar(at)                                   # other pages still name it


def _curves_file(path, model: str) -> None:
    rows = {}
    for policy, fraction, seed, correct in (("full", 0, "", 9), ("retrieval", 0.5, "", 8), ("random", 0.5, 0, 3),
                                            ("random", 0.5, 1, 5), ("streaming", 1, "", 1)):
        rows[f"{model}|niah-single|1024|{policy}|{fraction:g}|{seed}"] = {
            "accuracy": correct / 10, "wilson_95": [max(0.0, correct / 10 - 0.2), min(1.0, correct / 10 + 0.2)],
            "examples": 10}
    path.write_text(json.dumps({"format": "headprune.long_context_curves/1", "rows": rows}))


def test_the_panel_says_how_to_measure_the_curve_until_it_is_measured_then_draws_it(kv_page, monkeypatch, tmp_path,
                                                                                   long_app):
    from app.headmap import kv_curve
    monkeypatch.setattr(kv_curve, "CURVES_FILE", tmp_path / "absent.json")
    at = ok(kv_page.run())
    note = next(c.value for c in at.caption if c.value.startswith("No measured curve"))
    assert f"--models {long_app.model} --tasks niah-single --lengths 1024 --limit 100" in note
    assert not [c for c in at.get("plotly_chart") if c.key == "hp_w_headmap_kv_curve"]
    _curves_file(tmp_path / "curves.json", long_app.model.name)
    monkeypatch.setattr(kv_curve, "CURVES_FILE", tmp_path / "curves.json")
    at = click_kv_head(ok(at.run()), 0, 1)
    chart = next(c for c in at.get("plotly_chart") if c.key == "hp_w_headmap_kv_curve")
    spec = json.loads(chart.proto.spec)
    lines = {t["name"]: (t["x"], t["y"]) for t in spec["data"]}
    assert lines["random heads stream"] == ([0.5], [pytest.approx(0.4)])        # the mean of the two seeds
    assert lines["full cache"] == ([0.0], [0.9]) and lines["every head streams"] == ([1.0], [0.1])
    assert [s["x0"] for s in spec["layout"]["shapes"]] == [0.25]                  # the map's policy: 1 of 4 heads
    assert not [c for c in at.caption if c.value.startswith("No measured curve")]
    assert "evaluate to place it" in " ".join(c.value for c in at.caption)


def test_curve_points_read_only_the_chosen_model_task_and_length():
    from app.headmap.kv_curve import curve_points
    doc = {"rows": {"smollm2|niah-single|2048|full|0|": {"accuracy": 1.0, "wilson_95": [0.9, 1.0], "examples": 100},
                    "smollm2|niah-single|4096|full|0|": {"accuracy": 0.5, "wilson_95": [0.4, 0.6], "examples": 100},
                    "qwen2.5-0.5b|niah-single|2048|full|0|": {"accuracy": 0.2, "wilson_95": [0.1, 0.3], "examples": 100}}}
    points = curve_points(doc, "smollm2", "niah-single", 2048)
    assert list(points) == ["full"] and points["full"][0].accuracy == 1.0 and points["full"][0].low == 0.9
    assert curve_points(doc, "smollm2", "niah-multikey", 2048) == {} and curve_points(None, "x", "y", 1) == {}
