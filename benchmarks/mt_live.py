"""Live BLEU on the Bergamot student: the time from "remove one head" to a new BLEU, and Michel's reference points.

    .venv/bin/python benchmarks/mt_live.py          # about 5 minutes on 2 quiet CPU cores; threads as the dashboard

Needs ``headprune prepare --model bergamot-en-pt``.

What it measures and writes, in full: benchmarks/README.md, ``mt_live.py``.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # as dashboard.py sets it

import torch  # noqa: E402

from pruning_core.core.heads import HeadMask  # noqa: E402
from pruning_core.bench.budget import layer_cache_budget  # noqa: E402
from pruning_core.modeling.inference.layer_cache import LayerInputCache, forward_for  # noqa: E402
from pruning_core.modeling.masking import apply_mask  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.evaluation.significance import beside_intervals  # noqa: E402
from pruning_core.scoring import ScoreConfig, get_scorer  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "headprune.mt_live/3"


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _decode_bleu(task, lm, data, mask: HeadMask | None, batch_size: int, shortlist: bool = True,
                 cache: LayerInputCache | None = None) -> tuple[float, float]:
    """What a click on the head map runs (``Task.evaluate``: loss pass, greedy decoding, BLEU and its interval):
    its BLEU and its CPU seconds (``time.process_time``, less sensitive to others' load than wall time)."""
    cpu = time.process_time()
    result = task.evaluate(lm, data, mask, batch_size=batch_size, shortlist=shortlist, layer_cache=cache)
    return result.metric, time.process_time() - cpu


def _loss(lm, task, data, mask: HeadMask | None, batch_size: int, cache: LayerInputCache) -> float:
    """The teacher-forced pass of ``Task.evaluate`` alone (the same cache use): the mean loss."""
    total = weight = 0.0
    with torch.inference_mode(), apply_mask(lm, mask), forward_for(lm, data, mask, batch_size, cache) as forward:
        for i, batch in enumerate(data.batches(batch_size)):
            _, rows = task.forward_losses(lm, batch, lambda: forward(i, batch))     # as Task.evaluate
            total += float(rows.sum())
            weight += float(task.example_weights(batch).sum())
    return total / weight


def _click(task, lm, data, removed: list, batch_size: int, caches: tuple[LayerInputCache, LayerInputCache]) -> dict:
    """One click: the evaluation's seconds on the first cache, the loss pass alone on the second."""
    mask = HeadMask.from_removed(lm.layout, removed)
    t, cpu = time.perf_counter(), time.process_time()
    loss = _loss(lm, task, data, mask, batch_size, caches[1])
    loss_seconds, loss_cpu = time.perf_counter() - t, time.process_time() - cpu
    load = _load()
    t = time.perf_counter()
    bleu, bleu_cpu = _decode_bleu(task, lm, data, mask, batch_size, cache=caches[0])
    return {"removed": [list(h) for h in removed], "bleu": round(bleu, 2), "loss": round(loss, 4),
            "bleu_seconds": round(time.perf_counter() - t, 3), "loss_seconds": round(loss_seconds, 3),
            "bleu_cpu_seconds": round(bleu_cpu, 3), "loss_cpu_seconds": round(loss_cpu, 3), "load_1min": load[0]}


def _medians(clicks: list[dict]) -> dict:
    out = {f"median_{k}": round(statistics.median(c[k] for c in clicks), 3)
           for k in ("bleu_seconds", "loss_seconds", "bleu_cpu_seconds", "loss_cpu_seconds")}
    out["n_clicks"] = len(clicks)
    return out


def _by_kind(clicks: list[dict]) -> dict:
    kinds = sorted({c["removed"][-1][0] for c in clicks})
    return {k: _medians([c for c in clicks if c["removed"][-1][0] == k]) for k in kinds}


def _least(ranking, kind: str, fraction: float, layout) -> HeadMask:
    heads = [h for h in ranking.ranked(seed=0) if h[0] == kind]
    return HeadMask.from_removed(layout, heads[:round(fraction * len(heads))])


def _evaluate(task, lm, data, mask, batch_size: int) -> dict:
    r = task.evaluate(lm, data, mask, batch_size=batch_size)
    chrf = beside_intervals(r, task.references(data)).get("chrf")
    return {"bleu": round(r.metric, 2), "bleu_interval": [round(x, 2) for x in r.interval] if r.interval else None,
            "chrf": round(r.extra["chrf"], 2), "chrf_interval": [round(x, 2) for x in chrf] if chrf else None,
            "loss": round(r.loss, 4),
            "heads_kept": mask.n_kept if mask else lm.layout.total_heads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bergamot-en-pt")
    parser.add_argument("--task", default="bible-en-pt")
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--clicks", type=int, default=12, help="heads removed one after another")
    parser.add_argument("--seed", type=int, default=0, help="the order of the clicks")
    parser.add_argument("--n-score", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    lm = load_model(args.model)
    task = get_task(args.task)
    data = task.encode(lm, "test", args.n)
    load_before = _load()
    t0 = time.perf_counter()
    base_bleu, _ = _decode_bleu(task, lm, data, None, args.batch_size)
    full_bleu, _ = _decode_bleu(task, lm, data, None, args.batch_size, shortlist=False)
    base_seconds = time.perf_counter() - t0

    heads = list(lm.layout.heads())
    random.Random(args.seed).shuffle(heads)
    caches = (LayerInputCache(layer_cache_budget()), LayerInputCache(layer_cache_budget()))
    for cache in caches:                                 # a session's arrival: the unpruned evaluation
        _decode_bleu(task, lm, data, None, args.batch_size, cache=cache)
    single = [_click(task, lm, data, [h], args.batch_size, caches) for h in heads]
    sequence = [_click(task, lm, data, heads[:i + 1], args.batch_size, caches) for i in range(args.clicks)]
    load_after_clicks = _load()

    scored = get_scorer("gradient").score(lm, task, ScoreConfig(split="validation", limit=args.n_score,
                                                                batch_size=16))
    ranking = scored.ranking_scores
    points = {"baseline": _evaluate(task, lm, data, None, args.batch_size),
              "encoder_self_50pct_least_I_h": _evaluate(task, lm, data, _least(ranking, "encoder_self", 0.5, lm.layout),
                                                        args.batch_size),
              "cross_50pct_least_I_h": _evaluate(task, lm, data, _least(ranking, "cross", 0.5, lm.layout),
                                                 args.batch_size)}
    result = {
        "format": FORMAT, "model": args.model, "task": args.task, "split": "test", "n_examples": data.n_examples,
        "torch_threads": torch.get_num_threads(), "batch_size": args.batch_size,
        "live": {"baseline_bleu": round(base_bleu, 2), "baseline_seconds": round(base_seconds, 3),
                 "layer_cache_budget_bytes": layer_cache_budget(), "seed": args.seed,
                 "single": {**_medians(single), "by_kind": _by_kind(single), "clicks": single},
                 "sequence": {**_medians(sequence), "clicks": sequence},
                 "baseline_bleu_whole_vocabulary": round(full_bleu, 2),
                 "decoding": {"method": "greedy, step by step (Task.evaluate)",
                              "shortlist": lm.shortlist.describe() if lm.shortlist is not None else None},
                 "omp": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")},
                 "load_before": load_before, "load_after": load_after_clicks},
        "reference_points": points, "scoring": {"method": "gradient (I_h)", "split": "validation",
                                                "n_examples": args.n_score, "seconds": round(scored.seconds, 1)},
        "load_end": _load(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_json(RESULTS / "mt_live.json", result)
    live = result["live"]
    print(f"{args.model} on {data.n_examples} verses of {args.task} test: baseline BLEU {live['baseline_bleu']} "
          f"({live['baseline_seconds']:.2f} s; load {load_before} -> {load_after_clicks})")
    for name in ("single", "sequence"):
        part = live[name]
        print(f"  {name:8s} {part['n_clicks']:3d} clicks: new BLEU in {part['median_bleu_seconds']:.2f} s median, "
              f"the loss pass alone {part['median_loss_seconds']:.2f} s")
    for kind, part in live["single"]["by_kind"].items():
        print(f"    {kind:14s} {part['n_clicks']:3d} clicks: BLEU in {part['median_bleu_seconds']:.2f} s median")
    for name, p in points.items():
        print(f"  {name:30s} BLEU {p['bleu']:6.2f} {p['bleu_interval']}  chrF {p['chrf']:6.2f}  loss {p['loss']:.4f}  "
              f"heads {p['heads_kept']}")


if __name__ == "__main__":
    main()
