"""Sharing and the attention views: bundle and link round trips, a self-contained report, escaping of
hostile tokens, bertviz offline, and a pruned-model zip that loads back with the same logits."""
from __future__ import annotations

import io
import json
import zipfile
from html.parser import HTMLParser

import numpy as np
import pytest
import torch

from app.attention import figures as attention
from app.share import report, links as share
from app.core import webassets
from app.share.analysis import ANALYSIS_FORMAT, Analysis, analysis_provenance, read_shared_file
from pruning_core.core.io.share_link import encode_mask as mask_to_param
from fake_task import FakeTask
from pruning_core.analysis import attention_maps
from pruning_core import bench
from pruning_core.evaluation import experiments
from pruning_core.modeling import masking
from pruning_core.core.errors import FormatError, HeadpruneError
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from pruning_core.modeling.sources.loading import load_model
from pruning_core.scoring import ScoreConfig, get_scorer
from tiny import ARCHS, logits_of, make_bert_tokenizer, tiny_inputs, tiny_loaded, tiny_model

HOSTILE = ["<script>alert(1)</script>", "</script><img src=x onerror=alert(1)>", "a&b", "\u2028", "\"'`${x}"]


# -- helpers -----------------------------------------------------------------------------------------

class _Tags(HTMLParser):
    """Collects every start tag with its attributes, as a browser's tokenizer would see them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags_of(document: str) -> list[tuple[str, dict]]:
    parser = _Tags()
    parser.feed(document)
    return parser.tags


def assert_self_contained(document: str, scripts: int | None = None) -> None:
    tags = tags_of(document)
    names = [t for t, _ in tags]
    assert "img" not in names and "iframe" not in names and "object" not in names
    for tag, attrs in tags:
        for attr in ("src", "href"):
            value = attrs.get(attr) or ""
            assert not value.startswith(("http:", "https:", "//")), (tag, attrs)
        assert not any(a.startswith("on") for a in attrs), (tag, attrs)   # no inline event handlers
    assert not any(tag == "script" and "src" in attrs for tag, attrs in tags)
    if scripts is not None:
        assert names.count("script") == scripts
    assert "cdnjs.cloudflare.com" not in document and "cdn.plot.ly/plotly" not in document


def mask_of(layout: HeadLayout, removed: list) -> HeadMask:
    return HeadMask.from_removed(layout, removed)


@pytest.fixture
def stand_in_globals(monkeypatch):
    """d3/jQuery stand-ins, so the HTML tests need no fetched files (a real-file test is separate)."""
    monkeypatch.setattr(webassets, "script", lambda name: f"/* {name} stand-in */ window.{name} = window.{name} || {{}};")


@pytest.fixture(scope="module")
def tiny_analysis(tmp_path_factory):
    """A complete analysis of a tiny BERT on the fake task: scores, curves, tables, evals, bench."""
    torch.manual_seed(0)
    loaded = tiny_loaded("bert", tmp_path_factory.mktemp("tok"))
    task = FakeTask()
    data = task.encode(loaded, "validation")
    cfg = ScoreConfig(limit=12, batch_size=4)
    scores = {n: get_scorer(n).score(loaded, task, cfg) for n in ("gradient", "random")}
    curves = {n: experiments.pruning_curve(loaded, task, data, get_scorer(n), cfg, step=0.25, initial_scores=scores[n])
              for n in scores}
    mask = mask_of(loaded.layout, [("encoder_self", 0, 1), ("encoder_self", 1, 3)])
    result = Analysis(
        model_id=loaded.model_id, layout=loaded.layout, mask=mask, task="fake", scorer="gradient",
        weights_sha256=loaded.weights_sha256, eval_size=12, scores=scores, curves=curves,
        evaluation=task.evaluate(loaded, data, mask), dense_evaluation=task.evaluate(loaded, data, None),
        ablation=experiments.ablation_table(loaded, task, data),
        one_per_layer=experiments.one_head_per_layer(loaded, task, data, scores=scores["gradient"]),
        bench=bench.benchmark(loaded, mask, batch_sizes=(1, 2), seq_len=8, warmup=0, repeats=1, min_seconds=0.0,
                              measure_memory=False),
        provenance=analysis_provenance(loaded, "fake", {"eval_limit": 12}))
    return loaded, result


# -- the analysis bundle -------------------------------------------------------------------------------

def test_bundle_round_trip_keeps_every_result(tiny_analysis):
    _, analysis = tiny_analysis
    raw = analysis.to_bytes()
    data = json.loads(raw)
    assert data["format"] == ANALYSIS_FORMAT
    assert data["mask"]["format"] == "headprune.mask/1"                 # embedded formats, unchanged
    assert data["scores"]["gradient"]["format"] == "headprune.scores/1"
    assert data["curves"]["random"]["format"] == "headprune.curve/1"
    assert data["bench"]["format"] == "headprune.bench/1"
    assert data["eval"]["masked"]["heads_kept"] == analysis.mask.n_kept
    back = read_shared_file(raw)
    assert back.to_json() == analysis.to_json()
    assert back.mask == analysis.mask and back.layout == analysis.layout
    assert back.scores["gradient"].scores == analysis.scores["gradient"].scores
    assert back.curves["gradient"].points == analysis.curves["gradient"].points
    assert back.bench.comparisons == analysis.bench.comparisons
    assert back.ablation.rows == analysis.ablation.rows


def test_report_carries_the_bundle_back(tiny_analysis):
    _, analysis = tiny_analysis
    back = read_shared_file(report.build_report(analysis).encode())
    assert back.to_json() == analysis.to_json()


def test_report_bundle_and_link_agree_with_the_page(tiny_analysis):
    """The report shows the figure as the Head map does (value and interval at the page's precision, the loss to
    four decimals) and the command of the Share page's link; the bundle's link carries the same model, task,
    evaluation size and mask."""
    from app.core import uncertainty
    from pruning_core.core.io.share_link import parse_link

    _, analysis = tiny_analysis
    link = share.share_link("http://localhost:8501/head_map", analysis.link_params())
    document = report.build_report(analysis, link=link)
    seen = uncertainty.shown(analysis.evaluation)
    assert html_text(uncertainty.unitless(analysis.evaluation.metric_name, f"{seen.value} ({seen.interval})")) in document
    assert f"{analysis.evaluation.loss:.4f}" in document
    assert html_text(share.link_command(link)) in document
    shared = parse_link(link)
    assert shared.params() == json.loads(analysis.to_bytes())["link"]          # the bundle's link is the page's
    assert (shared.model, shared.task, shared.eval_limit, shared.scorer) == (analysis.model_id, "fake", 12, "gradient")
    assert shared.head_mask(analysis.layout) == analysis.mask
    assert read_shared_file(document.encode()).eval_size == 12


def test_the_suggested_command_survives_a_shell(tmp_path):
    """The command quotes the link for a POSIX shell: bash hands the evaluate command the link unchanged, even a
    model path with spaces, quotes and dollars."""
    import shlex
    import subprocess

    link = share.share_link("http://localhost:8501/head_map", {"model": "/m y/it's $HOME", "task": "file:/d/a&b.csv",
                                                                "n": "16", "mask": "e:7.f"})
    command = share.link_command(link)
    assert command.startswith("headprune evaluate --mask-link '")
    args = subprocess.run(["bash", "-c", f"printf '%s\\n' {command.removeprefix('headprune ')}"], capture_output=True,
                          text=True, check=True).stdout.splitlines()
    assert args == ["evaluate", "--mask-link", link] and shlex.split(command)[-1] == link


def html_text(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def test_a_bare_mask_file_loads_as_an_analysis(tiny_analysis):
    _, analysis = tiny_analysis
    raw = json.dumps(analysis.to_json()["mask"]).encode()
    back = read_shared_file(raw, "mask.json")
    assert back.mask == analysis.mask and back.task is None and back.model_id == analysis.model_id


@pytest.mark.parametrize("raw, message", [
    (b"{not json", "not valid JSON"),
    (b'{"hello": 1}', "not a headprune file"),
    (b'{"format": "headprune.curve/1"}', "load a"),
    (b'{"format": "headprune.analysis/2"}', "version"),
    (b'{"format": "headprune.analysis/1", "model": {"id": "x"}}', "damaged"),
    (b"<html><body>hello</body></html>", "not a headprune report"),
])
def test_bad_files_give_clear_errors(raw, message):
    with pytest.raises(FormatError, match=message):
        read_shared_file(raw, "upload.json")


def test_bundle_with_a_mask_of_the_wrong_shape_is_refused(tiny_analysis):
    _, analysis = tiny_analysis
    data = analysis.to_json()
    data["mask"]["kinds"]["encoder_self"][0] = [1, 1]          # 2 heads where the layout has 4
    with pytest.raises(FormatError, match="heads per layer"):
        read_shared_file(json.dumps(data))


def test_analysis_for_another_model_is_a_clear_error(tiny_analysis, tmp_path):
    loaded, analysis = tiny_analysis
    assert analysis.check_model(loaded) == []
    other = tiny_loaded("bart", tmp_path)
    with pytest.raises(FormatError, match="made for model 'tiny-bert'.*Choose model"):
        analysis.check_model(other)
    same_shape = tiny_loaded("electra", tmp_path)                # same layout, other weights and id
    with pytest.raises(FormatError, match="other weights"):
        analysis.check_model(same_shape)
    renamed = Analysis(model_id=same_shape.model_id, layout=analysis.layout, mask=analysis.mask,
                             weights_sha256="0" * 64)
    assert "differ" in renamed.check_model(same_shape)[0]     # same id, new weights: a warning only


# -- links ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ARCHS)
def test_link_round_trip(arch, tmp_path):
    loaded = tiny_loaded(arch, tmp_path)
    rng = np.random.default_rng(0)
    for _ in range(20):
        removed = [h for h in loaded.layout.heads() if rng.random() < 0.4]
        mask = mask_of(loaded.layout, removed)
        a = Analysis(model_id="org/some model", layout=loaded.layout, mask=mask, task="file:/data/x y&z.csv",
                           scorer="gradient", eval_size=64)
        link = share.share_link("http://localhost:8501/share", a.link_params())
        got = share.decode_link(link, loaded.layout)
        assert got["mask"] == (None if mask.is_full() else mask)
        assert (got["model"], got["task"], got["scorer"], got["eval_size"]) == \
            ("org/some model", "file:/data/x y&z.csv", "gradient", 64)


def test_link_with_a_mask_for_another_shape_is_refused(tmp_path):
    bert, bart = tiny_loaded("bert", tmp_path), tiny_loaded("bart", tmp_path)
    text = mask_to_param(mask_of(bert.layout, [("encoder_self", 0, 0)]))
    with pytest.raises(FormatError):
        share.decode_link(f"?mask={text}", bart.layout)            # kinds differ
    wide = HeadLayout({"encoder_self": (4, 2)})
    with pytest.raises(FormatError):
        share.decode_link(f"?mask={text}", wide)                   # heads per layer differ
    with pytest.raises(FormatError):
        share.decode_link("?mask=e:zz.ff", bert.layout)            # not hex
    with pytest.raises(FormatError):
        share.decode_link("?mask=q:f.f", bert.layout)              # unknown kind code
    with pytest.raises(FormatError):
        share.decode_link("?mask=e:1f.f", bert.layout)             # more than 4 heads in a layer


def test_link_base_points_at_the_head_map():
    assert share.link_base("http://h:8501/share") == "http://h:8501/head_map"
    assert share.link_base("https://x.org/app/share?mask=1") == "https://x.org/app/head_map"
    assert share.link_base("http://h:8501") == "http://h:8501/head_map"
    assert share.link_base(None).startswith("http://localhost")


# -- the HTML report --------------------------------------------------------------------------------

def test_report_is_self_contained_and_escapes_user_strings(tiny_analysis):
    _, analysis = tiny_analysis
    hostile = Analysis(**{**analysis.__dict__, "model_id": HOSTILE[1], "task": HOSTILE[0], "scorer": "gradient"})
    document = report.build_report(hostile)
    assert_self_contained(document)
    assert "plotly.js v" in document                               # plotly.js inlined, not fetched
    assert document.count("Plotly.newPlot") >= 3                   # head map, curves, speed
    assert HOSTILE[0] not in document and HOSTILE[1] not in document
    # the only scripts: plotly.js, one per figure, and the JSON bundle
    scripts = [a for t, a in tags_of(document) if t == "script"]
    assert sum(1 for a in scripts if a.get("type") == "application/json") == 1
    assert read_shared_file(document).model_id == HOSTILE[1]


def test_report_of_a_bare_mask(tmp_path):
    loaded = tiny_loaded("bart", tmp_path)
    mask = mask_of(loaded.layout, [("cross", 1, 2)])
    document = report.build_report(Analysis(model_id="m", layout=loaded.layout, mask=mask))
    assert_self_contained(document)
    assert "decoder self-attention" in document and "cross" in document


# -- attention views --------------------------------------------------------------------------------

def _hostile_run(layout: HeadLayout) -> attention_maps.AttentionRun:
    tokens = ("[CLS]", *HOSTILE, "[SEP]")
    t = len(tokens)
    rng = np.random.default_rng(0)
    maps = {"encoder_self": tuple(rng.dirichlet(np.ones(t), size=(n, t)).astype(np.float32)
                                  for n in layout.kinds["encoder_self"])}
    mask = mask_of(layout, [("encoder_self", 0, 1)])
    pred = attention_maps.Prediction(HOSTILE[1], ((HOSTILE[1], 0.6), ("b", 0.4)))
    return attention_maps.AttentionRun(text=" ".join(HOSTILE), encoder_tokens=tokens, decoder_tokens=None,
                                  sentence_b_start=None, dense=maps, pruned=attention_maps.zero_removed(maps, mask),
                                  mask=mask, dense_prediction=pred, pruned_prediction=pred, truncated=False)


@pytest.mark.parametrize("view", ["head", "model"])
def test_bertviz_views_escape_hostile_tokens(view, stand_in_globals):
    run = _hostile_run(HeadLayout({"encoder_self": (4, 4)}))
    document = (attention.head_view_html if view == "head" else attention.model_view_html)(run, "pruned")
    # d3, jQuery, the require shim, bertviz (+ the fit-to-width script of the model view)
    assert_self_contained(document, scripts=4 if view == "head" else 5)
    for token in HOSTILE[:2]:
        assert token not in document
    assert "require.config({" not in document and "PYTHON_PARAMS" not in document
    # the tokens reach JavaScript unchanged
    start = document.index("const params = ") + len("const params = ")
    params, _ = json.JSONDecoder().raw_decode(document, start)
    assert params["attention"][0]["left_text"][1:1 + len(HOSTILE)] == HOSTILE
    assert params["root_div_id"] in document


def test_bertviz_html_is_deterministic(stand_in_globals):
    run = _hostile_run(HeadLayout({"encoder_self": (4, 4)}))
    assert attention.head_view_html(run, "dense") == attention.head_view_html(run, "dense")


def test_thumbnail_hover_text_is_escaped():
    run = _hostile_run(HeadLayout({"encoder_self": (4, 4)}))
    for arrange in ("grid", "grouped"):
        fig = attention.thumbnails_figure(run, "encoder_self", arrange=arrange)
        texts = [t for trace in fig.data for row in (trace.text or ()) for t in row if t]
        assert texts and not any("<script" in t or "<img" in t for t in texts)


def test_thumbnails_of_a_deep_model_can_show_only_the_layers_with_removed_heads():
    """Issue 30 item 14: on SmolLM2 (30 layers of 9 heads) the Tour's 8 induction heads, in layers 17-23,
    sat about 2,000 px down a 2,400 px figure; drawn alone, their layers fit one screen."""
    layout = HeadLayout({"decoder_self": (9,) * 30})
    tokens = tuple(f"t{i}" for i in range(12))
    rng = np.random.default_rng(0)
    maps = {"decoder_self": tuple(rng.dirichlet(np.ones(12), size=(9, 12)).astype(np.float32) for _ in range(30))}
    removed = [("decoder_self", 17, 3), ("decoder_self", 17, 4), ("decoder_self", 18, 7), ("decoder_self", 23, 2)]
    mask = mask_of(layout, removed)
    pred = attention_maps.Prediction("x", (("x", 1.0),))
    run = attention_maps.AttentionRun(text="", encoder_tokens=(), decoder_tokens=tokens, sentence_b_start=None,
                                      dense=maps, pruned=attention_maps.zero_removed(maps, mask), mask=mask,
                                      dense_prediction=pred, pruned_prediction=pred, truncated=False)
    whole = attention.thumbnails_figure(run, "decoder_self", kept_from="dense", arrange="grouped")
    fig = attention.thumbnails_figure(run, "decoder_self", kept_from="dense", arrange="grouped", layers=[23, 17, 18])
    assert list(fig.layout.yaxis.ticktext) == ["layer 17", "layer 18", "layer 23"]
    assert len(fig.layout.shapes) == len(removed)                       # every removed head, dotted
    assert fig.layout.height <= 600 < whole.layout.height
    hover = {t.split("  ")[0] for trace in fig.data for row in (trace.text or ()) for t in row if t}
    assert {"L17 H3", "L23 H2", "L18 H0"} <= hover and not any(h.startswith("L0 ") for h in hover)
    with pytest.raises(HeadpruneError, match="not all layers"):
        attention.thumbnails_figure(run, "decoder_self", arrange="grouped", layers=[30])


def test_real_scripts_are_pinned_and_inline_safely():
    if webassets.missing():
        pytest.skip(f"run `{webassets.FETCH_COMMAND}` to fetch d3/jQuery (make install does)")
    for name in webassets.lock():
        code = webassets.script(name)
        assert "</script" not in code.lower()


def test_missing_or_altered_scripts_say_how_to_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(webassets, "VENDOR", tmp_path)
    webassets.script.cache_clear()
    try:
        with pytest.raises(webassets.ScriptsMissing, match="app.core.webassets"):
            webassets.script("d3")
        (tmp_path / "d3.min.js").write_text("tampered")
        with pytest.raises(webassets.ScriptsMissing, match="--force"):
            webassets.script("d3")
        assert set(webassets.missing()) == {"d3", "jquery"}
    finally:
        webassets.script.cache_clear()


def test_script_json_round_trips_and_is_inert():
    text = webassets.script_json({"t": HOSTILE})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"t": HOSTILE}


@pytest.mark.parametrize("arch", ["bert", "distilbert", "bart"])
def test_run_attention_dense_and_pruned(arch, tmp_path, stand_in_globals):
    loaded = tiny_loaded(arch, tmp_path)
    removed = [(k, 0, 1) for k in loaded.layout.kinds] + [("encoder_self", 1, 0)]
    mask = mask_of(loaded.layout, removed)
    run = attention_maps.run_attention(loaded, "the movie was </script> good", mask, max_new_tokens=5)
    # transformers keeps its own attention-capturing hooks once output_attentions was used; the gate
    # hooks of apply_mask must be gone and nothing may accumulate between runs
    hooks = installed_hook_count(loaded.model)
    assert loaded.model not in masking._INSTALLED
    attention_maps.run_attention(loaded, "the plot", mask, max_new_tokens=5)
    assert installed_hook_count(loaded.model) == hooks
    assert set(run.kinds) == set(loaded.layout.kinds)
    for kind in run.kinds:
        q, k = run.tokens_for(kind)
        for layer, arr in enumerate(run.dense[kind]):
            assert arr.shape == (loaded.layout.kinds[kind][layer], len(q), len(k))
            np.testing.assert_allclose(arr.sum(-1), 1.0, atol=1e-4)        # each row is a distribution
        for kind_, layer, head in removed:
            if kind_ == kind:
                assert not run.pruned[kind][layer][head].any()               # removed heads: empty
    # the first encoder layer sees the same input in both models: its kept heads attend identically
    np.testing.assert_allclose(run.pruned["encoder_self"][0][0], run.dense["encoder_self"][0][0], atol=1e-6)
    for kind in run.kinds:
        for arrange in ("grid", "grouped"):
            attention.thumbnails_figure(run, kind, arrange=arrange)
    if loaded.task_type == "classification":
        assert abs(sum(p for _, p in run.dense_prediction.probabilities) - 1) < 1e-5
    else:
        assert run.decoder_tokens and run.notes
    assert_self_contained(attention.head_view_html(run, "pruned"), scripts=4)
    full = attention_maps.run_attention(loaded, "the movie", None, max_new_tokens=5)
    for kind in full.kinds:
        for a, b in zip(full.dense[kind], full.pruned[kind]):
            np.testing.assert_allclose(a, b, atol=1e-6)                     # no mask: identical


def test_run_attention_input_checks(tmp_path):
    loaded = tiny_loaded("bert", tmp_path)
    for empty in ("", "   ", "\n"):
        with pytest.raises(HeadpruneError, match="Type a sentence"):
            attention_maps.run_attention(loaded, empty)
    other = tiny_loaded("bart", tmp_path)
    with pytest.raises(FormatError):
        attention_maps.run_attention(loaded, "the movie", HeadMask.full(other.layout))
    long = attention_maps.run_attention(loaded, " ".join(["good"] * 200), max_tokens=16)
    assert long.truncated and len(long.encoder_tokens) == 16
    sdpa = tiny_loaded("bert", tmp_path)
    sdpa.model.config._attn_implementation = "sdpa"
    with pytest.raises(HeadpruneError, match="eager"):
        attention_maps.run_attention(sdpa, "the movie")


def test_example_text_shapes():
    assert attention_maps.example_text({"text": "a", "label": 1}) == ("a", None)
    assert attention_maps.example_text({"text_a": "a", "text_b": "b", "label": 0}) == ("a", "b")
    assert attention_maps.example_text({"source": "s", "target": "t"}) == ("s", None)
    with pytest.raises(HeadpruneError):
        attention_maps.example_text({"label": 1})


def test_sentence_pairs_mark_the_second_sentence(tmp_path):
    loaded = tiny_loaded("bert", tmp_path)
    run = attention_maps.run_attention(loaded, "the movie", text_b="was good")
    assert run.sentence_b_start == run.encoder_tokens.index("[SEP]") + 1


# -- the pruned model as a zip ----------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["bert", "distilbert", "bart"])
def test_pruned_zip_loads_back_with_the_masked_logits(arch, tmp_path):
    model = tiny_model(arch)
    tok = make_bert_tokenizer(tmp_path / "tok")
    model.save_pretrained(tmp_path / "dense")
    tok.save_pretrained(tmp_path / "dense")
    loaded = load_model(str(tmp_path / "dense"))
    removed = [(k, 0, 1) for k in loaded.layout.kinds] + [("encoder_self", 1, h) for h in range(4)]  # a whole layer
    mask = mask_of(loaded.layout, removed)
    before = {k: v.clone() for k, v in loaded.model.state_dict().items()}
    data = share.pruned_model_zip(loaded, mask, "movie-sentiment")
    assert all(torch.equal(before[k], v) for k, v in loaded.model.state_dict().items())   # shared model untouched
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = zf.namelist()
    folder_name = share.pruned_folder_name(loaded.model_id, mask)
    assert f"{folder_name}/config.json" in names and f"{folder_name}/headprune_mask.json" in names
    folder = share.unzip_model(data, tmp_path / "unzipped")
    pruned = load_model(str(folder))
    assert pruned.pruned_heads and pruned.layout.total_heads == mask.n_kept
    inputs = tiny_inputs(arch)
    with apply_mask(loaded, mask):
        expected = logits_of(loaded.model, inputs)
    torch.testing.assert_close(logits_of(pruned.model, inputs), expected, atol=1e-5, rtol=1e-4)


def test_unzip_refuses_paths_outside_its_folder(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("../evil.txt", "x")
    with pytest.raises(FormatError, match="outside"):
        share.unzip_model(buffer.getvalue(), tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists()
