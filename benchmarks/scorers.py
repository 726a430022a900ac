"""Every head scorer on the default (MiniLM-L6, movie-sentiment): cost, agreement with exact ablation,
and the pruning curve at 30 % and 50 % of the heads removed.

    .venv/bin/python benchmarks/scorers.py          # 20-60 minutes on 2 CPU cores, depending on their load

For each scorer (gradient, fisher, atp with the zero / mean / corrupt baselines, flap, activation,
entropy, confidence, random over 3 seeds):

- the wall time of scoring the first 512 training snippets (``--score-limit``);
- Spearman's rank correlation between its ranking scores and the exact loss change of removing
  each of its K = 10 highest and 10 lowest heads alone, on the first 256 validation snippets
  (:func:`pruning_core.scoring.verify.verify_scores`; every head is ablated once and shared);
- test accuracy (first 500 test snippets, 95 % Wilson interval) with 30 % and 50 % of the heads
  removed in order of increasing ranking score: the masks ``pruning_curve`` builds at those points
  (the round(f * 72) least important heads, seeded ties), without the points in between.

Writes ``benchmarks/results/scorers.json`` (``headprune.bench_scorers/1``, with provenance and the
machine load before and after) and prints the table.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.models import load_model  # noqa: E402
from pruning_core.presets import remove_least_important  # noqa: E402
from pruning_core.results import provenance, write_json  # noqa: E402
from pruning_core.scoring import ScoreConfig, get_scorer  # noqa: E402
from pruning_core.scoring.verify import verify_scores  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

FORMAT = "headprune.bench_scorers/1"
RESULTS = ROOT / "benchmarks" / "results"
# (label, scorer, atp baseline, seeds)
RUNS = [("gradient", "gradient", "zero", 1), ("fisher", "fisher", "zero", 1), ("atp-zero", "atp", "zero", 1),
        ("atp-mean", "atp", "mean", 1), ("atp-corrupt", "atp", "corrupt", 1), ("flap", "flap", "zero", 1),
        ("activation", "activation", "zero", 1), ("entropy", "entropy", "zero", 1),
        ("confidence", "confidence", "zero", 1), ("random", "random", "zero", 3)]
FRACTIONS = (0.3, 0.5)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--score-limit", type=int, default=512)
    p.add_argument("--verify-limit", type=int, default=256)
    p.add_argument("--test-limit", type=int, default=500)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--only", default="", help="comma-separated labels to run (default: all)")
    p.add_argument("--note", default="", help="recorded in the file (say why sizes were reduced)")
    p.add_argument("--out", default=str(RESULTS / "scorers.json"))
    args = p.parse_args(argv)
    started, load_before = time.perf_counter(), os.getloadavg()
    loaded = load_model("default", attn_implementation="eager")
    task = get_task("movie-sentiment")
    verify_data = task.encode(loaded, "validation", args.verify_limit)
    test_data = task.encode(loaded, "test", args.test_limit)
    full = task.evaluate(loaded, test_data, batch_size=64)
    losses: dict = {}                              # exact ablations, shared by every scorer
    rows = []
    wanted = {s for s in args.only.split(",") if s}
    for label, name, baseline, seeds in RUNS:
        if wanted and label not in wanted:
            continue
        row = {"label": label, "scorer": name, "baseline": baseline if name == "atp" else None, "seeds": seeds,
               "score_seconds": [], "spearman": [], "points": {str(f): [] for f in FRACTIONS}}
        for seed in range(seeds):
            config = ScoreConfig(split="train", limit=args.score_limit, batch_size=args.batch_size, seed=seed,
                                 baseline=baseline)
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            result = get_scorer(name).score(loaded, task, config)
            row["score_seconds"].append(round(time.perf_counter() - t0, 2))
            row.setdefault("load_1min_at_scoring", []).append(round(load, 2))
            check = verify_scores(loaded, task, verify_data, result, args.k, batch_size=64, seed=seed, losses=losses)
            row["spearman"].append(check.spearman)
            row.setdefault("verify_pairs", []).append([[p.kind, p.layer, p.head, p.group, p.estimate,
                                                        p.exact_delta_loss] for p in check.pairs])
            for f in FRACTIONS:
                mask = remove_least_important(result.ranking_scores, f, seed=seed)
                res = task.evaluate(loaded, test_data, mask, batch_size=64)
                row["points"][str(f)].append({"heads_removed": len(mask.removed()), "accuracy": res.metric,
                                              "low": res.interval[0] if res.interval else None,
                                              "high": res.interval[1] if res.interval else None})
            print(f"{label:12s} seed {seed}: {row['score_seconds'][-1]:6.1f} s  Spearman "
                  f"{check.spearman if check.spearman is None else round(check.spearman, 3)}  "
                  + "  ".join(f"{int(f * 100)}%: {row['points'][str(f)][-1]['accuracy']:.4f}" for f in FRACTIONS),
                  flush=True)
        rows.append(row)
        write(args, loaded, task, full, test_data, verify_data, rows, losses, started, load_before, done=False)
    print_table(rows, full.metric)
    write(args, loaded, task, full, test_data, verify_data, rows, losses, started, load_before, done=True)
    return 0


def write(args, loaded, task, full, test_data, verify_data, rows, losses, started, load_before, done: bool) -> None:
    """Write the file (after every scorer, so a run cut short keeps what it measured)."""
    settings = {"score_split": "train", "score_limit": args.score_limit, "verify_split": "validation",
                "verify_limit": args.verify_limit, "k": args.k, "test_split": "test", "test_limit": args.test_limit,
                "batch_size": args.batch_size, "fractions": list(FRACTIONS), "normalize": "each scorer's default",
                "heads_ablated_exactly": len(losses) - 1}
    out = {"format": FORMAT, "model": loaded.model_id, "unpruned_accuracy": full.metric,
           "unpruned_interval": list(full.interval) if full.interval else None,
           "n_test": test_data.n_examples, "n_verify": verify_data.n_examples, "complete": done,
           "note": args.note, "rows": rows,
           "seconds": round(time.perf_counter() - started, 1),
           "machine": {"cpus": os.cpu_count(), "load_before": [round(x, 2) for x in load_before],
                       "load_after": [round(x, 2) for x in os.getloadavg()],
                       "note": "a shared 2-core machine: wall times include other processes' load"},
           "provenance": provenance(loaded, task=task.name, split="test", n_examples=test_data.n_examples,
                                    method="bench_scorers", settings=settings)}
    path = write_json(args.out, out)
    if done:
        print(f"wrote {path}")


def print_table(rows: list[dict], unpruned: float) -> None:
    print(f"\nunpruned test accuracy {unpruned:.4f}")
    print(f"{'scorer':12s} {'score s':>8s} {'Spearman':>9s} {'30 %':>7s} {'50 %':>7s}")
    for r in rows:
        mean = lambda xs: sum(xs) / len(xs)                                      # noqa: E731
        rho = [x for x in r["spearman"] if x is not None]
        acc = {f: mean([p["accuracy"] for p in r["points"][str(f)]]) for f in FRACTIONS}
        print(f"{r['label']:12s} {mean(r['score_seconds']):8.1f} {mean(rho) if rho else float('nan'):9.3f} "
              f"{acc[0.3]:7.4f} {acc[0.5]:7.4f}")


if __name__ == "__main__":
    raise SystemExit(main())
