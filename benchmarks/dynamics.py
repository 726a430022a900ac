"""Training dynamics of the default (Michel et al. 2019, §6), with the settings the README reports.

    .venv/bin/python benchmarks/dynamics.py          # about 10 minutes on 2 CPU cores

Fine-tunes the raw pre-trained MiniLM-L6 exactly as ``headprune prepare`` does (2 epochs = 506
steps over the 8,066 training snippets, AdamW, lr 5e-5, batch 32, seed 0) and at steps 0, 50, 100,
250 and 506 computes the gradient I_h on the first 256 training snippets and the accuracy on the
first 400 validation snippets with 0, 20, 40 and 60 % of the heads removed by that checkpoint's
I_h. Writes ``benchmarks/results/dynamics.json`` (``headprune.dynamics/1``) and prints the table;
the dashboard's Dynamics page draws it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.analysis.dynamics import (
    DEFAULT_STEPS,
    DynamicsConfig,
    format_table,
    pretrained_classifier,
    training_dynamics,
)
from pruning_core.core.errors import HeadpruneError  # noqa: E402
from pruning_core.core.progress import tqdm_progress  # noqa: E402
from pruning_core.evaluation.results import write_json  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", default=",".join(map(str, DEFAULT_STEPS)))
    p.add_argument("--score-limit", type=int, default=256)
    p.add_argument("--eval-limit", type=int, default=400)
    p.add_argument("--out", default=str(RESULTS / "dynamics.json"))
    args = p.parse_args(argv)
    try:
        config = DynamicsConfig(steps=tuple(int(s) for s in args.steps.split(",")), score_limit=args.score_limit,
                                eval_limit=args.eval_limit)
        task = get_task("movie-sentiment")
        model, tokenizer, model_id = pretrained_classifier()
        result = training_dynamics(model, tokenizer, task, config, model_id=model_id, progress=tqdm_progress())
    except HeadpruneError as exc:
        print(f"dynamics: error: {exc}", file=sys.stderr)
        return 2
    print(format_table(result))
    print(f"wrote {write_json(args.out, result.to_json())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
