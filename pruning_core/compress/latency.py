"""A latency budget, measured with the benchmark's timing harness (:mod:`pruning_core.bench`).

Measured: the median wall time over interleaved rounds (:func:`pruning_core.bench.interleaved_latencies`)
of one forward pass over ``batch_size`` synthetic sequences of ``seq_len`` tokens
(:func:`pruning_core.bench.synthetic_inputs`), on this machine under its current load. The search (Kwon et
al. use a per-layer table): time the dense model and the one with every removable head gone, take latency
as linear in the heads removed, pick the fewest the line says meet the budget, time that pruned model; while
it misses, remove :data:`STEP_SHARE` more (at most :data:`MAX_TRIES` times). The record says what was
predicted and what was measured.
"""
from __future__ import annotations

import math

import torch

from pruning_core.bench import interleaved_latencies, load_average, synthetic_inputs
from pruning_core.modeling.pruning import prune_heads
from pruning_core.core.errors import BudgetError

STEP_SHARE = 0.05     # heads added per retry, as a share of the removable heads
MAX_TRIES = 4


def _timer(loaded, batch_size: int, seq_len: int, repeats: int, min_seconds: float):
    inputs = synthetic_inputs(loaded.config, batch_size, seq_len, seq_len, loaded.device)

    def time_models(models: dict) -> dict[str, float]:
        def run(model):
            def call():
                with torch.inference_mode():
                    model(**inputs)
            return call
        timings = interleaved_latencies({k: run(m) for k, m in models.items()}, warmup=1, repeats=repeats,
                                        min_seconds=min_seconds, device=loaded.device)
        return {k: 1000 * sorted(v)[len(v) // 2] for k, v in timings.seconds.items()}
    return time_models


def latency_probe(loaded, *, batch_size: int = 1, seq_len: int = 128, repeats: int = 5, min_seconds: float = 1.0):
    """A ``latency_probe`` for :func:`.search.search_mask`: ``probe(mask_of, removable, budget_ms) -> (n, record)``."""
    time_models = _timer(loaded, batch_size, seq_len, repeats, min_seconds)

    def cut(mask):                       # only timed: shares the untouched weights with loaded.model
        return prune_heads(loaded.model, mask, share_weights=True)

    def probe(mask_of, removable: int, budget_ms: float) -> tuple[int, dict]:
        base = time_models({"dense": loaded.model, "minimal": cut(mask_of(removable))})
        record = {"measures": f"median wall time of one forward pass, batch {batch_size} x {seq_len} synthetic "
                              f"tokens, {loaded.device}, this machine's load", "batch_size": batch_size,
                  "seq_len": seq_len, "dense_ms": base["dense"], "minimal_ms": base["minimal"],
                  "load_average": load_average(), "tries": []}
        if budget_ms >= base["dense"]:
            record["note"] = "the dense model already meets the budget: nothing removed"
            return 0, record
        if budget_ms < base["minimal"]:
            raise BudgetError(f"--latency-ms {budget_ms:g} cannot be met: with every removable head gone "
                              f"({removable}) a forward pass ({record['measures']}) took {base['minimal']:.1f} ms "
                              f"(dense {base['dense']:.1f} ms). Give --latency-ms {math.ceil(base['minimal'])} "
                              "or more, or a smaller --seq-len / batch.")
        share = (base["dense"] - budget_ms) / max(base["dense"] - base["minimal"], 1e-9)
        n = min(removable, math.ceil(share * removable))
        record["predicted_heads"] = n
        for _ in range(MAX_TRIES):
            got = time_models({"dense": loaded.model, "pruned": cut(mask_of(n))})
            record["tries"].append({"heads_removed": n, "dense_ms": got["dense"], "pruned_ms": got["pruned"]})
            if got["pruned"] <= budget_ms or n == removable:
                break
            n = min(removable, n + max(1, math.ceil(STEP_SHARE * removable)))
        record["measured_ms"] = record["tries"][-1]["pruned_ms"]
        record["met"] = record["measured_ms"] <= budget_ms
        return n, record
    return probe
