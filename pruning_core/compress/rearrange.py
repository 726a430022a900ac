"""Kwon et al.'s per-layer mask rearrangement: choose *which* heads of a layer go, given how many.

Fisher importance ranks heads one by one, as if the loss changes of removing two heads added up. Inside
a layer they need not: two heads whose gate gradients move together (same sign, batch after batch)
hurt more together than apart. With ``g[b, h]`` the gate gradient of head h on mini-batch b, the
block-diagonal Fisher estimate of the loss change from removing the set R of a layer's heads is

    loss(R) = sum_b (sum_{h in R} g[b, h])^2 = || sum_{h in R} g[:, h] ||^2

:func:`rearrange_layer` starts from the k lowest-Fisher heads (the budgeted search's choice) and
greedily takes the best swap of a removed head with a kept one while it lowers ``loss(R)``; so the
result's loss is never above the start's. The number removed per layer, and so the budget, is kept.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from pruning_core.core.heads import HeadMask

MAX_SWAPS = 100       # per layer; each swap strictly lowers the loss, so this only bounds pathological cases


@dataclass(frozen=True)
class LayerRearrangement:
    """One layer's rearrangement: the swaps made (head out of the removed set, head into it) and the losses."""

    kind: str
    layer: int
    swaps: tuple[tuple[int, int], ...]     # (head kept again, head removed instead), in order
    loss_before: float                     # block-diagonal Fisher loss of the start
    loss_after: float                      # and of the result (<= loss_before)


def block_fisher_loss(grads: torch.Tensor, removed: list[int] | set[int]) -> float:
    """``||sum_{h in removed} grads[:, h]||^2`` for ``grads`` ``[batches, heads]``."""
    if not removed:
        return 0.0
    total = grads[:, sorted(removed)].double().sum(1)
    return float(total @ total)


def rearrange_layer(grads: torch.Tensor, removed: list[int]) -> tuple[list[int], list[tuple[int, int]], float, float]:
    """Greedy swaps from ``removed`` (head ids of one layer) lowering :func:`block_fisher_loss`.

    Returns (removed heads after, swaps as (kept again, removed instead), loss before, loss after).
    """
    heads = grads.shape[1]
    current = set(removed)
    before = loss = block_fisher_loss(grads, current)
    swaps: list[tuple[int, int]] = []
    for _ in range(MAX_SWAPS):
        best = None
        for out in sorted(current):
            for into in (h for h in range(heads) if h not in current):
                trial = block_fisher_loss(grads, (current - {out}) | {into})
                if trial < loss - 1e-12 * max(loss, 1.0) and (best is None or trial < best[0]):
                    best = (trial, out, into)
        if best is None:
            break
        loss, out, into = best
        current = (current - {out}) | {into}
        swaps.append((out, into))
    return sorted(current), swaps, before, loss


def rearrange(mask: HeadMask, grads: dict[tuple[str, int], torch.Tensor]) -> tuple[HeadMask, list[LayerRearrangement]]:
    """Rearrange every layer of ``mask`` that removes some but not all heads; ``grads``: per site ``[batches, heads]``."""
    rows = {k: [list(r) for r in v] for k, v in mask.kinds.items()}
    record = []
    for kind, layers in mask.kinds.items():
        for layer, row in enumerate(layers):
            removed = [h for h, v in enumerate(row) if v == 0]
            if not removed or len(removed) == len(row):
                continue
            after, swaps, before, loss = rearrange_layer(grads[(kind, layer)], removed)
            rows[kind][layer] = [0 if h in after else 1 for h in range(len(row))]
            record.append(LayerRearrangement(kind, layer, tuple(swaps), before, loss))
    return HeadMask.from_lists(rows), record
