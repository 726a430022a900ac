"""The speed verdict: a measured speed-up is a gain only when its spread clears 1.0x and it stays under
the FLOP ceiling; a full mask is never compared; masked latency is never called a speed-up."""
from __future__ import annotations

import pytest

from pruning_core.bench import (FULL_MASK_TEXT, MASKED_TEXT, LatencyStats, benchmark, format_bench, half_mask,
                                judge_speedup, speed_verdict, speedup_spread)
from pruning_core.bench.verdict import ABOVE, AT_CEILING, FULL, GAIN, NOISE, SLOWER
from pruning_core.core.heads import HeadMask
from tiny import tiny_loaded


def _lat(median: float, q1: float, q3: float) -> LatencyStats:
    return LatencyStats(median, q1, q3, q1, q3, 5)


@pytest.mark.parametrize("speedup, low, high, ceiling, full, kind", [
    (1.18, 1.12, 1.24, 1.25, False, GAIN),
    (1.28, 0.70, 2.10, 1.00, True, FULL),          # seen: 1.28x shown with all heads kept
    (1.02, 0.95, 1.09, 1.25, False, NOISE),        # spread overlaps 1.0x
    (0.469, 0.15, 2.4, 1.25, False, NOISE),        # seen: 0.469x with an IQR of 184-1192 ms
    (1.15, 1.10, 1.20, 1.03, False, ABOVE),        # seen: 1.15x against a 1.03x ceiling
    (1.60, 1.55, 1.66, 1.54, False, AT_CEILING),   # 1.60x against 1.54x: within 10 % of the ceiling
    (1.54, 1.50, 1.58, 1.47, False, AT_CEILING),   # seen: 1.54x against 1.47x
    (1.229, 1.20, 1.25, 1.226, False, AT_CEILING),  # seen: the CLI's bench at batch 8
    (1.80, 1.70, 1.90, 1.47, False, ABOVE),        # far above, spread too: not removed work
    (0.90, 0.88, 0.93, 1.25, False, SLOWER),
    (float("inf"), 2.0, float("inf"), 1.25, False, NOISE),
])
def test_verdict_cases(speedup, low, high, ceiling, full, kind):
    verdict = judge_speedup(speedup, low, high, ceiling, full=full)
    assert verdict.kind == kind
    assert verdict.is_gain == (kind in (GAIN, AT_CEILING))
    text = verdict.text
    assert "measurement noise" not in text and "measurement noise" not in verdict.short
    if not verdict.is_gain:
        assert "faster" not in text and "speed-up" not in text
    if kind == FULL:
        assert text == FULL_MASK_TEXT
    if kind == NOISE:
        assert text.startswith("within noise")
    if kind == ABOVE:
        assert text.startswith("above the FLOP ceiling") and "timing noise" in text
        assert verdict.short == f"at most {ceiling:.2f}x"
    if kind == AT_CEILING:
        assert text.startswith(f"{speedup:.2f}x faster, at the {ceiling:.2f}x the removed arithmetic allows "
                               "(the rest is timing noise") and verdict.short == f"{speedup:.2f}x faster"


def test_spread_comes_from_both_iqrs():
    low, high = speedup_spread(_lat(0.010, 0.009, 0.012), _lat(0.008, 0.006, 0.009))
    assert low == pytest.approx(0.009 / 0.009) and high == pytest.approx(0.012 / 0.006)


def test_speed_verdict_of_a_real_run_and_the_cli_text(tmp_path):
    loaded = tiny_loaded("bert", tmp_path)
    fast = dict(warmup=0, repeats=3, min_seconds=0.0, seq_len=8, measure_memory=False)
    full = benchmark(loaded, HeadMask.full(loaded.layout), batch_sizes=(1,), **fast)
    assert speed_verdict(full).kind == FULL                  # whatever the timer said
    half = benchmark(loaded, half_mask(loaded.layout), batch_sizes=(1, 2), **fast)
    for size in (1, 2):
        assert speed_verdict(half, size).kind in (GAIN, AT_CEILING, NOISE, ABOVE, SLOWER)
    text = format_bench(half)
    assert f"masked: {MASKED_TEXT}" in text and "batch 2: pruned" in text


@pytest.mark.parametrize("cpus, load, share, busy", [
    (2, 1.06, 0.6, False),     # seen: this server's own work, a small model not filling both threads
    (2, 1.06, None, False),
    (2, 2.7, 0.95, True),      # the load says others run
    (2, 2.2, 0.5, True),       # the load reached the CPUs and the timing got half of them
    (4, 2.0, 0.5, False),
])
def test_the_load_warning_needs_others_on_the_machine(tmp_path, cpus, load, share, busy):
    from dataclasses import replace

    loaded = tiny_loaded("bert", tmp_path)
    result = benchmark(loaded, half_mask(loaded.layout), batch_sizes=(1,), warmup=0, repeats=2, min_seconds=0.0,
                       seq_len=8, measure_memory=False)
    machine = {"cpus": cpus, "load_before": [load, load, load], "load_after": [load, load, load]}
    comparisons = tuple(replace(c, cpu_share=share) for c in result.comparisons)
    assert replace(result, machine=machine, comparisons=comparisons).busy == busy
