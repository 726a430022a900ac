"""Live clicks in the library: a one-head click's new metric with the shared layer-input cache, on any model.

    .venv/bin/python benchmarks/live_clicks.py --model smollm2       # writes benchmarks/results/live_clicks_smollm2.json
    .venv/bin/python benchmarks/live_clicks.py --model qwen2.5-0.5b --layers 0 6 12 17 23

Needs the model prepared (``headprune prepare --model ...``). Steps, as the Head map evaluates a click
(``Task.evaluate`` with a :class:`~pruning_core.modeling.inference.layer_cache.LayerInputCache` of the dashboard's budget,
threads as the dashboard sets them).

What it measures and writes, in full: benchmarks/README.md, ``live_clicks.py``.
"""
from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

from live_common import RESULTS, load_1min, machine

from app.model import workload
from pruning_core.bench import budget
from pruning_core.modeling.sources import catalog
from pruning_core.core.heads import HeadMask
from pruning_core.core.io.storage import write_json
from pruning_core.modeling.inference.layer_cache import LayerInputCache
from pruning_core.modeling.sources.loading import load_model
from pruning_core.tasks import get_task

FORMAT = "headprune.live_clicks/1"


def default_size(lm, task, split: str) -> int:
    """The evaluation size the dashboard picks for ``lm`` on ``task`` when the user chose none (text models)."""
    encoded = task.encode(lm, split, workload.LARGEST_DEFAULT_EVAL_SIZE)
    mean_length = statistics.mean(encoded.lengths or [encoded.max_length])
    return workload.click_eval_size(budget.example_cost(lm, lm.task_type, math.ceil(mean_length)))


def spread(layers: int, points: int = 5) -> list[int]:
    """``points`` layers from the first to the last, evenly spread (30 layers: 0, 7, 15, 22, 29)."""
    return sorted({int(i * (layers - 1) / (points - 1) + 0.5) for i in range(points)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--task", default=None, help="default: the model's own task")
    parser.add_argument("--n", type=int, default=None, help="examples; default: the dashboard's default size")
    parser.add_argument("--layers", type=int, nargs="*", default=None)
    parser.add_argument("--head", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="the dashboard's EVAL_BATCH")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    lm = load_model(args.model)
    task_name = args.task or catalog.get(args.model).task
    task = get_task(task_name)
    split = getattr(task, "default_split", "validation")
    n = args.n or default_size(lm, task, split)
    data = task.encode(lm, split, n)
    kind = next(iter(lm.layout.kinds))
    layers = args.layers if args.layers is not None else spread(len(lm.layout.kinds[kind]))

    cache = LayerInputCache(budget.layer_cache_budget())
    load_before = load_1min()
    t = time.perf_counter()
    dense = task.evaluate(lm, data, None, batch_size=args.batch_size, layer_cache=cache)
    full_seconds = time.perf_counter() - t
    clicks = []
    for repeat in range(args.repeats):
        for layer in layers:
            head = (args.head + repeat) % lm.layout.kinds[kind][layer]     # a click not served already
            mask = HeadMask.full(lm.layout).toggled(kind, layer, head)
            load = load_1min()
            t, cpu = time.perf_counter(), time.process_time()
            resumed = task.evaluate(lm, data, mask, batch_size=args.batch_size, layer_cache=cache)
            seconds, cpu_seconds = time.perf_counter() - t, time.process_time() - cpu
            t = time.perf_counter()
            plain = task.evaluate(lm, data, mask, batch_size=args.batch_size)
            plain_seconds = time.perf_counter() - t
            clicks.append({"repeat": repeat, "layer": layer, "head": head, "metric": resumed.metric,
                           "seconds": round(seconds, 3), "cpu_seconds": round(cpu_seconds, 3),
                           "plain_seconds": round(plain_seconds, 3), "load_1min": load,
                           "equal": resumed.metric == plain.metric
                           and resumed.example_losses == plain.example_losses})
            print(f"layer {layer:2d}: {seconds:.3f} s with the cache, {plain_seconds:.3f} s without "
                  f"(load {load}, equal {clicks[-1]['equal']})", flush=True)

    def median(key: str, rows: list[dict]) -> float:
        return round(statistics.median(c[key] for c in rows), 3)

    result = {
        "format": FORMAT, "model": args.model, "task": task_name, "split": split, "n_examples": data.n_examples,
        "unit": budget.example_cost(lm, lm.task_type).unit, "metric": dense.metric_name,
        "dense_metric": dense.metric, "batch_size": args.batch_size, "machine": machine(),
        "layer_cache_budget_bytes": budget.layer_cache_budget(), "cache_bytes_after": cache.nbytes,
        "cache_resumed": cache.resumed, "cache_full": cache.full,
        "full_seconds": round(full_seconds, 3), "kind": kind, "layers": layers,
        "median_seconds": median("seconds", clicks), "median_cpu_seconds": median("cpu_seconds", clicks),
        "median_plain_seconds": median("plain_seconds", clicks),
        "by_layer": {str(layer): {"median_seconds": median("seconds", [c for c in clicks if c["layer"] == layer]),
                                  "median_plain_seconds": median("plain_seconds",
                                                                 [c for c in clicks if c["layer"] == layer])}
                     for layer in layers},
        "all_equal": all(c["equal"] for c in clicks), "clicks": clicks,
        "load_before": load_before, "load_end": load_1min(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = Path(args.out) if args.out else RESULTS / f"live_clicks_{args.model.replace('/', '_')}.json"
    write_json(out, result)
    print(f"{args.model}: {data.n_examples} {result['unit']}s of {task_name} {split}; {dense.metric_name} "
          f"{dense.metric:.4g}; click -> metric {result['median_seconds']:.3f} s median with the cache, "
          f"{result['median_plain_seconds']:.3f} s without (all-heads pass {full_seconds:.3f} s; "
          f"load {load_before} -> {result['load_end']}; every figure equal: {result['all_equal']}) -> {out}")


if __name__ == "__main__":
    main()
