"""Does a pruned copy's first call cost more than its next ones? (Why the Head map's latency timing has no warm-up.)

    .venv/bin/python benchmarks/first_call.py                      # every prepared model of MODELS
    .venv/bin/python benchmarks/first_call.py --models whisper-base --copies 8

Per model, on the copy the dashboard times (sdpa attention) at its latency probe shape
(``app.headmap.cache.probe_shape``), after the dense model's own calls: ``--copies`` pruned copies of three random
heads removed, each called four times in a row; the first call against the median of the next three. Writes ``benchmarks/results/first_call.json``.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # as dashboard.py sets it

import torch  # noqa: E402

from app.headmap.cache import probe_shape  # noqa: E402
from draft_decoding import _commit, _cpu_model, _load  # noqa: E402
from pruning_core.bench.run import audio_frames, synthetic_inputs, timing_model  # noqa: E402
from pruning_core.core.heads import HeadMask  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.modeling.pruning import prune_heads  # noqa: E402
from pruning_core.modeling.sources import catalog  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402

FORMAT = "headprune.first_call/1"
MODELS = ("default", "smollm2", "bergamot-en-pt", "bergamot-pt-en", "whisper-base")


def measure(name: str, copies: int, seed: int) -> dict:
    lm = timing_model(load_model(name))             # what the Head map times: sdpa attention (app.model.cache.timing)
    config = lm.model.config
    batch, seq_len = probe_shape(lm)
    decoder = seq_len if getattr(config, "is_encoder_decoder", False) else None
    inputs = synthetic_inputs(config, batch, audio_frames(config) or seq_len, decoder, lm.device, seed=seed)
    heads = [(k, layer, h) for k, rows in lm.layout.kinds.items() for layer, n in enumerate(rows) for h in range(n)]
    rng, rows = random.Random(seed), []
    with torch.inference_mode():
        for _ in range(3):
            lm.model(**inputs)
        for _ in range(copies):
            pruned = prune_heads(lm.model, HeadMask.from_removed(lm.layout, rng.sample(heads, 3)),
                                 share_weights=True).eval()      # as app.headmap.cache.pruned_model cuts it
            calls = []
            for _ in range(4):
                start = time.perf_counter()
                pruned(**inputs)
                calls.append(time.perf_counter() - start)
            rows.append({"first_s": round(calls[0], 5), "next_median_s": round(statistics.median(calls[1:]), 5),
                         "ratio": round(calls[0] / statistics.median(calls[1:]), 4)})
    ratios = [r["ratio"] for r in rows]
    return {"probe": [batch, seq_len], "copies": rows, "median_ratio": statistics.median(ratios),
            "max_ratio": max(ratios), "load_1min": _load()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=[m for m in MODELS if m in catalog.prepared_names()])
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "first_call.json")
    args = parser.parse_args()
    load_before = _load()
    models = {}
    for name in args.models:
        models[name] = measure(name, args.copies, args.seed)
        print(name, f"first call / next: median {models[name]['median_ratio']:.3f}, at most "
              f"{models[name]['max_ratio']:.3f}", flush=True)
    write_json(args.out, {"format": FORMAT, "models": models, "load_before": load_before, "load_after": _load(),
                          "cpu": {"name": _cpu_model(), "cores": os.cpu_count()},
                          "torch_threads": torch.get_num_threads(), "commit": _commit(),
                          "created": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
