"""The FLOP ceiling and the dense / masked / pruned benchmark, on tiny random models (no timing asserts)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers as tf

from pruning_core.bench import (BENCH_FORMAT, MASKING_NOTE, VARIANTS, BenchResult, benchmark, flop_ceiling,
                                format_bench, half_mask)
from pruning_core.core.errors import Cancelled, FormatError
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.modeling.masking import installed_hook_count
from pruning_core.modeling.sources.loading import weights_hash_of_module
from pruning_core.evaluation.results import read_json, write_json
from tiers import heavy_beyond
from tiny import ALL_ARCHS, tiny_config, tiny_loaded

FAST = dict(warmup=0, repeats=2, min_seconds=0.0, seq_len=8)


def _layout(layers: int, heads: int, enc_dec: bool = False) -> HeadLayout:
    kinds = {"encoder_self": (heads,) * layers}
    if enc_dec:
        kinds.update({"decoder_self": (heads,) * layers, "cross": (heads,) * layers})
    return HeadLayout(kinds)


# -- the ceiling -------------------------------------------------------------------------------------

def test_ceiling_is_one_when_no_head_is_removed():
    config = tiny_config("bert")
    for mask in (None, HeadMask.full(_layout(2, 4))):
        c = flop_ceiling(config, mask, 16)
        assert c.removed_macs == 0 and c.removed_fraction == 0.0 and c.speedup == 1.0


def test_ceiling_with_every_head_removed_matches_hand_count():
    # tiny BERT: d=32, d_ff=64, 2 layers, 2 labels, T=16
    d, ff, layers, t = 32, 64, 2, 16
    attention = t * 4 * d * d + 2 * t * t * d           # projections + QK^T and AV, per layer
    ffn = t * 2 * d * ff
    head = d * d + d * 2                                 # pooler + classifier, once per sequence
    total = layers * (attention + ffn) + head
    c = flop_ceiling(tiny_config("bert"), HeadMask.full(_layout(2, 4)).inverted(), t)
    assert c.total_macs == total and c.removed_macs == layers * attention
    assert c.speedup == pytest.approx(total / (total - layers * attention))


def test_ceiling_minilm_half_heads_is_about_1_2():
    config = tf.BertConfig(hidden_size=384, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=12)
    c = flop_ceiling(config, half_mask(_layout(6, 12)), 128)
    assert c.removed_fraction == pytest.approx(0.18, abs=0.01)      # "about 18 % of compute removed"
    assert c.speedup == pytest.approx(1.2, abs=0.03)
    d, ff, t, p = 384, 1536, 128, 0.5                                 # REFERENCE.md's closed form
    reference = 1 / (1 - p * (4 * d * d + 2 * t * d) / (4 * d * d + 2 * d * ff + 2 * t * d))
    assert c.speedup == pytest.approx(reference, rel=1e-3)          # differs only by the classifier


def test_ceiling_bert_base_matches_reference():
    c = flop_ceiling(tf.BertConfig(), half_mask(_layout(12, 12)), 128)
    assert c.speedup == pytest.approx(1.21, abs=0.01)


def test_ceiling_is_exact_per_layer_and_kind():
    config = tiny_config("bart")                         # d=32, 4 heads of 8, 2+2 layers
    full = HeadMask.full(_layout(2, 4, enc_dec=True))
    one = full.toggled("encoder_self", 1, 2)
    c = flop_ceiling(config, one, 10)
    assert c.removed_macs == 10 * 4 * 32 * 8 + 2 * 10 * 10 * 8
    assert [l.heads_kept for l in c.layers if l.kind == "encoder_self"] == [4, 3]
    # removing every cross-attention head removes exactly the cross layers' compute
    no_cross = HeadMask({**full.kinds, "cross": tuple((0,) * 4 for _ in range(2))})
    c = flop_ceiling(config, no_cross, 10, decoder_len=6)
    assert c.removed_macs == sum(l.macs for l in c.layers if l.kind == "cross")
    assert c.by_kind()["cross"]["removed_macs"] == c.removed_macs
    cross0 = next(l for l in c.layers if l.kind == "cross")
    assert cross0.macs == 6 * 2 * 32 * 32 + 10 * 2 * 32 * 32 + 2 * 6 * 10 * 32
    assert c.head_kind == "lm_head" and c.head_macs == 6 * 32 * config.vocab_size
    assert flop_ceiling(config, no_cross, 10).decoder_len == 10      # default: decoder_len = seq_len


def test_ceiling_rejects_a_mask_for_another_model():
    with pytest.raises(FormatError, match="kinds"):
        flop_ceiling(tiny_config("bart"), HeadMask.full(_layout(2, 4)), 8)
    with pytest.raises(FormatError, match="layers"):
        flop_ceiling(tiny_config("bert"), HeadMask.full(_layout(3, 4)), 8)


def test_half_mask_removes_half_of_every_layer():
    mask = half_mask(HeadLayout({"encoder_self": (4, 5, 1)}))
    assert [sum(r) for r in mask.kinds["encoder_self"]] == [2, 3, 1]
    assert half_mask(_layout(3, 4), seed=1) == half_mask(_layout(3, 4), seed=1)


# -- the benchmark -----------------------------------------------------------------------------------

def test_ceiling_of_a_decoder_only_model_counts_its_lm_head():
    config = tiny_config("gpt2")                         # d=32, d_ff=64, 2 layers of 4 heads, vocab V
    t, d = 12, 32
    c = flop_ceiling(config, None, t)
    assert c.decoder_len is None and [l.kind for l in c.layers] == ["decoder_self", "decoder_self"]
    assert c.attention_macs == 2 * (t * 4 * d * d + 2 * t * t * d)
    assert c.ffn_macs == 2 * t * 2 * d * 64
    assert c.head_kind == "lm_head" and c.head_macs == t * d * config.vocab_size


def test_site_macs_of_grouped_query_attention_and_gated_feed_forward():
    from pruning_core.modeling.architectures import StackDims
    from pruning_core.bench.ceiling import _site_macs
    gqa = StackDims(layers=1, heads=4, kv_heads=2, head_dim=8, ffn_dim=64, ffn_matrices=3)
    d, t = 32, 10
    full = _site_macs(d, gqa, [1, 1, 1, 1], t, t)
    assert full == t * 2 * d * 32 + t * 2 * d * 16 + 2 * t * t * 32       # k, v are half as wide
    # one query head of each group removed: both key/value heads stay
    assert full - _site_macs(d, gqa, [1, 0, 1, 0], t, t) == t * 2 * d * 16 + 2 * t * t * 16
    # a whole group removed: its key/value head goes too
    assert full - _site_macs(d, gqa, [0, 0, 1, 1], t, t) == t * 2 * d * 16 + t * 2 * d * 8 + 2 * t * t * 16


@pytest.mark.parametrize("path", sorted((Path(__file__).parents[2] / "benchmarks" / "results").glob("bench_pruning*.json")))
def test_saved_bench_files_round_trip_byte_for_byte(path):
    text = path.read_text(encoding="utf-8")
    again = BenchResult.from_json(json.loads(text)).to_json()
    assert json.dumps(again, indent=1, ensure_ascii=False) + "\n" == text


def test_a_malformed_bench_file_is_a_format_error(tmp_path):
    loaded = tiny_loaded("bert", tmp_path)
    data = benchmark(loaded, None, batch_sizes=(1,), measure_memory=False, **FAST).to_json()
    del data["rows"][0]["median_s"]
    with pytest.raises(FormatError, match="malformed"):
        BenchResult.from_json(data)


@pytest.mark.parametrize("arch", heavy_beyond(ALL_ARCHS, fast=["distilbert", "gpt2", "marian"]))     # every task type: classification, translation, LM, speech
def test_benchmark_measures_three_variants_and_leaves_the_model_alone(arch, tmp_path):
    loaded = tiny_loaded(arch, tmp_path)
    before = weights_hash_of_module(loaded.model)
    mask = half_mask(loaded.layout, seed=3)
    events = []
    result = benchmark(loaded, mask, batch_sizes=(1, 2), progress=events.append, **FAST)

    assert weights_hash_of_module(loaded.model) == before
    assert installed_hook_count(loaded.model) == 0
    assert not loaded.model.training
    assert events and events[-1].done == events[-1].total == 2
    assert result.batch_sizes == (1, 2)
    for bs in (1, 2):
        rows = {v: result.row(v, bs) for v in VARIANTS}
        for r in rows.values():
            assert r.latency.median > 0 and r.latency.n >= 2 and r.latency.min <= r.latency.median <= r.latency.max
            assert r.examples_per_s > 0
            assert r.peak_memory_bytes is None or r.peak_memory_bytes >= r.weights_bytes
        assert rows["pruned"].parameters < rows["dense"].parameters == rows["masked"].parameters
        assert rows["pruned"].heads_kept == mask.n_kept and rows["masked"].heads_kept == mask.n_total
    comp = result.comparisons[0]
    assert comp.ceiling_speedup == pytest.approx(result.ceiling.speedup)
    assert result.ceiling.speedup > 1.0
    assert comp.fraction_of_ceiling == pytest.approx(comp.speedup / comp.ceiling_speedup)
    assert (result.decoder_len is not None) == bool(tiny_config(arch).is_encoder_decoder)
    assert result.attn_implementation == "eager"
    if arch == "whisper":      # the encoder reads its fixed 50 positions (100 mel frames), the decoder 8 tokens
        assert (result.seq_len, result.decoder_len) == (50, 8)
        assert result.ceiling.seq_len == 50


def test_bench_json_round_trips_and_prints(tmp_path):
    loaded = tiny_loaded("bert", tmp_path)
    result = benchmark(loaded, None, batch_sizes=(2,), measure_memory=False, **FAST)
    data = result.to_json()
    assert data["format"] == BENCH_FORMAT == "headprune.bench/1"
    assert data["note"] == MASKING_NOTE and "masked latency ≈ dense" in data["note"]
    assert {"ceiling", "speedups", "rows", "provenance", "device", "torch_threads", "attn_implementation"} <= set(data)
    assert data["speedups"][0]["fraction_of_ceiling"] == pytest.approx(
        data["speedups"][0]["speedup"] / data["ceiling"]["speedup"])
    path = write_json(tmp_path / "bench.json", data)
    again = BenchResult.from_json(read_json(path, BENCH_FORMAT))
    assert again.to_json() == json.loads(json.dumps(data))
    assert again.mask == half_mask(loaded.layout)          # mask=None means half_mask(seed=0)
    text = format_bench(result)
    assert "ceiling" in text and "masking removes no computation" in text and "pruned" in text


def test_benchmark_cancellation_leaves_no_hooks(tmp_path):
    loaded = tiny_loaded("bart", tmp_path)

    def cancel(event):
        if "round" in event.message:
            raise Cancelled("stop")

    with pytest.raises(Cancelled):
        benchmark(loaded, batch_sizes=(1,), progress=cancel, **FAST)
    assert installed_hook_count(loaded.model) == 0


def test_benchmark_does_not_switch_a_training_model_to_eval(tmp_path):
    loaded = tiny_loaded("bert", tmp_path)
    loaded.model.train()
    benchmark(loaded, batch_sizes=(1,), measure_memory=False, **FAST)
    assert loaded.model.training


def test_benchmark_times_only_the_variants_asked_for_and_uses_a_given_pruned_copy(tmp_path, monkeypatch):
    from pruning_core.modeling import pruning
    from pruning_core.bench import run as bench_run
    from pruning_core.core.errors import HeadpruneError

    loaded = tiny_loaded("bert", tmp_path)
    mask = half_mask(loaded.layout, seed=1)
    pruned = pruning.prune_heads(loaded.model, mask).eval()
    before = weights_hash_of_module(pruned)
    made = []
    monkeypatch.setattr(bench_run, "prune_heads", lambda *a, **k: made.append(a) or pruning.prune_heads(*a, **k))
    result = benchmark(loaded, mask, batch_sizes=(1,), measure_memory=False, variants=("dense", "pruned"),
                       pruned=pruned, **FAST)
    assert made == []                                    # the given copy was timed, no second copy made
    assert weights_hash_of_module(pruned) == before      # and only read
    assert result.variants == ("dense", "pruned") and {r.variant for r in result.rows} == {"dense", "pruned"}
    assert result.comparisons[0].masked_ratio is None
    assert BenchResult.from_json(json.loads(json.dumps(result.to_json()))).variants == ("dense", "pruned")
    assert "masked" not in format_bench(result).split("speed-up =")[0]
    assert benchmark(loaded, mask, batch_sizes=(1,), measure_memory=False, **FAST).variants == VARIANTS  # the default
    with pytest.raises(HeadpruneError, match="must include 'dense' and 'pruned'"):
        benchmark(loaded, mask, batch_sizes=(1,), variants=("masked", "pruned"), **FAST)


def test_a_time_budget_stops_timing_after_three_rounds_but_never_sooner():
    """``max_seconds``: a slow probe stops once that much is timed, with the three rounds a median needs."""
    import time as time_

    from pruning_core.bench.timing import MIN_ROUNDS, interleaved_latencies

    runs = {name: (lambda: time_.sleep(0.02)) for name in ("dense", "pruned")}
    budgeted = interleaved_latencies(runs, warmup=0, repeats=7, min_seconds=0.0, max_seconds=0.01)
    assert MIN_ROUNDS == 3 and budgeted.rounds == 3      # spent 0.04 s after round 1: still three rounds
    assert interleaved_latencies(runs, warmup=0, repeats=7, min_seconds=0.0).rounds == 7
    generous = interleaved_latencies(runs, warmup=0, repeats=4, min_seconds=0.0, max_seconds=60.0)
    assert generous.rounds == 4                          # a budget never adds rounds


def test_timing_collects_only_young_garbage_and_keeps_the_collector_off_meanwhile(monkeypatch):
    """A full collection before timing walks every object of a loaded model's process (0.2 to 0.5 s, GIL held, on
    the live panel's every measurement) and frees nothing there: only the young generations are collected, and the
    collector is off while the calls are timed and back on after."""
    import gc

    from pruning_core.bench.timing import interleaved_latencies

    collected, enabled = [], []
    real_collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda generation=2: collected.append(generation) or real_collect(0))
    runs = {name: (lambda: enabled.append(gc.isenabled())) for name in ("dense", "pruned")}
    assert gc.isenabled()
    interleaved_latencies(runs, warmup=0, repeats=3, min_seconds=0.0)
    assert collected and all(g < 2 for g in collected)
    assert enabled == [False] * 6 and gc.isenabled()


def test_a_pause_between_calls_has_its_round_timed_again():
    """``pause`` runs before every call; when it let other work run, the round it broke is redone from its start,
    so every kept round pairs calls made back to back."""
    from pruning_core.bench.timing import interleaved_latencies

    calls, pauses = [], iter([False] * 5 + [True] + [False] * 100)     # the 6th call: round 2's second call
    runs = {name: (lambda name=name: calls.append(name)) for name in ("dense", "pruned")}
    timed = interleaved_latencies(runs, warmup=1, repeats=3, min_seconds=0.0, pause=lambda: next(pauses))
    assert timed.rounds == 3 and all(len(v) == 3 for v in timed.seconds.values())
    # warm-up: dense, pruned; round 1: dense, pruned; round 2: pruned (its 2nd call paused: redone), pruned, dense;
    # round 3 (rotated back): dense, pruned
    assert calls == ["dense", "pruned", "dense", "pruned", "pruned", "pruned", "dense", "dense", "pruned"]


@pytest.mark.parametrize("arch", ["bert", "whisper", "qwen2"])
def test_timings_run_the_deployed_attention_on_a_copy(tmp_path, arch):
    """timing_model: an sdpa copy of an eager model (what `headprune bench` loads), the same weights and outputs
    within float32 rounding (the two attentions sum in another order); the eager original untouched, and a model
    already on sdpa timed as it is."""
    from pruning_core.bench import timing_model
    from pruning_core.bench.run import synthetic_inputs

    lm = tiny_loaded(arch, tmp_path)
    timed = timing_model(lm)
    assert timed.model is not lm.model and timed.model.config._attn_implementation == "sdpa"
    assert lm.model.config._attn_implementation == "eager"
    assert weights_hash_of_module(timed.model) == lm.weights_sha256 and timed.layout == lm.layout
    assert [s.out for s in timed.sites] != [s.out for s in lm.sites]          # the copy's own modules
    inputs = synthetic_inputs(lm.model.config, 2, 7, 5 if lm.model.config.is_encoder_decoder else None, lm.device)
    with torch.inference_mode():
        a, b = lm.model(**inputs), timed.model(**inputs)
    torch.testing.assert_close(b[0], a[0], atol=1e-5, rtol=1e-5)
    assert timing_model(timed) is timed


def test_a_family_without_sdpa_is_timed_as_it_is(tmp_path):
    from pruning_core.bench import timing_model

    lm = tiny_loaded("mpnet", tmp_path)                     # transformers' MPNet has eager attention only
    assert timing_model(lm) is lm


def test_a_model_transformers_will_not_switch_is_timed_as_it_is(tmp_path, monkeypatch):
    """Where set_attn_implementation leaves the model on its own attention (transformers warns and keeps it), the
    copy is refused with what to do and the timing reads the model itself: no second copy kept for nothing."""
    from pruning_core.bench import timing_model
    from pruning_core.core.errors import UnsupportedArchitectureError

    lm = tiny_loaded("bert", tmp_path)
    monkeypatch.setattr(type(lm.model), "set_attn_implementation", lambda self, name: None)
    with pytest.raises(UnsupportedArchitectureError, match="load it with that implementation"):
        lm.with_attention("sdpa")
    assert timing_model(lm) is lm
