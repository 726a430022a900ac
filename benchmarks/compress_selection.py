"""Can held-out data pick a better compressed model? Several budget-meeting masks, each repaired, chosen on validation.

    .venv/bin/python benchmarks/compress_selection.py            # about 5 minutes on 2 cores

What it measures and writes, in full: benchmarks/README.md, ``compress_selection.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.compress import Budget, CompressConfig, compress  # noqa: E402
from pruning_core.evaluation.results import provenance, write_json  # noqa: E402
from pruning_core.evaluation.stats import spearman  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

FORMAT = "headprune.bench_compress_selection/1"
RESULTS = ROOT / "benchmarks" / "results"
TARGET_POINTS = 1.0           # issue 20: at most this many points of test accuracy lost


def candidates(remove: float, min_heads: tuple[int, ...]) -> list[tuple[str, CompressConfig]]:
    """(label, config) of every candidate: both rankings times each fewest-heads-per-layer."""
    return [(f"{'normalized' if norm else 'raw'}-min{m}",
             CompressConfig(Budget("remove", remove), normalize=norm, min_heads_per_layer=m))
            for norm in (False, True) for m in min_heads]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--remove", type=float, default=0.5)
    p.add_argument("--min-heads", default="1,2,3,4", help="fewest heads a layer keeps, comma-separated")
    p.add_argument("--note", default="", help="recorded in the file")
    p.add_argument("--out", default=str(RESULTS / "compress_selection.json"))
    args = p.parse_args(argv)
    loaded = load_model("default", device="cpu")
    task = get_task("movie-sentiment")
    sets = {s: task.encode(loaded, s, None) for s in ("validation", "test")}
    unpruned = {s: task.evaluate(loaded, d, None) for s, d in sets.items()}
    started, load_before = time.perf_counter(), os.getloadavg()
    rows, seen = [], {}
    for label, config in candidates(args.remove, tuple(int(m) for m in args.min_heads.split(","))):
        clock = time.perf_counter()
        result = compress(loaded, task, config)
        key = json.dumps(result.mask.to_json(), sort_keys=True)
        if key in seen:
            print(f"{label:16s} the same mask as {seen[key]}", flush=True)
            continue
        seen[key] = label
        repaired = loaded.derive(result.model)
        ev = {s: task.evaluate(repaired, d, None) for s, d in sets.items()}
        alone = {s: task.evaluate(loaded, d, result.mask) for s, d in sets.items()}
        kept = {k: [sum(r) for r in rows_] for k, rows_ in result.mask.kinds.items()}
        rows.append({"label": label, "normalize": config.normalize, "min_heads_per_layer": config.min_heads_per_layer,
                     "kept_per_layer": kept, "mask": result.mask.to_json(),
                     "alone": {s: {"metric": e.metric, "loss": e.loss} for s, e in alone.items()},
                     "repaired": {s: {"metric": e.metric, "loss": e.loss, "interval": list(e.interval)}
                                  for s, e in ev.items()},
                     "compress_seconds": result.report.seconds["total"],
                     "seconds_with_evaluation": time.perf_counter() - clock})
        print(f"{label:16s} kept {kept}  repaired: validation {ev['validation'].metric:.2%} "
              f"(loss {ev['validation'].loss:.4f})  test {ev['test'].metric:.2%}", flush=True)
    by_accuracy = max(rows, key=lambda r: r["repaired"]["validation"]["metric"])
    by_loss = min(rows, key=lambda r: r["repaired"]["validation"]["loss"])
    floor = unpruned["test"].metric - TARGET_POINTS / 100

    def picked(row: dict, rule: str) -> dict:
        test = row["repaired"]["test"]["metric"]
        return {"rule": rule, "label": row["label"], "test_accuracy": test,
                "points_lost": 100 * (unpruned["test"].metric - test), "meets_target": test >= floor}

    summary = {"unpruned": {s: {"metric": e.metric, "loss": e.loss} for s, e in unpruned.items()},
               "target_test_accuracy": floor,
               "picked": [picked(by_accuracy, "highest validation accuracy"),
                          picked(by_loss, "lowest validation loss")],
               "best_on_test_in_hindsight": max(r["repaired"]["test"]["metric"] for r in rows),
               "spearman_validation_vs_test_accuracy": spearman(
                   [r["repaired"]["validation"]["metric"] for r in rows],
                   [r["repaired"]["test"]["metric"] for r in rows])}
    for row in summary["picked"]:
        print(f"{row['rule']}: {row['label']}, test {row['test_accuracy']:.2%} "
              f"({row['points_lost']:.2f} points lost; target {'met' if row['meets_target'] else 'not met'})")
    print(f"Spearman(validation, test) over {len(rows)} candidates: "
          f"{summary['spearman_validation_vs_test_accuracy']:.2f}")
    write_json(args.out, {"format": FORMAT, "remove": args.remove, "candidates": rows, "summary": summary,
                          "seconds": time.perf_counter() - started, "note": args.note,
                          "machine": {"cpus": os.cpu_count(), "load_before": [round(x, 2) for x in load_before],
                                      "load_after": [round(x, 2) for x in os.getloadavg()]},
                          "provenance": provenance(loaded, task=task.name, split="validation+test",
                                                   n_examples=sum(d.n_examples for d in sets.values()),
                                                   method="bench_compress_selection",
                                                   settings={"remove": args.remove, "min_heads": args.min_heads})})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
