"""Every head scorer on one model: cost, agreement with exact ablation, and the metric with a share of
the heads removed, without and with the library's retraining-free repair.

    .venv/bin/python benchmarks/scorers.py                    # the default: 20-60 min on 2 CPU cores
    .venv/bin/python benchmarks/scorers.py --model smollm2 --only gradient,fisher,flap,activation,random

What it measures and writes, in full: benchmarks/README.md, ``scorers.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.cli.common import fmt  # noqa: E402
from pruning_core.core.heads import HeadMask, HeadScores  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.modeling.presets import remove_least_important  # noqa: E402
from pruning_core.compress import evaluate_repaired  # noqa: E402
from pruning_core.evaluation.results import provenance, write_json  # noqa: E402
from pruning_core.scoring import ScoreConfig, get_scorer  # noqa: E402
from pruning_core.scoring.verify import verify_scores  # noqa: E402
from pruning_core.tasks import default_score_split, get_task  # noqa: E402

FORMAT = "headprune.bench_scorers/2"
RESULTS = ROOT / "benchmarks" / "results"
# (label, scorer, atp baseline, seeds)
RUNS = [("gradient", "gradient", "zero", 1), ("fisher", "fisher", "zero", 1), ("atp-zero", "atp", "zero", 1),
        ("atp-mean", "atp", "mean", 1), ("atp-corrupt", "atp", "corrupt", 1), ("flap", "flap", "zero", 1),
        ("activation", "activation", "zero", 1), ("entropy", "entropy", "zero", 1),
        ("confidence", "confidence", "zero", 1), ("random", "random", "zero", 3)]
STEPS = ("verify", "repair")     # what --skip may leave out besides a scorer


@dataclass(frozen=True)
class Setup:
    """One model, its task and the sizes that fit the 2-core machines (each overridable on the command line)."""

    model: str
    task: str
    fractions: tuple[float, ...]
    score_limit: int                     # scoring examples, also repair's calibration examples
    verify_limit: int                    # validation examples every exact ablation is measured on
    test_limit: int                      # test examples the metric is measured on
    k: int = 10                          # heads checked at each end of the ranking
    max_length: int = 128                # tokens per example (a language model's window)
    kinds: tuple[str, ...] | None = None  # the attention kinds pruned (None: all)
    score_split: str | None = None       # None: default_score_split (train where the task has one)


SETUPS = {
    "default": Setup("default", "movie-sentiment", (0.3, 0.5), 512, 256, 500),
    "mpnet": Setup("mpnet", "movie-sentiment", (0.3, 0.5), 256, 128, 500),
    "smollm2": Setup("smollm2", "movie-text", (0.1, 0.25), 32, 16, 64, k=5),
    "whisper-base": Setup("whisper-base", "movie-speech", (0.25,), 8, 8, 10, k=5, kinds=("decoder_self", "cross"),
                          score_split="validation"),     # movie-speech has no train split: not the test one
}


def prune_mask(scores: HeadScores, fraction: float, seed: int, kinds: tuple[str, ...] | None) -> HeadMask:
    """The round(fraction * heads of ``kinds``) lowest-ranked heads of ``kinds`` removed (all kinds: as the curve)."""
    if kinds is None:
        return remove_least_important(scores, fraction, seed=seed)
    heads = [h for h in scores.ranked(seed=seed) if h[0] in kinds]
    return HeadMask.from_removed(scores.layout, heads[:round(fraction * len(heads))])


def point(res) -> dict:
    low, high = res.interval if res.interval else (None, None)
    return {"metric": res.metric, "low": low, "high": high, "loss": res.loss}


def parse_skips(items: list[str]) -> dict[str, str]:
    labels = {r[0] for r in RUNS}
    skips = {}
    for item in items:
        name, _, why = item.partition("=")
        if name not in STEPS and name not in labels:
            raise SystemExit(f"--skip {name!r}: give one of {', '.join(STEPS)} or a scorer label "
                             f"({', '.join(sorted(labels))}), as NAME=WHY")
        if not why.strip():
            raise SystemExit(f"--skip {name}: say why, as {name}=WHY (it is recorded in the file)")
        skips[name] = why.strip()
    return skips


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(SETUPS), default="default")
    p.add_argument("--score-limit", type=int, help="scoring and calibration examples (default: the model's setup)")
    p.add_argument("--verify-limit", type=int)
    p.add_argument("--test-limit", type=int)
    p.add_argument("--k", type=int)
    p.add_argument("--fractions", help="shares of heads removed, comma-separated (default: the model's setup)")
    p.add_argument("--batch-size", type=int, default=32, help="scoring and repair batch")
    p.add_argument("--eval-batch", type=int, default=64)
    p.add_argument("--only", default="", help="comma-separated labels to run, in this order (default: all)")
    p.add_argument("--skip", action="append", default=[], metavar="NAME=WHY",
                   help=f"leave out a step ({', '.join(STEPS)}) or a scorer label, saying why")
    p.add_argument("--note", default="", help="recorded in the file (say why sizes were reduced)")
    p.add_argument("--out", help="default: benchmarks/results/scorers.json (default) or scorers-MODEL.json")
    p.add_argument("--merge", action="store_true",
                   help="keep the rows already in --out for scorers not run now (same sizes only): a run cut "
                        "short is completed with --only LABELS --merge")
    args = p.parse_args(argv)
    base = SETUPS[args.model]
    setup = Setup(base.model, base.task,
                  tuple(float(f) for f in args.fractions.split(",")) if args.fractions else base.fractions,
                  args.score_limit or base.score_limit, args.verify_limit or base.verify_limit,
                  args.test_limit or base.test_limit, args.k or base.k, base.max_length, base.kinds, base.score_split)
    skips = parse_skips(args.skip)
    wanted = {s for s in args.only.split(",") if s}
    for label, *_ in RUNS:
        if wanted and label not in wanted and label not in skips:
            skips[label] = f"left out by --only{': ' + args.note if args.note else ''}"
    out = Path(args.out or RESULTS / ("scorers.json" if args.model == "default" else f"scorers-{args.model}.json"))
    kept, earlier_note = previous_rows(out, setup, args.eval_batch, args.batch_size) if args.merge else ([], "")
    if earlier_note:
        args.note = f"{earlier_note} Rows added by a later run (--merge): {args.note or 'no note'}"
    run(setup, args, skips, out, kept)
    return 0


SAME_SIZES = ("score_limit", "verify_limit", "k", "test_limit", "max_length", "fractions", "batch_size", "eval_batch")


def previous_rows(out: Path, setup: Setup, eval_batch: int, batch_size: int) -> tuple[list[dict], str]:
    """The rows and note of ``out`` (``--merge``), refused unless that run used the same model, task and sizes."""
    if not out.exists():
        return [], ""
    old = json.loads(out.read_text())
    settings = old["provenance"]["settings"]
    now = {"score_limit": setup.score_limit, "verify_limit": setup.verify_limit, "k": setup.k,
           "test_limit": setup.test_limit, "max_length": setup.max_length, "fractions": list(setup.fractions),
           "batch_size": batch_size, "eval_batch": eval_batch}
    differ = {k: (settings.get(k), now[k]) for k in SAME_SIZES if settings.get(k) != now[k]}
    if old.get("model") != setup.model or old.get("task") != setup.task or differ:
        raise SystemExit(f"--merge: {out} was measured with other settings ({old.get('model')} on {old.get('task')}; "
                         f"differing (file, now): {differ}); give the same sizes, or another --out.")
    return old["rows"], old.get("note", "")


def plan(only: str, skips: dict[str, str], kept: list[dict]) -> tuple[list[tuple], list[dict]]:
    """(the runs to measure, in ``--only``'s order; the rows of ``kept`` not measured again)."""
    order = {label: i for i, label in enumerate(only.split(","))} if only else {}
    todo = sorted((r for r in RUNS if r[0] not in skips), key=lambda r: order.get(r[0], 0))
    return todo, [r for r in kept if r["label"] not in {t[0] for t in todo}]


def run(setup: Setup, args, skips: dict[str, str], out: Path, kept: list[dict] | None = None) -> None:
    """Measure every scorer not in ``skips``; ``kept``: rows of an earlier run (``--merge``) not measured again."""
    started, load_before = time.perf_counter(), os.getloadavg()
    loaded = load_model(setup.model, attn_implementation="eager")   # entropy / confidence read attention weights
    task = get_task(setup.task)
    score_split = setup.score_split or default_score_split(task)
    encode = dict(max_length=setup.max_length)
    verify_data = None if "verify" in skips else task.encode(loaded, "validation", setup.verify_limit, **encode)
    test_data = task.encode(loaded, "test", setup.test_limit, **encode)
    calibration = None if "repair" in skips else task.encode(loaded, score_split, setup.score_limit, **encode)
    full = task.evaluate(loaded, test_data, batch_size=args.eval_batch)
    print(f"{setup.model} on {setup.task}: unpruned {full.metric_name} {fmt(full.metric_name, full.metric)}", flush=True)
    losses: dict = {}                              # exact ablations, shared by every scorer
    rows = []
    state = dict(setup=setup, args=args, skips=skips, out=out, loaded=loaded, task=task, score_split=score_split,
                 full=full, test_data=test_data, verify_data=verify_data, calibration=calibration, rows=rows,
                 losses=losses, started=started, load_before=load_before)
    todo, earlier = plan(args.only, skips, kept or [])
    rows.extend(earlier)
    if earlier:
        print(f"kept from {out}: {', '.join(r['label'] for r in earlier)}", flush=True)
    for i, (label, name, baseline, seeds) in enumerate(todo):
        state["pending"] = [r[0] for r in todo[i:]]
        rows.append(score_row(state, label, name, baseline, seeds))
        state["pending"] = [r[0] for r in todo[i + 1:]]
        write(state, done=False)
    print_table(rows, full, setup.fractions)
    write(state, done=True)


def score_row(s: dict, label: str, name: str, baseline: str, seeds: int) -> dict:
    """One scorer (each seed): score, verify, and every fraction's metric alone and repaired."""
    setup, args, loaded, task = s["setup"], s["args"], s["loaded"], s["task"]
    row = {"label": label, "scorer": name, "baseline": baseline if name == "atp" else None, "seeds": seeds,
           "score_seconds": [], "load_1min_at_scoring": [], "spearman": [], "verify_pairs": [],
           "points": {str(f): [] for f in setup.fractions}}
    for seed in range(seeds):
        config = ScoreConfig(split=s["score_split"], limit=setup.score_limit, batch_size=args.batch_size, seed=seed,
                             baseline=baseline, max_length=setup.max_length)
        row["load_1min_at_scoring"].append(round(os.getloadavg()[0], 2))
        t0 = time.perf_counter()
        result = get_scorer(name).score(loaded, task, config)
        row["score_seconds"].append(round(time.perf_counter() - t0, 2))
        rho = None
        if s["verify_data"] is not None:
            check = verify_scores(loaded, task, s["verify_data"], result, setup.k, batch_size=args.eval_batch,
                                  seed=seed, losses=s["losses"])
            rho = check.spearman
            row["spearman"].append(rho)
            row["verify_pairs"].append([[q.kind, q.layer, q.head, q.group, q.estimate, q.exact_delta_loss]
                                        for q in check.pairs])
        line = []
        for f in setup.fractions:
            mask = prune_mask(result.ranking_scores, f, seed, setup.kinds)
            alone = task.evaluate(loaded, s["test_data"], mask, batch_size=args.eval_batch)
            entry = {"heads_removed": len(mask.removed()), **point(alone), "repaired": None}
            text = f"{int(round(f * 100))}%: {fmt(alone.metric_name, alone.metric)}"
            if s["calibration"] is not None:
                t1 = time.perf_counter()
                fixed, tuned = evaluate_repaired(loaded, task, s["test_data"], mask, s["calibration"],
                                                 bias_compensation=True, batch_size=args.batch_size)
                entry["repaired"] = {**point(fixed), "repair_seconds": round(tuned.seconds, 1),
                                     "repair_and_eval_seconds": round(time.perf_counter() - t1, 1),
                                     "load_1min": round(os.getloadavg()[0], 2)}
                text += f" -> {fmt(fixed.metric_name, fixed.metric)}"
            row["points"][str(f)].append(entry)
            line.append(text)
        rho_text = "skipped" if rho is None and s["verify_data"] is None else (None if rho is None else round(rho, 3))
        print(f"{label:12s} seed {seed}: {row['score_seconds'][-1]:6.1f} s  Spearman {rho_text}  " + "  ".join(line),
              flush=True)
    return row


def write(s: dict, done: bool) -> None:
    """Write the file (after every scorer, so a run cut short keeps what it measured)."""
    setup, args, full, test_data, verify_data, calibration = (s["setup"], s["args"], s["full"], s["test_data"],
                                                               s["verify_data"], s["calibration"])
    settings = {"score_split": s["score_split"], "score_limit": setup.score_limit, "verify_split": "validation",
                "verify_limit": setup.verify_limit, "k": setup.k, "test_split": "test",
                "test_limit": setup.test_limit, "max_length": setup.max_length, "batch_size": args.batch_size,
                "eval_batch": args.eval_batch, "fractions": list(setup.fractions),
                "kinds_pruned": list(setup.kinds) if setup.kinds else "all", "normalize": "each scorer's default",
                "repair": None if calibration is None else {
                    "function": "pruning_core.compress.evaluate_repaired (as curve --repair)", "bias_compensation": True,
                    "calibration_split": calibration.split, "calibration_examples": calibration.n_examples},
                "heads_ablated_exactly": max(0, len(s["losses"]) - 1)}
    low, high = full.interval if full.interval else (None, None)
    out = {"format": FORMAT, "model": s["loaded"].model_id, "task": setup.task, "metric_name": full.metric_name,
           "unpruned": {"metric": full.metric, "low": low, "high": high, "loss": full.loss},
           "total_heads": s["loaded"].layout.total_heads, "n_test": test_data.n_examples,
           "n_verify": verify_data.n_examples if verify_data is not None else None, "complete": done,
           "skipped": [{"what": k, "why": v} for k, v in s["skips"].items()    # rows kept by --merge were measured
                       if k not in {r["label"] for r in s["rows"]}],
           "not_reached": s.get("pending", []),     # scorers still to run when the file was written (a run cut short)
           "note": args.note, "rows": s["rows"],
           "seconds": round(time.perf_counter() - s["started"], 1),
           "machine": {"cpus": os.cpu_count(), "load_before": [round(x, 2) for x in s["load_before"]],
                       "load_after": [round(x, 2) for x in os.getloadavg()],
                       "note": "a shared 2-core machine: wall times include other processes' load"},
           "provenance": provenance(s["loaded"], task=setup.task, split="test", n_examples=test_data.n_examples,
                                    method="bench_scorers", settings=settings)}
    path = write_json(s["out"], out)
    if done:
        print(f"wrote {path}")


def print_table(rows: list[dict], full, fractions: tuple[float, ...]) -> None:
    name = full.metric_name
    print(f"\nunpruned {name} {fmt(name, full.metric)}")
    print(f"{'scorer':12s} {'score s':>8s} {'Spearman':>9s} "
          + " ".join(f"{f'{int(round(f * 100))} % / repaired':>22s}" for f in fractions))

    def mean(xs: list) -> float | None:
        xs = [x for x in xs if x is not None]
        return sum(xs) / len(xs) if xs else None
    for r in rows:
        rho = mean(r["spearman"])
        cells = []
        for f in fractions:
            pts = r["points"][str(f)]
            alone = mean([q["metric"] for q in pts])
            fixed = mean([q["repaired"]["metric"] if q["repaired"] else None for q in pts])
            cells.append(f"{fmt(name, alone)} / {fmt(name, fixed) if fixed is not None else '-'}")
        print(f"{r['label']:12s} {mean(r['score_seconds']):8.1f} {'-' if rho is None else f'{rho:.3f}':>9s} "
              + " ".join(f"{c:>22s}" for c in cells))


if __name__ == "__main__":
    raise SystemExit(main())
