"""Work the dashboard asks of a model: every page opened on a tiny
model of each family in bounded memory; speech and language models never start gradient scoring by
themselves; evaluation sizes, scoring batches and the memory budget follow the model's cost."""
from __future__ import annotations

import math
import resource
import statistics

import pytest

from app.core.pages import URL_PATHS
from app.core.session.selection import Selection
from app.model import cache, workload
import transformers as tf
from streamlit.testing.v1 import AppTest

from browser_helpers import ROOT, app_env, build_tiny_app, build_tiny_llama, build_tiny_whisper, ok
from pruning_core.bench import budget
from pruning_core.core.errors import BudgetError, HeadpruneError

TIMEOUT = 420        # one page run: the Tour's first step on tiny BART (a 24-head ablation, each row decoding 48
#                      sentences and bootstrapping corpus BLEU) took 195 s on 2 cores at load 5
PAGES = list(URL_PATHS)        # app.core.pages: the one page list
# every page of a tiny model adds little: the bound is what the test process may grow by (the
# first page run imports Streamlit, plotly, bertviz assets: a few hundred MiB)
RSS_GROWTH_BOUND = 1.5 * 2**30


FAMILIES = {"bert": lambda f: build_tiny_app(f, "bert"), "bart": lambda f: build_tiny_app(f, "bart"),
            "whisper": build_tiny_whisper, "llama": build_tiny_llama}


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024        # Linux: KiB


@pytest.mark.heavy
@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_page_opens_in_bounded_memory_and_slow_families_wait_for_a_click(family, tmp_path, monkeypatch):
    tiny = FAMILIES[family](tmp_path)
    for key, value in app_env(tiny, tmp_path / "hp-home").items():     # no eval limit: each model's own size
        monkeypatch.setenv(key, value)
    before = _peak_rss()
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
    at.run()
    for page in PAGES:
        at = ok(at.switch_page(f"app_pages/{page}.py").run())
        board = at.session_state["hp_jobs"] if "hp_jobs" in at.session_state else None
        started = board is not None and board.get("score_gradient") is not None
        if family in ("whisper", "llama"):
            assert not started, f"opening {page} on {family} started gradient scoring by itself"
            if page in ("head_map", "share"):
                labels = [b.label for b in at.button]
                assert any(lb.startswith("Run: Scoring heads (gradient), about") for lb in labels), labels
        elif page == "head_map":
            assert started, "a cheap model scores as soon as the Head map opens"
    assert _peak_rss() - before < RSS_GROWTH_BOUND


# -- the cost model, on real-size configs (no weights) -----------------------------------------------
WHISPER_BASE = dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                    decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, vocab_size=51865)
SMOLLM2 = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
               num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True)
MINILM = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536, num_labels=2)


def test_evaluation_sizes_per_family():
    minilm = budget.example_cost(tf.BertConfig(**MINILM), "classification", 27)   # movie-sentiment: 27 tokens
    smol = budget.example_cost(tf.LlamaConfig(**SMOLLM2), "language_model", 128)
    whisper = budget.example_cost(tf.WhisperConfig(**WHISPER_BASE), "asr")
    # one pass per click, half of the click's 5 s for it (the rest: rerun and drawing)
    # ... but never fewer than a paired test needs to tell a change from noise
    assert (workload.click_eval_size(minilm), workload.click_eval_size(smol), workload.click_eval_size(whisper)) == (128, 8, 8)
    assert (minilm.unit, smol.unit, whisper.unit) == ("example", "window", "utterance")
    assert whisper.tokens == 1500 and whisper.decoder_tokens == budget.SPEECH_TEXT_TOKENS
    forward = workload.CLICK_SECONDS * workload.FORWARD_SHARE
    for cost in (minilm, smol, whisper):   # the chosen size's forward pass fits its share, unless at the floor
        n = workload.click_eval_size(cost)
        assert cost.seconds(n, workload.CLICK_PASSES) <= forward or n == workload.SMALLEST_DEFAULT_EVAL_SIZE
        assert cost.seconds(2 * n, workload.CLICK_PASSES) > forward or n == workload.LARGEST_DEFAULT_EVAL_SIZE


def test_whisper_base_scoring_batch_fits_the_budget():
    whisper = budget.example_cost(tf.WhisperConfig(**WHISPER_BASE), "asr")
    assert whisper.activation_bytes > 2**30       # its attention over 1,500 frames: over 1 GiB per utterance
    budget_bytes, in_use = 12 * 2**30, 2 * 2**30
    batch = budget.gradient_batch_size(whisper, 32, budget_bytes, in_use)
    assert 1 <= batch < 32 and in_use + batch * whisper.activation_bytes <= budget_bytes
    with pytest.raises(BudgetError, match="HEADPRUNE_MEMORY_BUDGET"):
        budget.gradient_batch_size(whisper, 32, 3 * 2**30, in_use)


