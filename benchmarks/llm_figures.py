"""Pruning figures on the real SmolLM2-135M-Instruct (``headprune prepare --model smollm2``).

    OMP_NUM_THREADS=2 nice -n 5 .venv/bin/python benchmarks/llm_figures.py          # ~10-15 min on 2 cores
    OMP_NUM_THREADS=2 nice -n 5 .venv/bin/python benchmarks/llm_figures.py --model qwen2.5-0.5b \
        --fractions 0,0.1,0.25,0.5 --skip budget,speed,toggle --out benchmarks/results/qwen2.5-0.5b.json

What it measures and writes, in full: benchmarks/README.md, ``llm_figures.py``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.modeling import presets  # noqa: E402
from pruning_core.modeling.sources import catalog  # noqa: E402
from pruning_core.modeling.architectures import kv_groups_of  # noqa: E402
from pruning_core.bench import benchmark, flop_ceiling, speed_verdict  # noqa: E402
from pruning_core.evaluation.experiments import pruning_curve, seeded_curves  # noqa: E402
from pruning_core.core.heads import HeadMask, group_scores  # noqa: E402
from pruning_core.evaluation.metrics import get_metric  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.modeling.pruning import parameter_count_after  # noqa: E402
from pruning_core.evaluation.results import provenance  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.scoring import ScoreConfig, get_scorer  # noqa: E402
from pruning_core.evaluation.significance import compare  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
TASK, SPLIT, CONTEXT, BATCH = "movie-text", "validation", 128, 64
MAX_RISE = 0.05
K = "decoder_self"
SKIPPABLE = ("budget", "speed", "toggle")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def spearman(a: list[float], b: list[float]) -> float:
    def ranks(x):
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0.0] * len(x)
        for pos, i in enumerate(order):
            r[i] = float(pos)
        return r
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    return cov / (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5


def point(res, removed: int, total: int) -> dict:
    low, high = res.interval or (None, None)
    return {"heads_removed": removed, "fraction_removed": removed / total, "perplexity": res.metric,
            "low": low, "high": high, "seconds": res.seconds}


def budget_by_order(loaded, task, data, order: list, limit: float) -> dict:
    """Largest number of heads (removed in ``order``) with perplexity <= ``limit``, by bisection."""
    total = len(order)
    tried = {}

    def ok(n: int) -> bool:
        res = task.evaluate(loaded, data, HeadMask.from_removed(loaded.layout, order[:n]), batch_size=BATCH)
        tried[n] = res.metric
        return res.metric <= limit
    lo, hi = 0, total                  # ok(lo) holds; find the last n that holds (assumes one crossing)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return {"heads": lo, "fraction": lo / total, "tried": {str(k): v for k, v in sorted(tried.items())}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=64, help="validation documents the curves are measured on")
    ap.add_argument("--score-docs", type=int, default=128, help="train documents I_h is computed on")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seq-lens", default="128,512")
    ap.add_argument("--bench-batch", type=int, default=2)
    ap.add_argument("--out", default=str(RESULTS / "smollm2.json"))
    ap.add_argument("--model", default="smollm2", help="another language model (a folder) for a smoke run")
    ap.add_argument("--task", default=TASK, help="another language-model task (file:PATH.txt) for a smoke run")
    ap.add_argument("--fractions", default=None,
                    help="shares of heads removed on the curves, e.g. 0,0.1,0.25,0.5 (default: every 10 %%)")
    ap.add_argument("--skip", default="", help=f"sections to leave out, comma-separated: {', '.join(SKIPPABLE)}")
    args = ap.parse_args()
    fractions = [float(f) for f in args.fractions.split(",")] if args.fractions else None
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(SKIPPABLE):
        raise SystemExit(f"--skip takes {', '.join(SKIPPABLE)}; got {', '.join(sorted(skip - set(SKIPPABLE)))}")
    curve_kw = {"fractions": fractions} if fractions else {"step": 0.1}
    docs = args.docs
    started = time.perf_counter()
    weights = "see the model folder"
    if args.model in catalog.names():
        if not catalog.get(args.model).is_prepared():
            raise SystemExit(f"{args.model} is not prepared: run `headprune prepare --model {args.model}` first.")
        weights = json.loads((catalog.get(args.model).folder() / catalog.MANIFEST).read_text()).get("provenance", weights)
    loaded = load_model(args.model, device="cpu")
    task = get_task(args.task)
    split = SPLIT if task.distinct_split(SPLIT) else task.default_split
    score_split = "train" if task.distinct_split("train") else split
    data = task.encode(loaded, split, limit=docs, max_length=CONTEXT)
    total = loaded.layout.total_heads
    metric = get_metric(task.metric_name)
    load_at_start = os.getloadavg()
    dense_res = task.evaluate(loaded, data, None, batch_size=BATCH)
    load_after_dense = os.getloadavg()
    log(f"{data.n_examples} windows from {docs} documents, {dense_res.extra['tokens']} target tokens; {total} heads; "
        f"dense perplexity {dense_res.metric:.2f} in {dense_res.seconds:.1f} s")

    out = {"format": "headprune.llm_figures/1", "complete": False, "model": args.model, "weights": weights,
           "eval": {"task": args.task, "split": split, "documents": docs, "windows": data.n_examples,
                    "tokens": int(dense_res.extra["tokens"]), "context_length": CONTEXT,
                    "dense_perplexity": dense_res.metric,
                    "dense_interval": list(dense_res.interval) if dense_res.interval else None,
                    "dense_eval_seconds": dense_res.seconds},
           "threads": torch.get_num_threads(), "load_average_at_start": load_at_start,
           "provenance": provenance(loaded, task=args.task, split=split, n_examples=data.n_examples,
                                    method="llm_figures", settings=vars(args))}

    def save(**parts) -> None:
        out.update(parts, seconds=time.perf_counter() - started)
        write_json(args.out, out)

    timings = out.setdefault("timings", {})

    @contextlib.contextmanager
    def section(name: str):
        """Time a section (wall seconds, load average before and after) into ``timings``."""
        before, t0 = os.getloadavg(), time.perf_counter()
        yield
        timings[name] = {"seconds": time.perf_counter() - t0, "load_before": before, "load_after": os.getloadavg()}

    # -- I_h, and the curves -----------------------------------------------------------------------
    timings["dense_evaluation"] = {"seconds": dense_res.seconds, "load_before": load_at_start,
                                   "load_after": load_after_dense}
    cfg = ScoreConfig(split=score_split, limit=args.score_docs, max_length=CONTEXT, batch_size=16)
    with section("scores"):
        scores = get_scorer("gradient").score(loaded, task, cfg)
    log(f"I_h on {args.score_docs} train documents in {scores.seconds:.0f} s")
    with section("curve_by_ih"):
        by_ih = pruning_curve(loaded, task, data, get_scorer("gradient"), cfg, initial_scores=scores,
                              batch_size=BATCH, **curve_kw)
    save(scores={"method": "gradient (I_h)", "split": score_split, "documents": args.score_docs,
                 "normalize": scores.normalize, "seconds": scores.seconds}, curves={"by_ih": by_ih.to_json()})
    log("I_h curve done")
    with section("curves_random"):
        rand = seeded_curves(loaded, task, data, get_scorer("random"),
                             ScoreConfig(split=score_split, limit=8, seed=0), args.seeds, batch_size=BATCH, **curve_kw)
    save(curves={"by_ih": by_ih.to_json(), "random": rand.to_json()})
    log("random curves done")
    dense = by_ih.points[0].metric
    limit = dense * (1 + MAX_RISE)
    order = scores.ranking_scores.ranked(seed=0)

    # -- 5 % budget ------------------------------------------------------------------------------------
    if "budget" not in skip:
        with section("budget"):
            budget_ih = budget_by_order(loaded, task, data, order, limit)
        budget_random = []
        for s, _ in enumerate(rand.seeds):
            ok = [p.heads_removed for p in rand.points if p.seed_metrics and p.seed_metrics[s] <= limit]
            budget_random.append(max(ok) if ok else 0)
        save(budget_5pct={"limit_perplexity": limit, "by_ih": budget_ih,
                          "random_grid": {"heads_per_seed": budget_random, "resolution_heads": round(total / 10)}})
        log(f"5 % budget: I_h {budget_ih['heads']} heads; random (grid) {budget_random}")

    # -- groups ----------------------------------------------------------------------------------------
    groups = kv_groups_of(loaded.sites)
    ranking = scores.ranking_scores
    by_group = group_scores(ranking, groups)
    g_sum, g_best = [], []
    for layer, row in enumerate(groups[K]):
        for j, g in enumerate(row):
            g_sum.append(by_group.kinds[K][layer][j])
            g_best.append(max(ranking.kinds[K][layer][h] for h in g))
    n_groups = len(g_sum)
    bottom_groups = by_group.ranked(seed=0)[:n_groups // 2]
    group_heads = {(k, l, h) for k, l, j in bottom_groups for h in groups[k][l][j]}
    bottom_heads = set(order[:len(group_heads)])
    group_curve = []
    seen = set()
    with section("group_curve"):
        for f in fractions or [i / 10 for i in range(11)]:
            mask = presets.prune_by_group(ranking, groups, f)
            if mask.n_kept in seen:                    # a small model: a share that rounds to the same groups
                continue
            seen.add(mask.n_kept)
            res = task.evaluate(loaded, data, mask, batch_size=BATCH)
            group_curve.append(point(res, mask.n_total - mask.n_kept, total))
    save(groups={"n_groups": n_groups, "group_size": len(groups[K][0][0]),
                 "spearman_group_sum_vs_best_head": spearman(g_sum, g_best),
                 "bottom_half_groups_heads_among_bottom_heads": len(group_heads & bottom_heads) / len(group_heads),
                 "group_curve": group_curve,
                 "group_curve_note": "presets.prune_by_group: the lowest-I_h groups over all layers (layers may "
                                     "lose different numbers of groups: even groups, no K/V copies, but not a "
                                     "stock shape unless every layer loses the same number)"})
    log("group curve done")
    with section("uniform"):
        uniform = uniform_shapes(loaded, task, data, ranking, groups)
    save(uniform=uniform)
    log("uniform shapes done")

    if "speed" not in skip:
        with section("speed"):
            save(speed=speed_section(args, ranking, groups))
    if "toggle" not in skip:
        with section("toggle"):
            save(toggle=toggle_section(loaded, task, split, metric))
    save(complete=True, load_average_at_end=os.getloadavg())
    log(f"wrote {args.out} in {out['seconds']:.0f} s")


def speed_section(args, ranking, groups) -> list[dict]:
    """Physically pruned vs dense vs masked, half the query heads gone as whole groups by group I_h."""
    fast = load_model(args.model, device="cpu", attn_implementation="sdpa")
    half_groups = presets.prune_by_group(ranking, groups, 0.5)
    speed = []
    for seq in (int(s) for s in args.seq_lens.split(",")):
        bench = benchmark(fast, half_groups, batch_sizes=(args.bench_batch,), seq_len=seq, repeats=10, min_seconds=4)
        verdict = speed_verdict(bench)
        c = bench.comparisons[0]
        rows = {r.variant: r.latency for r in bench.rows}
        speed.append({"seq_len": seq, "batch_size": args.bench_batch, "speedup": c.speedup,
                      "paired_speedup": c.paired_speedup, "best_speedup": c.best_speedup,
                      "masked_over_dense": c.masked_ratio, "ceiling_speedup": c.ceiling_speedup,
                      "fraction_of_ceiling": c.fraction_of_ceiling, "cpu_share": c.cpu_share,
                      "verdict": {"kind": verdict.kind, "low": verdict.low, "high": verdict.high},
                      "latency": {k: v.to_json() for k, v in rows.items()}})
        log(f"seq {seq}: speed-up {c.speedup:.2f} (ceiling {c.ceiling_speedup:.2f})")
    return speed


def toggle_section(loaded, task, split: str, metric) -> dict:
    """The dashboard's live panel: one masked evaluation of its default subset + the paired comparison."""
    from app.model.cache import EVAL_BATCH
    from app.model.workload import click_eval_size
    from pruning_core.bench import budget

    size = click_eval_size(budget.example_cost(loaded.model.config, "language_model", CONTEXT))
    dash = task.encode(loaded, split, limit=size, max_length=CONTEXT)
    base = task.evaluate(loaded, dash, None, batch_size=EVAL_BATCH)
    toggles = []
    n_layers = len(loaded.layout.kinds[K])
    for layer in sorted({0, n_layers // 2, n_layers - 1}):
        mask = HeadMask.from_removed(loaded.layout, [(K, layer, 1)])
        t0 = time.perf_counter()
        res = task.evaluate(loaded, dash, mask, batch_size=EVAL_BATCH)
        compare(metric, base, res, None)
        toggles.append(time.perf_counter() - t0)
    log(f"toggle: median {statistics.median(toggles):.2f} s")
    return {"documents": size, "what": "one masked evaluation + paired comparison, a "
            "one-head mask each time (a cache miss, as after a click)", "batch_size": EVAL_BATCH,
            "windows": dash.n_examples, "seconds": toggles, "median_s": statistics.median(toggles),
            "min_s": min(toggles), "max_s": max(toggles)}


def uniform_shapes(loaded, task, data, ranking, groups) -> dict:
    """Every stock shape (same heads in every layer, even groups) and what it saves, with its perplexity.

    Two ways: drop whole key/value groups per layer (``uniform_by_group``: saves W_Q, W_K, W_V, W_O rows
    and the key/value cache) or ``k`` query heads of every group (``prune_k_per_group``: saves W_Q and W_O
    only; every key/value head, and so the cache, stays)."""
    sites = loaded.sites
    n_groups, size = len(groups[K][0]), len(groups[K][0][0])
    layers, head_dim = len(sites), sites[0].head_dim
    attention = sum(p.numel() for s in sites for m in (s.q, s.k, s.v, s.out) for p in m.parameters())
    params = sum(p.numel() for p in loaded.model.parameters())
    options = [("none", HeadMask.full(loaded.layout))]
    options += [(f"{g} of {n_groups} key/value groups per layer (uniform_by_group)",
                 presets.uniform_by_group(ranking, groups, g / n_groups)) for g in range(1, n_groups)]
    options += [(f"{k} of {size} query heads in every group (prune_k_per_group)",
                 presets.prune_k_per_group(ranking, groups, k)) for k in range(1, size)]
    rows = []
    for name, mask in options:
        rows_kept = mask.kinds[K]
        kv_kept = sum(1 for row_groups, row in zip(groups[K], rows_kept) for g in row_groups if any(row[h] for h in g))
        after = parameter_count_after(loaded.model, mask)
        ceiling = flop_ceiling(loaded, mask, CONTEXT)
        res = task.evaluate(loaded, data, mask, batch_size=BATCH)
        low, high = res.interval or (None, None)
        rows.append({"option": name, "heads_removed": mask.n_total - mask.n_kept,
                     "fraction_heads_removed": 1 - mask.n_kept / mask.n_total,
                     "per_layer": {"query_heads": sum(rows_kept[0]), "kv_heads": kv_kept // layers},
                     "parameters": after, "fraction_parameters_removed": 1 - after / params,
                     "fraction_attention_parameters_removed": (params - after) / attention,
                     "fraction_macs_removed_at_128": ceiling.removed_fraction, "macs_ceiling_speedup": ceiling.speedup,
                     "kv_cache_bytes_per_token_float32": 2 * (kv_kept // layers) * head_dim * layers * 4,
                     "perplexity": res.metric, "low": low, "high": high, "seconds": res.seconds})
        log(f"uniform {name}: perplexity {res.metric:.1f}, parameters -{100 * (1 - after / params):.1f} %")
    return {"parameters": params, "attention_parameters": attention, "groups_per_layer": n_groups,
            "group_size": size, "options": rows,
            "note": "every option has a stock shape (headprune prune writes num_attention_heads, "
                    "num_key_value_heads, head_dim); MACs from bench.flop_ceiling at 128 tokens"}

if __name__ == "__main__":
    main()
