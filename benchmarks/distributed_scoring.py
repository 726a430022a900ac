"""Throughput of gradient scoring (I_h) with 1 and 2 data-parallel processes on this machine.

    .venv/bin/python benchmarks/distributed_scoring.py            # about 5 minutes on 2 CPU cores

Scores the heads of the prepared default (MiniLM-L6, 72 heads) on the first ``--examples``
training snippets of movie-sentiment (``per_token_importance``, batch ``--batch-size``) in three
set-ups, each launched with ``python -m torch.distributed.run --standalone``.

What it measures and writes, in full: benchmarks/README.md, ``distributed_scoring.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results"
SETUPS = {"1 process x 1 thread": (1, 1), "2 processes x 1 thread": (2, 1), "1 process x 2 threads": (1, 2)}


def worker(args) -> None:
    """Run inside torchrun: time ``args.passes`` scoring passes; rank 0 prints one JSON line."""
    import torch

    torch.set_num_threads(args.threads)
    from pruning_core.core.runtime import distributed
    from pruning_core.modeling.sources.loading import load_model
    from pruning_core.scoring.gradient import per_token_importance
    from pruning_core.tasks import get_task

    world = distributed.init("cpu") if distributed.launched_by_torchrun() else None
    loaded = load_model(args.model, device="cpu")
    task = get_task("movie-sentiment")
    data = task.encode(loaded, "train", args.examples)
    warm = task.encode(loaded, "validation", args.batch_size)
    with distributed.single_process():
        per_token_importance(loaded, task, warm, batch_size=args.batch_size)      # warm-up, not timed
    seconds = []
    for _ in range(args.passes):
        distributed.agree("the start of a pass")                                  # a barrier
        start = time.perf_counter()
        per_token_importance(loaded, task, data, batch_size=args.batch_size)     # ends with the all-reduce
        seconds.append(time.perf_counter() - start)
    if world is None or world.writer:
        print("RESULT " + json.dumps({"seconds": seconds, "n_examples": data.n_examples,
                                      "world": distributed.describe("cpu"), "heads": loaded.layout.total_heads,
                                      "threads": torch.get_num_threads()}), flush=True)
    distributed.shutdown()


def launch(procs: int, threads: int, args) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(procs),
           __file__, "--worker", "--threads", str(threads), "--examples", str(args.examples),
           "--batch-size", str(args.batch_size), "--passes", str(args.passes), "--model", args.model]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"launch {procs}x{threads} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return json.loads(lines[0][len("RESULT "):])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--model", default="default")
    p.add_argument("--examples", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--passes", type=int, default=2, help="timed passes per launch")
    p.add_argument("--rounds", type=int, default=3, help="launches per set-up, alternating")
    p.add_argument("--out", default=str(RESULTS / "distributed_scoring.json"))
    args = p.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    from pruning_core.modeling.sources.loading import load_model
    from pruning_core.evaluation.results import provenance, write_json

    load_before = os.getloadavg()
    runs: dict[str, list] = {name: [] for name in SETUPS}
    for r in range(args.rounds):
        for name, (procs, threads) in SETUPS.items():
            res = launch(procs, threads, args)
            runs[name].append(res)
            rates = [res["n_examples"] / s for s in res["seconds"]]
            print(f"round {r + 1}: {name:24s} " + ", ".join(f"{x:.1f}" for x in rates) + " examples/s", flush=True)
    load_after = os.getloadavg()
    setups = {}
    for name, results in runs.items():
        rates = [res["n_examples"] / s for res in results for s in res["seconds"]]
        setups[name] = {"processes": SETUPS[name][0], "threads_per_process": SETUPS[name][1],
                        "cores_used": SETUPS[name][0] * SETUPS[name][1],
                        "median_examples_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
                        "passes": len(rates), "world": results[0]["world"]}
    base = setups["1 process x 1 thread"]["median_examples_per_s"]
    two = setups["2 processes x 1 thread"]["median_examples_per_s"]
    threads2 = setups["1 process x 2 threads"]["median_examples_per_s"]
    first = runs["1 process x 1 thread"][0]
    loaded = load_model(args.model, device="cpu")
    out = {"format": "headprune.distributed_bench/1", "what": "gradient scoring (per_token_importance) throughput",
           "model": args.model, "heads": first["heads"], "examples": first["n_examples"],
           "batch_size": args.batch_size, "setups": setups,
           "ratio_2proc_over_1proc": two / base, "ratio_2proc_over_2threads": two / threads2,
           "allreduce_floats_per_pass": first["heads"] + 1,
           "machine": {"cpu_count": os.cpu_count(), "load_average_before": list(load_before),
                       "load_average_after": list(load_after),
                       "note": "2 cores shared with other work; a load average above 2 means contention"},
           "provenance": provenance(loaded, task="movie-sentiment", split="train", n_examples=first["n_examples"],
                                    method="gradient", settings={"rounds": args.rounds, "passes": args.passes,
                                                                 "batch_size": args.batch_size})}
    print(f"1 process: {base:.1f} examples/s; 2 processes: {two:.1f} ({two / base:.2f}x); "
          f"1 process x 2 threads: {threads2:.1f} ({two / threads2:.2f}x of it); load {load_before[0]:.1f} -> "
          f"{load_after[0]:.1f}")
    print(f"wrote {write_json(args.out, out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
