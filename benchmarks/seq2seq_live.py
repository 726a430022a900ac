"""Live clicks on the encoder-decoders (Whisper-base, the Bergamot students): per click, the time to its loss and to
its metric, as the Head map's one evaluation gives them.

    .venv/bin/python benchmarks/seq2seq_live.py --model whisper-base            # 8 utterances of movie-speech
    .venv/bin/python benchmarks/seq2seq_live.py --model bergamot-en-pt          # 128 verses of bible-en-pt
    .venv/bin/python benchmarks/seq2seq_live.py --model bergamot-pt-en

What it measures and writes, in full: benchmarks/README.md, ``seq2seq_live.py``.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from live_common import RESULTS, load_1min, machine

from pruning_core.bench.budget import layer_cache_budget
from pruning_core.modeling.sources import catalog
from pruning_core.core.heads import HeadMask
from pruning_core.core.io.storage import write_json
from pruning_core.modeling.inference.layer_cache import LayerInputCache
from pruning_core.modeling.sources.loading import load_model
from pruning_core.tasks import get_task

FORMAT = "headprune.seq2seq_live/1"
DEFAULT_N = {"whisper-base": 8}          # the dashboard's evaluation sizes; 128 verses for the students
BATCH = 64                               # the dashboard's EVAL_BATCH


def timed_evaluation(task, lm, data, mask: HeadMask | None, cache: LayerInputCache | None) -> dict:
    """One evaluation as the Head map runs it: its result, the seconds to its metric (progress's ``partial``: a
    decoding task reports it before the loss's output layer, ``Task.metric_first``) and to its loss (the result),
    and CPU seconds (``time.process_time``, less sensitive to others' load)."""
    start, cpu = time.perf_counter(), time.process_time()
    seen: dict[str, float] = {}

    def progress(event) -> None:
        if getattr(event, "partial", None) is not None and "metric" not in seen:
            seen["metric"] = time.perf_counter() - start

    result = task.evaluate(lm, data, mask, batch_size=BATCH, layer_cache=cache, progress=progress)
    seconds = time.perf_counter() - start
    return {"result": result, "metric_seconds": round(seen.get("metric", seconds), 3), "loss_seconds": round(seconds, 3),
            "cpu_seconds": round(time.process_time() - cpu, 3)}


def clicks_of(layout, seed: int) -> list[tuple[str, int, int]]:
    """One head per layer and kind (a seeded random head of each), in a seeded random order."""
    rng = random.Random(seed)
    heads = [(kind, layer, rng.randrange(n)) for kind, counts in layout.kinds.items() for layer, n in enumerate(counts)]
    rng.shuffle(heads)
    return heads


def summary(clicks: list[dict], key: str) -> dict:
    values = sorted(c[key] for c in clicks)
    q = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return {"median": round(statistics.median(values), 3), "q1": round(q[0], 3), "q3": round(q[2], 3),
            "min": values[0], "max": values[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="whisper-base")
    parser.add_argument("--task", default=None, help="default: the model's catalog task")
    parser.add_argument("--n", type=int, default=None, help="examples evaluated (8 for Whisper, else 128)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clicks", type=int, default=None, help="only the first N clicks of the shuffled order")
    parser.add_argument("--no-check", action="store_true", help="skip the evaluations without the cache")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    task_name = args.task or catalog.get(args.model).task
    n = args.n or DEFAULT_N.get(args.model, 128)
    lm = load_model(args.model)
    task = get_task(task_name)
    data = task.encode(lm, task.default_split, n)
    load_before = load_1min()
    cache = LayerInputCache(layer_cache_budget())
    arrival = timed_evaluation(task, lm, data, None, cache)
    base = arrival["result"]
    clicks = []
    for kind, layer, head in clicks_of(lm.layout, args.seed)[:args.clicks]:
        mask = HeadMask.full(lm.layout).toggled(kind, layer, head)
        load = load_1min()
        timed = timed_evaluation(task, lm, data, mask, cache)
        result = timed.pop("result")
        click = {"removed": [kind, layer, head], **timed, "metric": result.metric, "loss": result.loss,
                 "load_1min": load, "decoding": result.extra.get("decoding")}
        if not args.no_check:
            full = task.evaluate(lm, data, mask, batch_size=BATCH)
            click["equals_uncached"] = (full.metric, full.loss, full.predictions) == \
                (result.metric, result.loss, result.predictions)
        clicks.append(click)
        print(f"  {kind:13s} L{layer} h{head}: loss {result.loss:.4f} in {timed['loss_seconds']:.2f} s, "
              f"{result.metric_name} {result.metric:.2f} in {timed['metric_seconds']:.2f} s (load {load})", flush=True)
    kinds = sorted({c["removed"][0] for c in clicks})
    out = {
        "format": FORMAT, "model": args.model, "task": task_name, "split": data.split, "n_examples": data.n_examples,
        "batch_size": BATCH, "seed": args.seed, "layer_cache_budget_bytes": layer_cache_budget(),
        "metric": base.metric_name, "all_heads": {"metric": base.metric, "loss": base.loss,
                                                  "seconds": arrival["metric_seconds"],
                                                  "decoding": base.extra.get("decoding")},
        "clicks": clicks,
        "loss_seconds": summary(clicks, "loss_seconds"), "metric_seconds": summary(clicks, "metric_seconds"),
        "by_kind": {k: {"n_clicks": sum(c["removed"][0] == k for c in clicks),
                        "loss_seconds": summary([c for c in clicks if c["removed"][0] == k], "loss_seconds"),
                        "metric_seconds": summary([c for c in clicks if c["removed"][0] == k], "metric_seconds")}
                    for k in kinds},
        "all_equal_uncached": None if args.no_check else all(c["equals_uncached"] for c in clicks),
        "machine": machine(),
        "load_before": load_before, "load_after": load_1min(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = Path(args.out) if args.out else RESULTS / f"seq2seq_live-{args.model}.json"
    write_json(path, out)
    print(f"{args.model}, {data.n_examples} examples of {task_name}: all heads {base.metric_name} {base.metric:.2f}, "
          f"loss {base.loss:.4f} ({arrival['metric_seconds']:.2f} s); load {load_before} -> {out['load_after']}")
    print(f"  {len(clicks)} clicks: loss in {out['loss_seconds']['median']:.2f} s median, "
          f"{base.metric_name} in {out['metric_seconds']['median']:.2f} s median; equal to uncached: "
          f"{out['all_equal_uncached']}")
    for k, part in out["by_kind"].items():
        print(f"    {k:13s} {part['n_clicks']:2d} clicks: loss {part['loss_seconds']['median']:.2f} s, "
              f"metric {part['metric_seconds']['median']:.2f} s")
    print(f"  wrote {path}")


if __name__ == "__main__":
    main()
