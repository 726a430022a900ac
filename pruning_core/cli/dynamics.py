"""``headprune dynamics``: importance and pruning tolerance during fine-tuning (Michel et al. §6).

``pruning_core.cli.main`` calls :func:`add_dynamics_command` with its sub-parsers. Like every headprune
command: options are checked before anything loads, a human summary is printed, ``--out FILE``
writes the result (``headprune.dynamics/1``), and a HeadpruneError exits 2 with one line.
"""
from __future__ import annotations

import argparse

from pruning_core.cli.args import checked, output_file, positive_int, write_output
from pruning_core.core.errors import UsageError
from pruning_core.core.progress import tqdm_progress


def step_list(option: str, value: str) -> None:
    """Increasing whole numbers of at least 0 separated by commas, like ``0,50,100``."""
    parts = [s.strip() for s in value.split(",")]
    if not all(s.isdigit() for s in parts) or [int(s) for s in parts] != sorted({int(s) for s in parts}):
        raise UsageError(f"{option} must be increasing whole numbers of at least 0 separated by commas, "
                         f"like 0,50,100,250,506; got {value!r}.")


def fraction_list(option: str, value: str) -> None:
    """Increasing shares in [0, 1] separated by commas, like ``0,0.2,0.4``."""
    try:
        numbers = [float(s) for s in value.split(",")]
    except ValueError:
        numbers = []
    if not numbers or any(not 0 <= f <= 1 for f in numbers) or numbers != sorted(set(numbers)):
        raise UsageError(f"{option} must be increasing shares in [0, 1] separated by commas, like 0,0.2,0.4,0.6; "
                         f"got {value!r}.")


def add_dynamics_command(subparsers) -> None:
    """Add ``dynamics`` to the ``headprune`` sub-parsers."""
    from pruning_core.analysis.dynamics import DEFAULT_STEPS, PRETRAINED
    p = subparsers.add_parser("dynamics", help="fine-tune and record I_h and a short pruning curve at several steps")
    p.add_argument("--model", default=PRETRAINED,
                   help="what to fine-tune: 'pretrained' (the raw MiniLM-L6 that `prepare` fine-tunes, default), "
                        "or a classifier folder / hub id")
    p.add_argument("--task", default="movie-sentiment", help="a classification task with a train split")
    checked(p, "--steps", default=",".join(map(str, DEFAULT_STEPS)), check=step_list,
            help="optimiser steps to measure at; 0 = before training (default %(default)s)")
    checked(p, "--fractions", default="0,0.2,0.4,0.6", check=fraction_list,
            help="shares of all heads removed on each checkpoint's curve (default %(default)s)")
    checked(p, "--score-limit", type=int, default=256, check=positive_int,
            help="training examples I_h is computed on (default %(default)s)")
    checked(p, "--eval-limit", type=int, default=400, check=positive_int,
            help="validation examples each curve point is evaluated on (default %(default)s)")
    checked(p, "--batch-size", type=int, default=64, check=positive_int, help="for scoring and evaluation")
    p.add_argument("--seed", type=int, default=0, help="fine-tuning seed (shuffling, dropout)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    checked(p, "--out", check=output_file, help="write the result as JSON to this file")
    p.set_defaults(func=cmd_dynamics)


def cmd_dynamics(args: argparse.Namespace) -> None:
    from dataclasses import replace

    from pruning_core.analysis.dynamics import (
        DynamicsConfig,
        format_table,
        pretrained_classifier,
        training_dynamics,
    )
    from pruning_core.zoo.default import FINETUNE
    from pruning_core.tasks import get_task
    config = DynamicsConfig(steps=tuple(int(s) for s in args.steps.split(",")),
                            fractions=tuple(float(s) for s in args.fractions.split(",")),
                            score_limit=args.score_limit, eval_limit=args.eval_limit, batch_size=args.batch_size,
                            finetune=replace(FINETUNE, seed=args.seed, device=args.device))
    task = get_task(args.task)
    model, tokenizer, model_id = pretrained_classifier(args.model, task)
    result = training_dynamics(model, tokenizer, task, config, model_id=model_id, progress=tqdm_progress())
    print(format_table(result))
    if args.out:
        print(f"wrote {write_output('--out', args.out, result.to_json())}")
