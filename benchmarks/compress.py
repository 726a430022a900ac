"""Retraining-free compression of the default (MiniLM-L6, movie-sentiment) to 36 of 72 heads removed.

    .venv/bin/python benchmarks/compress.py                          # the runs below; minutes each on 2 cores
    .venv/bin/python benchmarks/compress.py --only fisher-1024       # one of them

Each run is ``pruning_core.repair.compress`` (what ``headprune compress default --task movie-sentiment
--remove 0.5`` runs) with one of the design choices METHODS.md allows: the scorer (Kwon's Fisher, raw
across layers, or Michel's I_h, per-layer normalised), the number of training snippets it calibrates on
(scoring, rearrangement and least-squares tuning), FLAP's bias compensation on or off, and the scales and
bias fitted together (a lower calibration error) or not. For each:
test accuracy on all 1,012 test snippets (95 % Wilson interval) of the unpruned model, of the mask
without repair and of the repaired model; the seconds of every step and in all; the machine's load
average before and after (the 2 cores are shared: wall times are this load's, not a quiet machine's; the
CPU seconds of all threads are the load-free cost: on 2 quiet cores the wall time is about half of them).

Writes ``benchmarks/results/compress.json`` (``headprune.bench_compress/1``) and prints the table.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.models import load_model  # noqa: E402
from pruning_core.repair import Budget, CompressConfig, compress, evaluate_compression, summary_json  # noqa: E402
from pruning_core.results import provenance, write_json  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

FORMAT = "headprune.bench_compress/1"
RESULTS = ROOT / "benchmarks" / "results"
# (label, scorer, calibration examples, normalise per layer, bias compensation, scales and bias fitted together)
RUNS = [("fisher-512", "fisher", 512, False, True, False), ("gradient-512", "gradient", 512, True, True, False),
        ("fisher-512-fitted-bias", "fisher", 512, False, True, True),
        ("fisher-512-no-bias", "fisher", 512, False, False, False), ("fisher-1024", "fisher", 1024, False, True, False),
        ("fisher-2048", "fisher", 2048, False, True, False)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--remove", type=float, default=0.5)
    p.add_argument("--only", default="", help="comma-separated labels to run (default: all)")
    p.add_argument("--note", default="", help="recorded in the file")
    p.add_argument("--out", default=str(RESULTS / "compress.json"))
    args = p.parse_args(argv)
    only = {s for s in args.only.split(",") if s}
    loaded = load_model("default", device="cpu")
    task = get_task("movie-sentiment")
    test = task.encode(loaded, "test", None)
    rows = []
    for label, scorer, calibration, normalize, bias, fit_bias in RUNS:
        if only and label not in only:
            continue
        load_before, start, cpu = os.getloadavg(), time.perf_counter(), time.process_time()
        result = compress(loaded, task, CompressConfig(Budget("remove", args.remove), scorer=scorer,
                                                       calibration=calibration, normalize=normalize,
                                                       bias_compensation=bias, fit_bias=fit_bias))
        evaluations = summary_json(evaluate_compression(loaded, task, test, result))
        rows.append({"label": label, "scorer": scorer, "calibration": calibration, "normalize": normalize,
                     "bias_compensation": bias, "fit_bias": fit_bias, "heads_removed": result.report["heads_removed"],
                     "swaps": result.report["rearrangement"].get("swaps"), "test": evaluations,
                     "seconds": result.report["seconds"], "wall_seconds_with_evaluation": time.perf_counter() - start,
                     "cpu_seconds_with_evaluation": time.process_time() - cpu, "torch_threads": torch.get_num_threads(),
                     "repair_layers": result.report["repair"].get("layers"),
                     "load_before": [round(x, 2) for x in load_before],
                     "load_after": [round(x, 2) for x in os.getloadavg()]})
        t = evaluations
        print(f"{label:20s} unpruned {t['unpruned']['metric']:.2%}  pruned {t['pruned']['metric']:.2%}  "
              f"repaired {t['repaired']['metric']:.2%}  compress {result.report['seconds']['total']:.0f} s "
              f"({result.report['seconds']['cpu_total']:.0f} CPU-s)  "
              f"load {load_before[0]:.1f}", flush=True)
    write_json(args.out, {"format": FORMAT, "remove": args.remove, "runs": rows, "note": args.note,
                          "target": "at most 1.0 point below unpruned test accuracy, under 5 minutes on 2 cores",
                          "provenance": provenance(loaded, task="movie-sentiment", split="test",
                                                   n_examples=test.n_examples, method="compress")})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
