"""Behavioural checks of detected roles, with known answers (METHODS.md, "Head roles").

- **Induction**: a language model reading [BOS] + R + R (R = ``n`` uniform random tokens) cannot predict the
  first copy, but can copy the second: its loss on the second copy drops sharply. :func:`copy_losses` measures
  the loss on both copies under a mask; with the induction heads removed most of that drop should go, with
  as many random heads removed (:func:`random_heads`) it should not. :func:`induction_check` puts detection
  and both measurements together (the dashboard tour's induction step).
- **Retrieval**: :func:`.needle.needle_accuracy` under a mask that removes the retrieval heads.

Masks are applied per call (:func:`pruning_core.modeling.masking.apply_mask`); the model is only read.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from pruning_core.core.errors import UsageError
from pruning_core.core.heads import HeadId, HeadLayout, HeadMask
from pruning_core.modeling.masking import apply_mask
from pruning_core.core.progress import ProgressCallback
from pruning_core.analysis.roles.compute import compute_roles
from pruning_core.analysis.roles.probes import random_tokens, repeat_length, repeat_prefix

CHECK_SEED = 1          # the check's random tokens: not the detection's (compute_roles' default seed is 0)


@dataclass(frozen=True)
class CopyLosses:
    """Per sequence [BOS] + R + R, the mean next-token loss (nats) on each copy's tokens 2..n.

    The first token of either copy is left out of both means: nothing before it could tell the model what it
    is (the second copy's first token follows R's last token, seen once), so copying can only help from
    the second token on. ``first`` and ``second`` are ``[sequences]``, in the order the tokens were drawn.
    """

    first: tuple[float, ...]
    second: tuple[float, ...]
    n: int                      # tokens per copy (R's length after capping to the model's positions)
    seed: int                   # the random tokens' seed

    @property
    def drops(self) -> np.ndarray:
        """``[sequences]``: loss on the first copy minus loss on the second (positive = the model copies)."""
        return np.asarray(self.first) - np.asarray(self.second)

    @property
    def mean_first(self) -> float:
        return float(np.mean(self.first))

    @property
    def mean_second(self) -> float:
        return float(np.mean(self.second))

    @property
    def drop(self) -> float:
        return float(self.drops.mean())

    def to_json(self) -> dict:
        # by hand: the means are derived (properties) and written between the settings and the losses
        return {"n": self.n, "seed": self.seed, "mean_first": self.mean_first, "mean_second": self.mean_second,
                "mean_drop": self.drop, "first": list(self.first), "second": list(self.second)}


def copy_losses(loaded, mask: HeadMask | None = None, *, n: int = 50, sequences: int = 20, seed: int = CHECK_SEED,
                batch: int = 10) -> CopyLosses:
    """The loss on the first and the second copy of ``sequences`` inputs [BOS] + R + R under ``mask``.

    Args:
        loaded: a decoder-only language model (``task_type == "language_model"``); only read.
        mask: 1 = keep, 0 = removed; None keeps every head.
        n: R's length, capped so that the input fits the model's positions.
        sequences, seed, batch: how many inputs, the seed of their random tokens, inputs per forward pass.
    """
    if loaded.task_type != "language_model":
        raise UsageError(f"The copy check needs a decoder-only language model (next-token loss); "
                         f"{loaded.model_id!r} is a {loaded.task_type} model.")
    if sequences < 1 or batch < 1:
        raise UsageError(f"sequences and batch must be at least 1; got {sequences} and {batch}.")
    n = repeat_length(loaded, n)
    prefix = repeat_prefix(loaded)
    p = len(prefix)
    rand = random_tokens(loaded, n, sequences, seed)                         # [sequences, n]
    first: list[float] = []
    second: list[float] = []
    with torch.inference_mode(), apply_mask(loaded, mask):
        for s in range(0, sequences, batch):
            ids = torch.tensor([prefix + list(map(int, r)) * 2 for r in rand[s:s + batch]],
                               dtype=torch.long, device=loaded.device)         # [B, p + 2n]
            logits = loaded.model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.float()
            # losses[:, j]: predicting token j + 1; R[i] of copy c sits at position p + c * n + i
            losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")  # [B, p + 2n - 1]
            first += losses[:, p:p + n - 1].mean(dim=1).tolist()                # R[1..n-1], first copy
            second += losses[:, p + n:p + 2 * n - 1].mean(dim=1).tolist()       # R[1..n-1], second copy
    return CopyLosses(tuple(first), tuple(second), n, seed)


def random_heads(layout: HeadLayout, count: int, *, exclude: Collection[HeadId] = (),
                 kinds: Sequence[str] | None = None, seed: int = 0) -> list[HeadId]:
    """``count`` heads drawn uniformly without replacement among the heads of ``kinds`` (default: all) not in
    ``exclude``: the baseline "as many random heads" of a role's check."""
    allowed = set(kinds) if kinds is not None else set(layout.kinds)
    excluded = set(exclude)
    pool = [h for h in layout.heads() if h[0] in allowed and h not in excluded]
    if count > len(pool):
        raise UsageError(f"Cannot draw {count} random heads from the {len(pool)} heads outside the excluded ones; "
                         "draw fewer.")
    picked = np.random.default_rng(seed).choice(len(pool), size=count, replace=False)
    return sorted(pool[int(i)] for i in picked)


@dataclass(frozen=True)
class InductionCheck:
    """The detected induction heads (causal self-attention) and the copy losses with and without them."""

    scores: np.ndarray                  # [layers, heads] induction score of each decoder_self head
    threshold: float                    # a head scoring above it is an induction head
    heads: tuple[HeadId, ...]           # the detected ones, highest score first
    mask: HeadMask                      # every head kept but ``heads``
    all_heads: CopyLosses
    removed: CopyLosses                 # under ``mask``
    detection: str                      # the detection's probe input, in words

    @property
    def drop_removed_share(self) -> float | None:
        """How much of the all-heads drop removing the heads takes away (1 = all of it); None without a drop."""
        return None if self.all_heads.drop <= 0 else 1 - self.removed.drop / self.all_heads.drop


def induction_check(loaded, *, task=None, seed: int = 0, check_seed: int = CHECK_SEED, sequences: int = 20,
                    progress: ProgressCallback | None = None) -> InductionCheck:
    """Detect the induction heads (:func:`compute_roles`, ``roles=["induction"]``, random tokens of ``seed``)
    and measure :func:`copy_losses` with all heads and with them removed, on other random tokens
    (``check_seed``). ``task`` as in :func:`compute_roles` (its texts are only checked, not read, here)."""
    if loaded.task_type != "language_model":
        raise UsageError(f"{loaded.model_id!r} is a {loaded.task_type} model: the induction check needs a decoder-only "
                         "language model (causal self-attention and a next-token loss).")
    if seed == check_seed:
        raise UsageError(f"The check's random tokens must differ from the detection's; give another check_seed "
                         f"than {seed}.")
    report = compute_roles(loaded, task=task, roles=["induction"], seed=seed, progress=progress)
    grid = report.scores["induction"]["decoder_self"]
    heads = tuple(sorted(report.heads("induction"), key=lambda h: -grid[h[1], h[2]]))
    mask = HeadMask.from_removed(loaded.layout, heads)
    return InductionCheck(grid, report.thresholds["induction"], heads, mask,
                          copy_losses(loaded, None, sequences=sequences, seed=check_seed),
                          copy_losses(loaded, mask, sequences=sequences, seed=check_seed),
                          report.probes["induction"]["input"])
