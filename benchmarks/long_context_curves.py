"""Long-context curves: RULER-style accuracy against the share of key/value heads streaming, per policy, on
hundreds of test examples (issue 47, goal 1; DuoAttention, RazorAttention, kvpress's RULER benchmark).

    .venv/bin/python benchmarks/long_context_curves.py --models smollm2 --tasks niah-single --lengths 2048 \
        --fractions 0.5 --limit 100                   # one slice; ~2 s an example at 2k (sdpa) on 2 quiet CPU cores

Policies full, retrieval, razor (retrieval and induction heads kept full), budgets (per-head token budgets at the
retrieval policy's memory), random-S and streaming (every head); each row: accuracy (all or nothing), Wilson
interval, McNemar p vs full, RULER's score (the share of answers found) and the decoded answers, KV MiB, kvpress's
compression ratio, PruLong's footprint. The
JSON is written after every row and a rerun skips the rows it has. In full: benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.analysis.roles import compute_roles  # noqa: E402
from pruning_core.core.io.codec import LONG_CONTEXT_CURVES_FORMAT  # noqa: E402
from pruning_core.bench import load_average  # noqa: E402
from pruning_core.core.heads import HeadScores  # noqa: E402
from pruning_core.core.io.storage import utc_now, write_json  # noqa: E402
from pruning_core.evaluation.results import provenance, read_json  # noqa: E402
from pruning_core.evaluation.stats import paired_correctness, wilson_interval  # noqa: E402
from pruning_core.modeling.kv import kv_accounting, kv_budgets, kv_policy as kvp  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402
from pruning_core.tasks.data import ruler  # noqa: E402
from live_common import machine  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = LONG_CONTEXT_CURVES_FORMAT
MODELS = ("smollm2", "qwen2.5-0.5b")
TASKS = (*ruler.RULER_KINDS, "icl-repetition", *ruler.ICL_FAR_KINDS)   # icl-repetition: skipped (fits sink+window)
POLICIES = ("full", "retrieval", "razor", "budgets", "streaming", "random")
KEEPS = 0.95                     # DuoAttention's claim: 50 % streaming keeps >= 95 % of the full cache's accuracy


# -- policies -------------------------------------------------------------------------------------------

def _ranks(scores: HeadScores) -> np.ndarray:
    """``[layers, heads]``: each decoder head's rank of its score, 0 (lowest) to 1 (highest)."""
    grid = np.array(scores.kinds[kvp.KIND], dtype=float)
    order = grid.ravel().argsort(kind="stable").argsort(kind="stable")
    return (order / max(1, order.size - 1)).reshape(grid.shape)


def razor_scores(retrieval: HeadScores, induction: HeadScores) -> HeadScores:
    """RazorAttention-style: a head counts as much as the larger of its retrieval and induction ranks."""
    both = np.maximum(_ranks(retrieval), _ranks(induction))
    return HeadScores.from_lists({kvp.KIND: both.tolist()})


def conditions(loaded, report, fractions, seeds, sink, window, length) -> dict[tuple, kvp.KVPolicy | None]:
    """``(policy, fraction, seed) -> KVPolicy`` (None: the full cache) for every condition of one model at ``length``
    tokens. "budgets" (HeadKV's split) keeps as many entries as "retrieval" at the same fraction: every head the
    streaming sink and window, the rest given out in proportion to the heads' retrieval scores."""
    kv_heads, groups = kvp.kv_heads_of(loaded), kvp.groups_of(loaded)
    retrieval, induction = report.head_scores("retrieval"), report.head_scores("induction")
    out: dict[tuple, kvp.KVPolicy | None] = {("full", 0.0, None): None}
    for f in fractions:
        out[("retrieval", f, None)] = kvp.from_scores(retrieval, groups, f, sink=sink, window=window,
                                                      source={"score_method": "role:retrieval"})
        out[("razor", f, None)] = kvp.from_scores(razor_scores(retrieval, induction), groups, f, sink=sink,
                                                  window=window, source={"score_method": "razor"})
        total = kv_budgets.total_of(out[("retrieval", f, None)], length)
        out[("budgets", f, None)] = kv_budgets.from_scores(retrieval, groups, total, context=length,
                                                           floor=sink + window, sink=sink,
                                                           source={"score_method": "role:retrieval"})
        for s in seeds:
            out[("random", f, s)] = kvp.random_policy(kv_heads, f, s, sink=sink, window=window)
    out[("streaming", 1.0, None)] = kvp.KVPolicy.all_streaming(kv_heads, sink, window)
    return out


def key(model: str, task: str, length: int, policy: str, fraction: float, seed) -> str:
    return f"{model}|{task}|{length}|{policy}|{fraction:g}|{'' if seed is None else seed}"


# -- the run --------------------------------------------------------------------------------------------

