"""Retraining-free compression of the default (MiniLM-L6, movie-sentiment) to 36 of 72 heads removed.

    .venv/bin/python benchmarks/compress.py                          # the runs below; minutes each on 2 cores
    .venv/bin/python benchmarks/compress.py --only fisher-1024       # one of them

What it measures and writes, in full: benchmarks/README.md, ``compress.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.compress import Budget, CompressConfig, compress, summary_json  # noqa: E402
from pruning_core.evaluation.results import provenance, write_json  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

FORMAT = "headprune.bench_compress/1"
RESULTS = ROOT / "benchmarks" / "results"
# (label, scorer, calibration examples, normalise per layer, bias compensation, scales and bias fitted together,
#  least-squares target, rearrangement[, CompressConfig's later options: choose, head_tokens, ffn, damping])
RUNS = [("fisher-512-damped", "fisher", 512, False, True, False, "output", True, {"damping": 1.0}),
        ("fisher-512-residual-ffn-damped", "fisher", 512, False, True, False, "residual", True,
         {"ffn": True, "damping": 1.0}),
        ("fisher-512-ffn", "fisher", 512, False, True, False, "output", True, {"ffn": True}),
        ("fisher-512-residual-ffn", "fisher", 512, False, True, False, "residual", True, {"ffn": True}),
        ("fisher-512-residual-ffn-head-tokens", "fisher", 512, False, True, False, "residual", True,
         {"ffn": True, "head_tokens": True}),
        ("fisher-512-loss", "fisher", 512, False, True, False, "output", True, {"choose": "loss"}),
        ("fisher-512-normed", "fisher", 512, False, True, False, "normed", True),
        ("fisher-512-head-tokens", "fisher", 512, False, True, False, "output", True, {"head_tokens": True}),
        ("fisher-512-normed-head-tokens", "fisher", 512, False, True, False, "normed", True, {"head_tokens": True}),
        ("fisher-512-residual", "fisher", 512, False, True, False, "residual", True),
        ("fisher-1024-residual", "fisher", 1024, False, True, False, "residual", True),
        ("fisher-512-residual-no-rearrange", "fisher", 512, False, True, False, "residual", False),
        ("gradient-512-residual", "gradient", 512, True, True, False, "residual", True),
        ("fisher-2048-residual", "fisher", 2048, False, True, False, "residual", True),
        ("fisher-512-residual-fitted-bias", "fisher", 512, False, True, True, "residual", True),
        ("fisher-512-residual-no-bias", "fisher", 512, False, False, False, "residual", True),
        ("gradient-512-residual-raw", "gradient", 512, False, True, False, "residual", True),
        ("fisher-1024", "fisher", 1024, False, True, False, "output", True),
        ("fisher-512-no-rearrange", "fisher", 512, False, True, False, "output", False),
        ("fisher-512", "fisher", 512, False, True, False, "output", True),
        ("gradient-512", "gradient", 512, True, True, False, "output", True),
        ("fisher-512-fitted-bias", "fisher", 512, False, True, True, "output", True),
        ("fisher-512-no-bias", "fisher", 512, False, False, False, "output", True),
        ("fisher-2048", "fisher", 2048, False, True, False, "output", True)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--remove", type=float, default=0.5)
    p.add_argument("--only", default="", help="comma-separated labels to run (default: all)")
    p.add_argument("--note", default="", help="recorded in the file")
    p.add_argument("--out", default=str(RESULTS / "compress.json"))
    p.add_argument("--merge", action="store_true", help="keep the runs already in --out that are not run again")
    args = p.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    unknown = sorted(set(only) - {r[0] for r in RUNS})
    if unknown:
        p.error(f"unknown labels {unknown}; choose from {[r[0] for r in RUNS]}")
    loaded = load_model("default", device="cpu")
    task = get_task("movie-sentiment")
    test = task.encode(loaded, "test", None)
    rows, kept = [], _previous(Path(args.out)) if args.merge else []
    unpruned, alone = None, {}                    # alone: mask JSON -> the mask's evaluation without repair
    runs = sorted((r for r in RUNS if r[0] in only), key=lambda r: only.index(r[0])) if only else RUNS
    for label, scorer, calibration, normalize, bias, fit_bias, target, rearrange, *extra in runs:
        extra = extra[0] if extra else {}                # choose, head_tokens
        load_before, start, cpu = os.getloadavg(), time.perf_counter(), time.process_time()
        result = compress(loaded, task, CompressConfig(Budget("remove", args.remove), scorer=scorer,
                                                       calibration=calibration, normalize=normalize,
                                                       bias_compensation=bias, fit_bias=fit_bias, target=target,
                                                       rearrange=rearrange, **extra))
        unpruned = unpruned or task.evaluate(loaded, test, None)
        key = json.dumps(result.mask.to_json(), sort_keys=True)
        alone[key] = alone.get(key) or task.evaluate(loaded, test, result.mask)
        repaired = task.evaluate(loaded.derive(result.model), test, None)
        evaluations = summary_json({"unpruned": unpruned, "pruned": alone[key], "repaired": repaired})
        rows.append({"label": label, "scorer": scorer, "calibration": calibration, "normalize": normalize,
                     "bias_compensation": bias, "fit_bias": fit_bias, "ls_target": target, "rearrange": rearrange,
                     "choose": extra.get("choose", "residual"), "head_tokens": extra.get("head_tokens", False),
                     "ffn": extra.get("ffn", False), "damping": extra.get("damping", 0.0),
                     "feed_forward": result.report.repair.get("feed_forward"),
                     "heads_removed": result.report.heads_removed,
                     "swaps": result.report.rearrangement.get("swaps"), "test": evaluations,
                     "seconds": result.report.seconds, "wall_seconds_with_evaluation": time.perf_counter() - start,
                     "cpu_seconds_with_evaluation": time.process_time() - cpu, "torch_threads": torch.get_num_threads(),
                     "repair_layers": result.report.repair.get("layers"),
                     "repaired_predictions": list(repaired.predictions),    # for paired tests between rows
                     "load_before": [round(x, 2) for x in load_before],
                     "load_after": [round(x, 2) for x in os.getloadavg()]})
        t = evaluations
        print(f"{label:20s} unpruned {t['unpruned']['metric']:.2%}  pruned {t['pruned']['metric']:.2%}  "
              f"repaired {t['repaired']['metric']:.2%}  compress {result.report.seconds['total']:.0f} s "
              f"({result.report.seconds['cpu_total']:.0f} CPU-s)  "
              f"load {load_before[0]:.1f}", flush=True)
        rows_now = rows + [r for r in kept if r["label"] not in {x["label"] for x in rows}]
        _write(args, loaded, test, rows_now)         # after every run: a stopped benchmark keeps what it measured
    print(f"wrote {args.out}")
    return 0


def _previous(path: Path) -> list[dict]:
    """The runs already in ``path`` (none when it does not exist)."""
    runs = json.loads(path.read_text())["runs"] if path.exists() else []
    return [{"ls_target": "output", "rearrange": True, "choose": "residual", "head_tokens": False,
             "ffn": False, "damping": 0.0} | r for r in runs]


def _write(args, loaded, test, rows: list[dict]) -> None:
    write_json(args.out, {"format": FORMAT, "remove": args.remove, "runs": rows, "note": args.note,
                          "target": "at most 1.0 point below unpruned test accuracy, under 5 minutes on 2 cores",
                          "provenance": provenance(loaded, task="movie-sentiment", split="test",
                                                   n_examples=test.n_examples, method="compress")})


if __name__ == "__main__":
    raise SystemExit(main())
