"""Generation speed of a physically pruned Bergamot student against the dense one, and against its FLOP ceiling.

    .venv/bin/python benchmarks/mt_generation.py          # a few minutes on 2 CPU cores

Needs ``headprune prepare --model bergamot-en-pt``.

What it measures and writes, in full: benchmarks/README.md, ``mt_generation.py``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # as dashboard.py sets it

import torch  # noqa: E402

from pruning_core.bench import LatencyStats, flop_ceiling, interleaved_latencies  # noqa: E402
from pruning_core.core.heads import HeadMask  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.modeling.inference.greedy import greedy_decode  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.modeling.pruning import parameter_count, prune_heads  # noqa: E402
from pruning_core.scoring import ScoreConfig, get_scorer  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "headprune.mt_generation/1"


def _least_half(ranking, layout, kinds: tuple[str, ...]) -> HeadMask:
    heads = [h for h in ranking.ranked(seed=0) if h[0] in kinds]
    return HeadMask.from_removed(layout, heads[:len(heads) // 2])


def _decoder(model, batches, shortlist, max_new: int):
    """One call: greedy tokens of every batch; returns how many tokens were generated."""
    def run() -> int:
        n = 0
        for b in batches:
            ids, attn = b.inputs["input_ids"], b.inputs["attention_mask"]
            allowed = None if shortlist is None else shortlist.allowed(ids, attn, model.config.vocab_size)
            n += sum(len(r) for r in greedy_decode(model, ids, attn, max_new_tokens=max_new, allowed=allowed))
        return n
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bergamot-en-pt")
    parser.add_argument("--task", default="bible-en-pt")
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--n-score", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    lm = load_model(args.model)
    task = get_task(args.task)
    data = task.encode(lm, "test", args.n)
    batches = list(data.batches(args.batch_size))
    max_new = min(data.max_length, getattr(lm.model.config, "max_position_embeddings", 1 << 20) - 1)
    src = statistics.mean(len(f["input_ids"]) for f in data.features)
    tgt = statistics.mean(len(f["labels"]) for f in data.features)
    load_before = list(os.getloadavg())
    scored = get_scorer("gradient").score(lm, task, ScoreConfig(split="validation", limit=args.n_score,
                                                                batch_size=16))
    ranking = scored.ranking_scores
    masks = {"encoder_self_half": _least_half(ranking, lm.layout, ("encoder_self",)),
             "cross_half": _least_half(ranking, lm.layout, ("cross",)),
             "all_half": _least_half(ranking, lm.layout, ("encoder_self", "cross"))}
    dense = lm.model
    rows = {}
    with torch.inference_mode():
        for name, mask in masks.items():
            pruned = prune_heads(dense, mask).eval()
            runs = {"dense": _decoder(dense, batches, lm.shortlist, max_new),
                    "pruned": _decoder(pruned, batches, lm.shortlist, max_new)}
            tokens = {k: run() for k, run in runs.items()}
            timed = interleaved_latencies(runs, warmup=1, repeats=args.repeats, min_seconds=5.0)
            d, p = LatencyStats.of(timed.seconds["dense"]), LatencyStats.of(timed.seconds["pruned"])
            paired = [a / b for a, b in zip(timed.seconds["dense"], timed.seconds["pruned"])]
            ceiling = flop_ceiling(lm, mask, round(src), decoder_len=round(tgt))
            rows[name] = {
                "heads_kept": mask.n_kept, "heads_total": mask.n_total, "removed": [list(h) for h in mask.removed()],
                "parameters": {"dense": parameter_count(dense), "pruned": parameter_count(pruned)},
                "tokens": tokens, "dense": d.to_json(), "pruned": p.to_json(),
                "tokens_per_s": {"dense": tokens["dense"] / d.median, "pruned": tokens["pruned"] / p.median},
                "speedup_of_medians": d.median / p.median, "speedup_paired_median": statistics.median(paired),
                "flop_ceiling": ceiling.speedup, "rounds": timed.rounds,
                "cpu_share": timed.cpu_share(torch.get_num_threads()), "load_1min": os.getloadavg()[0]}
            r = rows[name]
            print(f"{name:18s} {mask.n_kept}/{mask.n_total} heads: dense {r['tokens_per_s']['dense']:7.0f} tok/s, "
                  f"pruned {r['tokens_per_s']['pruned']:7.0f} tok/s; speed-up {r['speedup_of_medians']:.3f}x "
                  f"(paired {r['speedup_paired_median']:.3f}x), FLOP ceiling {ceiling.speedup:.3f}x; "
                  f"{timed.rounds} rounds, CPU share {r['cpu_share']:.0%}, load {r['load_1min']:.1f}", flush=True)
            del pruned
    result = {"format": FORMAT, "model": args.model, "task": args.task, "split": "test", "n_examples": data.n_examples,
              "batch_size": args.batch_size, "torch_threads": torch.get_num_threads(),
              "decoding": {"method": "greedy, step by step, key/value and SSRU state cached",
                           "shortlist": lm.shortlist.describe() if lm.shortlist is not None else None},
              "mean_lengths": {"source": src, "target": tgt},
              "ceiling_note": "one teacher-forced pass over the whole vocabulary at the mean lengths; decoding scores "
                              "the shortlist only, so its output layer is smaller than the ceiling counts",
              "scoring": {"method": "gradient (I_h)", "split": "validation", "n_examples": args.n_score},
              "masks": rows, "load_before": load_before, "load_after": list(os.getloadavg()),
              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_json(RESULTS / "mt_generation.json", result)


if __name__ == "__main__":
    main()