def test_memory_budget_reads_the_environment():
    assert budget.memory_budget({"HEADPRUNE_MEMORY_BUDGET": "8GiB"}) == 8 * 2**30
    assert budget.memory_budget({"HEADPRUNE_MEMORY_BUDGET": "1.5 GB"}) == 1_500_000_000
    total = budget.machine_memory()
    assert budget.memory_budget({}) == (None if total is None else total // 2)
    with pytest.raises(HeadpruneError, match="8GiB"):
        budget.memory_budget({"HEADPRUNE_MEMORY_BUDGET": "lots"})


def test_a_costly_model_scores_on_fewer_examples(monkeypatch):
    """Gradient scoring reads 512 examples of a cheap model but only what fits in about a minute of a
    costly one (Whisper-base's utterances), never fewer than it evaluates; random and per-head
    scorers keep theirs."""
    from app.core.session.selection import Selection
    from app.model import cache, workload

    costs = {"cheap": budget.example_cost(tf.BertConfig(**MINILM), "classification", 27),
             "whisper": budget.example_cost(tf.WhisperConfig(**WHISPER_BASE), "asr")}
    monkeypatch.setattr(cache, "example_cost", lambda spec, task_name: costs[spec])
    def size(sel: Selection, scorer: str) -> int | None:
        req = workload.score_request(sel, scorer)
        assert req.sel == Selection(sel.model, sel.task) and req.scorer == scorer    # the size is not its key
        return req.score_size

    assert size(Selection("cheap", "t", 128), "gradient") == workload.SCORE_SIZE == 512
    n = size(Selection("whisper", "t", 2), "gradient")
    assert 2 <= n < 100 and costs["whisper"].seconds(n, workload.GRADIENT_PASS) <= workload.SCORE_SECONDS
    assert size(Selection("whisper", "t", 150), "gradient") == 150    # never below the evaluation size
    assert size(Selection("whisper", "t", 2), "random") == workload.SCORE_SIZE   # seeded: not cut
    assert size(Selection("whisper", "t", 2), "ablation") == 2


# Bergamot's student as a stock Marian config (it counts a decoder self-attention the SSRU student lacks)
BERGAMOT = dict(d_model=256, encoder_layers=6, decoder_layers=2, encoder_attention_heads=8, decoder_attention_heads=8,
                encoder_ffn_dim=1536, decoder_ffn_dim=1536, vocab_size=32001)


def test_a_translation_costs_its_source_in_the_encoder_and_its_target_in_the_decoder(tmp_path):
    """28 source and 28 target tokens a verse: 128 verses a click; counting their sum (56) in both stacks, as the
    length buckets' sort key would, halves that."""
    split = budget.example_cost(tf.MarianConfig(**BERGAMOT), "translation", 28, decoder_tokens=28)
    summed = budget.example_cost(tf.MarianConfig(**BERGAMOT), "translation", 56)
    assert (split.tokens, split.decoder_tokens) == (28, 28)
    assert (workload.click_eval_size(split), workload.click_eval_size(summed)) == (128, 64)

    tiny = build_tiny_app(tmp_path, "marian-ssru", n_examples=8)
    cost = cache.example_cost(str(tiny.model), tiny.task)
    feats = cache.data(Selection(str(tiny.model), tiny.task, cache.LENGTH_SAMPLE)).features
    source = math.ceil(statistics.mean(len(f["input_ids"]) for f in feats))
    target = math.ceil(statistics.mean(len(f["labels"]) for f in feats))
    assert (cost.tokens, cost.decoder_tokens) == (source, target)


def test_a_long_evaluation_says_its_count_and_estimate(monkeypatch):
    """A Whisper click (about 23 s) names its utterances and the time; a quick click on the default stays short."""
    from app.core.session.selection import Selection
    from app.model import jobs as wl

    sel = Selection("whisper-base", "movie-speech", 8)
    monkeypatch.setattr(wl.cache, "example_unit", lambda spec, task: "utterance")
    monkeypatch.setattr(wl, "eval_seconds", lambda s: 23.0)
    assert wl.evaluation_label(sel, "this mask") == "Evaluating this mask on 8 utterances (about 23 s on 2 CPU cores)"
    monkeypatch.setattr(wl, "eval_seconds", lambda s: 1.2)
    assert wl.evaluation_label(sel, "this mask") == "Evaluating this mask"
