"""How close the Head map's latency estimate comes to the measurement, per prepared model.

    .venv/bin/python benchmarks/latency_estimate.py --model smollm2      # about a minute on 2 quiet cores

Times the live panel's probe (``app.headmap.cache.probe_shape``: up to 8 x 64 tokens, one utterance for speech)
on the copy the dashboard times (sdpa attention) as it does: :func:`pruning_core.bench.latency_model.calibrate`
once (how long it took is recorded: the dashboard does it once per model and server), then for each of ``--masks`` seeded random masks (one head; 25 %,
50 %, 75 % of the heads) the estimate and the measured pruned latency (:func:`pruning_core.bench.benchmark` with the
live panel's rounds). Writes ``benchmarks/results/latency_estimate-MODEL.json`` with each mask's relative error,
their median, the longest stretch between the calibration's pauses (what a click can wait for it), and the load.
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

from pruning_core.bench import benchmark, timing_model  # noqa: E402
from pruning_core.bench.latency_model import calibrate  # noqa: E402
from pruning_core.core.heads import HeadMask  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from live_common import machine  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "headprune.latency_estimate/1"
SHARES = (None, 0.25, 0.5, 0.75)          # None: one head


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _mask(layout, share: float | None, rng: random.Random) -> HeadMask:
    heads = [(k, l, h) for k, rows in layout.kinds.items() for l, n in enumerate(rows) for h in range(n)]
    removed = [rng.choice(heads)] if share is None else rng.sample(heads, round(share * len(heads)))
    return HeadMask.from_removed(layout, removed)


def main() -> None:
    from app.headmap.cache import LATENCY_BUDGET_S, LATENCY_ROUNDS, LATENCY_WARMUP, probe_shape

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--masks", type=int, default=2, help="masks per share (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lm = timing_model(load_model(args.model))        # what the dashboard times: sdpa attention (app.model.cache.timing)
    batch, seq_len = probe_shape(lm)
    load_before = _load()
    started = time.perf_counter()
    pauses = [started]                           # when the calibration offered the CPU to a waiting click

    def pause() -> bool:
        pauses.append(time.perf_counter())
        return False                             # no click came: the round goes on

    model = calibrate(lm, batch_size=batch, seq_len=seq_len, max_seconds=LATENCY_BUDGET_S, pause=pause)
    calibration_s = time.perf_counter() - started
    gaps = sorted(b - a for a, b in zip(pauses, [*pauses[1:], started + calibration_s]))
    rng = random.Random(args.seed)
    rows = []
    for share in SHARES:
        for _ in range(args.masks):
            mask = _mask(lm.layout, share, rng)
            result = benchmark(lm, mask, batch_sizes=(batch,), seq_len=seq_len, warmup=LATENCY_WARMUP,
                               repeats=LATENCY_ROUNDS, min_seconds=0.5, max_seconds=LATENCY_BUDGET_S,
                               measure_memory=False, variants=("dense", "pruned"))
            measured = result.row("pruned", batch).latency.median
            dense = result.row("dense", batch).latency.median
            estimate = model.estimate(mask)
            rows.append({"removed": mask.n_total - mask.n_kept, "heads": mask.n_total, "estimate_s": estimate,
                         "measured_s": measured, "dense_s": dense, "relative_error": estimate / measured - 1,
                         "load": _load()})
            print(f"{mask.n_total - mask.n_kept:4d}/{mask.n_total} removed: estimate {1e3 * estimate:8.1f} ms, "
                  f"measured {1e3 * measured:8.1f} ms ({100 * (estimate / measured - 1):+.1f} %)", flush=True)
    errors = [abs(r["relative_error"]) for r in rows]
    out = {"format": FORMAT, "model": args.model, "batch_size": batch, "seq_len": model.seq_len,
           "calibration_s": calibration_s, "pauses": len(pauses) - 1, "longest_between_pauses_s": gaps[-1],
           "median_between_pauses_s": statistics.median(gaps), "dense_s": model.dense_s,
           "saving_s": dict(model.saving_s),
           "masks": rows, "median_abs_relative_error": statistics.median(errors), "max_abs_relative_error": max(errors),
           "load_before": load_before, "load_after": _load(), "machine": machine(),
           "cpus": os.cpu_count(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path = args.out or RESULTS / f"latency_estimate-{args.model}.json"
    write_json(path, out)
    print(f"calibration {calibration_s:.1f} s, a click waits at most {gaps[-1]:.3f} s for it; median |error| {100 * out['median_abs_relative_error']:.1f} %, "
          f"max {100 * out['max_abs_relative_error']:.1f} % -> {path}")


if __name__ == "__main__":
    main()