def measure(loaded, task, data, policy, full_row: dict | None, length: int) -> dict:
    """One condition's row (see the module docstring)."""
    t, cpu = time.perf_counter(), time.process_time()
    with kvp.applied(loaded, policy):        # budgets' many window sizes take the mask path (kv_policy.applied)
        res = task.evaluate(loaded, data, batch_size=1)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    correct = [int(x) for x in res.per_example]
    policy_or_full = policy or kvp.KVPolicy.full(kvp.kv_heads_of(loaded))
    memory = kvp.memory_report(policy_or_full, loaded, length)
    row = {"accuracy": sum(correct) / len(correct), "correct": sum(correct), "examples": len(correct),
           "wilson_95": list(wilson_interval(sum(correct), len(correct))), "per_example": correct,
           "ruler_score": res.extra["ruler_score"], "ruler_per_example": res.extra["ruler_scores"],   # the share found
           "decoded": res.extra["decoded"],
           "kv_mib": memory["kv_bytes"] / 2 ** 20, "full_kv_mib": memory["full_kv_bytes"] / 2 ** 20,
           "compression_ratio": kv_accounting.compression_ratio(policy_or_full, length),
           "footprint_ratio": kv_accounting.kv_footprint(policy_or_full, length, chunk=1),
           "sink": policy_or_full.sink, "window": policy_or_full.window,
           "streaming": [[int(x) for x in r] for r in policy_or_full.streaming],
           "seconds": round(seconds, 1), "seconds_per_example": round(seconds / len(correct), 2),
           "cpu_seconds": round(cpu, 1),     # the process's own CPU: wall seconds count a job stopped meanwhile
           "torch_threads": torch.get_num_threads(),
           "load_after": list(load_average())}
    if full_row is not None:
        only_full, only_this, p = paired_correctness(full_row["per_example"], correct)
        row["vs_full"] = {"only_full": only_full, "only_this": only_this, "mcnemar_p": p,
                          "share_of_full": row["accuracy"] / full_row["accuracy"] if full_row["accuracy"] else None}
    return row


def verdicts(rows: dict) -> list[dict]:
    """Where 50 % streaming keeps >= 95 % of the full cache's accuracy (DuoAttention's claim), per condition."""
    out = []
    for k, row in rows.items():
        model, task, length, policy, fraction, seed = k.split("|")
        if fraction == "0.5" and "vs_full" in row and row["vs_full"]["share_of_full"] is not None:
            out.append({"model": model, "task": task, "length": int(length), "policy": policy, "seed": seed or None,
                        "share_of_full": row["vs_full"]["share_of_full"],
                        "keeps_95": row["vs_full"]["share_of_full"] >= KEEPS})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--tasks", nargs="+", default=list(TASKS))
    ap.add_argument("--lengths", nargs="+", type=int, default=[2048, 4096])
    ap.add_argument("--fractions", nargs="+", type=float, default=[0.25, 0.5, 0.75])
    ap.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    ap.add_argument("--seeds", type=int, default=3, help="random policies: seeds 0..N-1")
    ap.add_argument("--limit", type=int, default=100, help="test examples per condition")
    ap.add_argument("--sink", type=int, default=128)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--attention", default="sdpa", choices=("sdpa", "eager"),
                    help="attention for the evaluations (the roles always read eager maps); the policies are exact "
                         "under both, sdpa is ~3x faster at 2k")
    ap.add_argument("--out", default=str(RESULTS / "long_context_curves.json"))
    args = ap.parse_args()
    out = Path(args.out)
    doc = read_json(out) if out.is_file() else {"format": FORMAT, "rows": {}, "models": {}}
    if doc.get("format") != FORMAT:
        raise SystemExit(f"{out} is not a {FORMAT} file; give another --out")
    doc.update(torch_threads=torch.get_num_threads(), cpus=os.cpu_count(), machine=machine())
    for model in args.models:
        t = time.perf_counter()
        report = compute_roles(load_model(model, attn_implementation="eager"), roles=["retrieval", "induction"], seed=0)
        loaded = load_model(model, attn_implementation=args.attention)
        doc["models"][model] = {"roles_seconds": round(time.perf_counter() - t, 1),
                                "provenance": provenance(loaded, method="long-context curves",
                                                         settings={k: v for k, v in vars(args).items()})}
        for task_name in args.tasks:
            task = get_task(task_name)
            for length in args.lengths:
                grid = {c: p for c, p in conditions(loaded, report, args.fractions, range(args.seeds), args.sink,
                                                   args.window, length).items() if c[0] in args.policies + ["full"]}
                data = task.encode(loaded, "test", args.limit, max_length=length)
                longest = max(t["tokens"] for t in data.texts)
                if longest <= args.sink + args.window:     # icl-repetition: 12 demonstrations, ~96 tokens
                    print(f"{model} {task_name} at {length}: skipped, every prompt ({longest} tokens at most) fits "
                          f"in the sink and window ({args.sink} + {args.window}): every policy is the full cache",
                          flush=True)
                    continue
                full_key = key(model, task_name, length, "full", 0.0, None)
                for (policy, fraction, seed), value in grid.items():
                    k = key(model, task_name, length, policy, fraction, seed)
                    if k in doc["rows"]:
                        continue
                    row = measure(loaded, task, data, value, doc["rows"].get(full_key), length)
                    row["prompt_tokens_median"] = float(np.median([t["tokens"] for t in data.texts]))
                    row["machine"], row["created"] = doc["machine"], utc_now()    # rows of one file span machines
                    doc["rows"][k] = row
                    doc["verdicts_50"] = verdicts(doc["rows"])
                    p = row.get("vs_full", {}).get("mcnemar_p")
                    lo, hi = row["wilson_95"]
                    print(f"{k}: {row['correct']}/{row['examples']} ({lo:.2f}-{hi:.2f})"
                          f"{'' if p is None else f', McNemar p {p:.3g}'}; KV {row['kv_mib']:.1f} MiB, "
                          f"compression {row['compression_ratio']:.2f}, footprint {row['footprint_ratio']:.2f}; "
                          f"{row['seconds']} s ({row['seconds_per_example']} s/example, load {row['load_after']})",
                          flush=True)
                    write_json(out, doc)
    print(f"wrote {write_json(out, doc)}")


if __name__ == "__main__":
    main()
