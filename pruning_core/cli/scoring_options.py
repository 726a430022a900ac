"""Command-line options of the scorers: ``--baseline`` (atp) and ``--verify K`` (exact-ablation check).

Kept apart from the CLI module so the CLI needs three calls (see :func:`add_score_options`):

    add_score_options(p)                                  # where the `score` parser is built
    config = with_score_options(config, args)             # where its ScoreConfig is built
    data = scores_json(args, loaded, task, result, progress=_progress())   # what `score --out` writes
"""
from __future__ import annotations

import argparse
from dataclasses import replace

from pruning_core.cli.args import checked, positive_int
from pruning_core.evaluation.results import ScoreResult
from pruning_core.scoring.base import ATP_BASELINES, ScoreConfig

VERIFY_LIMIT = 256          # evaluation examples the exact ablations run on by default


def add_score_options(p: argparse.ArgumentParser) -> None:
    """Add ``--baseline``, ``--verify``, ``--verify-split`` and ``--verify-limit`` to a scoring command."""
    p.add_argument("--baseline", choices=ATP_BASELINES, default="zero",
                   help="atp only: what a head's output is patched with: zero (|atp| per token is I_h), mean "
                        "(its mean output on the scoring data) or corrupt (its output on the same input with "
                        "the tokens shuffled, seeded by --seed)")
    checked(p, "--verify", type=int, default=None, metavar="K", check=positive_int,
            help="check the scores against exact ablation: remove each of the K highest and K lowest heads alone, "
                 "measure the loss change, report Spearman's rank correlation (2K + 1 evaluations)")
    p.add_argument("--verify-split", default=None,
                   help="split the exact ablations are measured on (default: the task's evaluation split)")
    checked(p, "--verify-limit", type=int, default=VERIFY_LIMIT, check=positive_int,
            help=f"examples of --verify-split used (default {VERIFY_LIMIT})")


def with_score_options(config: ScoreConfig, args: argparse.Namespace) -> ScoreConfig:
    """``config`` with ``--baseline`` applied."""
    return replace(config, baseline=getattr(args, "baseline", None) or config.baseline)


def scores_json(args: argparse.Namespace, loaded, task, result: ScoreResult, progress=None) -> dict:
    """What ``score --out`` writes: the scores file, with a ``verify`` field (``headprune.verify/1``) when
    ``--verify K`` was given; the check's summary is printed."""
    data = result.to_json()
    k = getattr(args, "verify", None)
    if not k:
        return data
    from pruning_core.scoring.verify import verify_scores
    split = args.verify_split or task.default_split
    max_length = (result.provenance.get("settings") or {}).get("max_length") or ScoreConfig().max_length
    eval_data = task.encode(loaded, split, args.verify_limit, max_length=max_length)
    check = verify_scores(loaded, task, eval_data, result, k, batch_size=args.batch_size, seed=getattr(args, "seed", 0),
                          progress=progress)
    rho = "undefined (constant scores or losses)" if check.spearman is None else f"{check.spearman:+.3f}"
    print(f"exact-ablation check on {split} ({check.n_examples} examples), {len(check.pairs)} heads "
          f"(the {k} highest and {k} lowest): Spearman {rho}  ({check.seconds:.1f} s)")
    if split == result.provenance.get("split"):
        print("  note: the heads were scored on the same split; pass --verify-split for held-out data.")
    data["verify"] = check.to_json()
    return data
