"""KV-cache head policies on SmolLM2 (issue 41): single-needle accuracy at 1k tokens with half the key/value heads
streaming, chosen by retrieval score vs at random, beside the KV memory; and the causal test of a head role.

    .venv/bin/python benchmarks/long_context.py                      # ~10-25 min on 2 busy CPU cores
    .venv/bin/python benchmarks/long_context.py --limit 12 --context 2048
    .venv/bin/python benchmarks/long_context.py --task icl-repetition --role induction --no-kv --causal 0.05 \
        --limit 40 --out benchmarks/results/icl_causal.json          # the induction heads' causal test

What it measures and writes, in full: benchmarks/README.md, ``long_context.py``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.analysis.roles import compute_roles  # noqa: E402
from pruning_core.bench import load_average  # noqa: E402
from pruning_core.evaluation.results import provenance, write_json  # noqa: E402
from pruning_core.evaluation.significance import compare  # noqa: E402
from pruning_core.modeling.kv import kv_policy as kvp  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "headprune.long_context_bench/1"


def document(args, loaded, report, data, rows, timings, causal) -> dict:
    """The result so far (written after every condition, so a stopped run keeps what it measured)."""
    return {"format": FORMAT, "model": args.model, "task": args.task, "context": args.context,
            "prompt_tokens": [t["tokens"] for t in data.texts], "answers": [t["answers"] for t in data.texts],
            "stream": args.stream, "sink": args.sink, "window": args.window, "rows": rows, "causal": causal,
            "role": args.role, f"{args.role}_detected": report.heads(args.role), "timings": timings,
            "torch_threads": torch.get_num_threads(), "cpus": os.cpu_count(),
            "provenance": provenance(loaded, task=args.task, split="test", n_examples=data.n_examples,
                                     method="kv-policy benchmark", settings=vars(args))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--task", default="niah-single")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--stream", type=float, default=0.5)
    ap.add_argument("--sink", type=int, default=128)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--role", default="retrieval", choices=("retrieval", "induction"),
                    help="the head role whose scores choose the streaming heads and the causal test's top heads")
    ap.add_argument("--kv", action=argparse.BooleanOptionalAction, default=True,
                    help="measure the KV-cache policies (--no-kv: the causal test only)")
    ap.add_argument("--causal", type=float, default=None, metavar="SHARE",
                    help="also the causal test: remove this share of heads, top by the role's score vs random")
    ap.add_argument("--out", default=str(RESULTS / "long_context.json"))
    args = ap.parse_args()
    if not args.kv and not args.causal:
        ap.error("--no-kv leaves nothing to measure: give --causal SHARE")
    timings: dict[str, dict] = {}

    def timed(name: str, fn):
        t = time.perf_counter()
        out = fn()
        timings[name] = {"seconds": round(time.perf_counter() - t, 1), "load_after": list(load_average())}
        print(f"{name}: {timings[name]['seconds']} s (load {timings[name]['load_after']})", flush=True)
        return out

    loaded = timed("load", lambda: load_model(args.model, attn_implementation="eager"))
    report = timed(f"{args.role} scores", lambda: compute_roles(loaded, roles=[args.role], seed=0))
    scores = report.head_scores(args.role)
    kv_heads = kvp.kv_heads_of(loaded)
    policies = {}
    if args.kv:
        policies[args.role] = kvp.from_scores(scores, kvp.groups_of(loaded), args.stream, sink=args.sink,
                                              window=args.window, source={"score_method": f"role:{args.role}"})
        for seed in range(args.seeds):
            policies[f"random-{seed}"] = kvp.random_policy(kv_heads, args.stream, seed, sink=args.sink,
                                                           window=args.window)
    task = get_task(args.task)
    data = timed("encode", lambda: task.encode(loaded, "test", args.limit, max_length=args.context))
    refs = task.references(data)
    results, rows = {}, []
    conditions = {"full": None, **policies} if args.kv else {}
    for name, policy in conditions.items():
        def run(policy=policy):
            with kvp.applied(loaded, policy):
                return task.evaluate(loaded, data, batch_size=1,
                                     progress=lambda e: print(f"  {name} {e.done}/{e.total}", flush=True))
        res = results[name] = timed(name, run)
        memory = kvp.memory_report(policy or kvp.KVPolicy.full(kv_heads, args.sink, args.window), loaded,
                                   args.context)
        c = None if name == "full" else compare(task.metric, results["full"], res, refs)
        rows.append({"condition": name, "accuracy": res.metric, "correct": int(sum(res.per_example)),
                     "examples": res.n_examples, "wilson_95": list(res.interval), "per_example": list(res.per_example),
                     "decoded": res.extra["decoded"], "kv_bytes": memory["kv_bytes"],
                     "full_kv_bytes": memory["full_kv_bytes"], "memory_ratio": memory["ratio"],
                     "streaming": None if policy is None else [[int(x) for x in r] for r in policy.streaming],
                     "vs_full": None if c is None else {**asdict(c), "p_text": c.p_text}})
        print(f"{name:10s} {int(sum(res.per_example))}/{res.n_examples} ({res.metric:.2f}, Wilson "
              f"{res.interval[0]:.2f}-{res.interval[1]:.2f}); KV {memory['kv_bytes'] / 2**20:.2f} MiB "
              f"({memory['ratio']:.2f}x smaller){'' if c is None else f'; vs full {c.delta:+.2f}, {c.p_text}'}",
              flush=True)
        write_json(args.out, document(args, loaded, report, data, rows, timings, None))    # after every condition
    causal = None
    if args.causal:
        from pruning_core.analysis.causal import CausalConfig, causal_test
        config = CausalConfig(fraction=args.causal, seeds=tuple(range(args.seeds)), split="test", limit=args.limit,
                              context=args.context, batch_size=1)
        origin = {"method": f"role:{args.role}", "probe": report.probes[args.role].get("input")}
        def says(e):
            print(f"  causal {e.done}/{e.total} {e.message}", flush=True)
        causal = timed("causal test", lambda: replace(causal_test(loaded, task, scores, config, progress=says),
                                                      scores=origin))
        causal = causal.to_json()
        for name, run in causal["runs"].items():
            print(f"causal {name:10s} {run['metric']:.2f} (drop {run['drop']:+.2f}) removed {run['removed']}")
        for c in causal["comparisons"]:
            print(f"causal {c['other']} vs {c['base']}: {c['delta']:+.2f}, {c['p_text']}")
    out = document(args, loaded, report, data, rows, timings, causal)
    print(f"wrote {write_json(args.out, out)}")


if __name__ == "__main__":
    main()
