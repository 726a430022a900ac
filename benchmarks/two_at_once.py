"""Two sessions' clicks evaluated at once, a thread each on one core, against one after the other on both cores
(the route "two evaluations at once" for a class, issue 50): is it worth letting the server's queue run two?

    .venv/bin/python benchmarks/two_at_once.py                                  # Bergamot en→pt, 128 verses
    .venv/bin/python benchmarks/two_at_once.py --model default --task movie-sentiment

Pairs of one-head masks, each pair evaluated both ways as the dashboard evaluates a click (``Task.evaluate`` with the
shared layer-input cache and draft store), the way that goes first alternating (it meets the mask new: no layer input
or draft of it yet). Every metric of both ways must be equal (the evaluations share one model; each thread's masks
and hooks are its own). Writes ``benchmarks/results/two_at_once-MODEL.json``: per pair the seconds both ways, the
medians, split by which way met the masks first, and the load.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import torch  # noqa: E402

from live_common import machine  # noqa: E402
from pruning_core.bench import load_average  # noqa: E402
from pruning_core.bench.budget import layer_cache_budget  # noqa: E402
from pruning_core.core.heads import HeadMask  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.modeling.inference.drafts import DraftStore  # noqa: E402
from pruning_core.modeling.inference.layer_cache import LayerInputCache  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

FORMAT = "headprune.two_at_once/1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bergamot-en-pt")
    parser.add_argument("--task", default="bible-en-pt")
    parser.add_argument("--limit", type=int, default=128)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lm, task = load_model(args.model), get_task(args.task)
    data = task.encode(lm, task.default_split, args.limit)
    cache, store = LayerInputCache(layer_cache_budget()), DraftStore()

    def evaluate(mask):
        return task.evaluate(lm, data, mask, batch_size=64, layer_cache=cache, drafts=store)

    evaluate(None)                                        # a session's arrival: the all-heads output, the caches
    kinds = list(lm.layout.kinds)
    heads = [(k, layer, h) for k in kinds for layer, n in enumerate(lm.layout.kinds[k]) for h in range(n)]
    masks = [HeadMask.from_removed(lm.layout, [heads[(37 * i) % len(heads)]]) for i in range(2 * args.pairs)]
    threads = torch.get_num_threads()
    load_before, rows = load_average(), []
    for p in range(args.pairs):
        a, b = masks[2 * p], masks[2 * p + 1]
        order = ("serial", "parallel") if p % 2 == 0 else ("parallel", "serial")
        got, seconds = {}, {}
        for way in order:
            start = time.perf_counter()
            if way == "serial":                           # the queue as it is: one at a time, every core each
                got[way] = [evaluate(a).metric, evaluate(b).metric]
            else:                                         # two at once, one core each
                torch.set_num_threads(1)
                out = {}
                pair = [threading.Thread(target=lambda k=k, m=m: out.__setitem__(k, evaluate(m).metric))
                        for k, m in ((0, a), (1, b))]
                try:
                    for t in pair:
                        t.start()
                    for t in pair:
                        t.join()
                finally:
                    torch.set_num_threads(threads)
                got[way] = [out[0], out[1]]
            seconds[way] = time.perf_counter() - start
        if got["serial"] != got["parallel"]:
            raise SystemExit(f"pair {p}: the metrics differ between the ways: {got}")
        rows.append({"removed": [list(m.removed()) for m in (a, b)], "first": order[0],
                     **{f"{w}_s": round(s, 3) for w, s in seconds.items()}, "metrics": got["serial"]})
        print(f"pair {p} ({order[0]} first): serial {seconds['serial']:.2f} s, parallel {seconds['parallel']:.2f} s",
              flush=True)

    def med(way: str, first: str | None = None) -> float:
        return round(statistics.median(r[f"{way}_s"] for r in rows if first is None or r["first"] == first), 3)

    summary = {"serial_median_s": med("serial"), "parallel_median_s": med("parallel"),
               "serial_over_parallel": round(med("serial") / med("parallel"), 3),
               "met_first": {w: med(w, w) for w in ("serial", "parallel")},
               "met_second": {w: med(w, "parallel" if w == "serial" else "serial") for w in ("serial", "parallel")}}
    print(summary)
    out = args.out or ROOT / "benchmarks" / "results" / f"two_at_once-{args.model}.json"
    created = time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime())
    write_json(out, {"format": FORMAT, "created": created, "model": args.model, "task": args.task, "examples": data.n_examples,
                     "torch_threads": threads, "pairs": rows, **summary, "machine": machine(),
                     "load_1min": {"before": load_before[0], "after": load_average()[0]},
                     "command": "python " + " ".join(["benchmarks/two_at_once.py", *sys.argv[1:]])})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
