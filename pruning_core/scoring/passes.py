"""What the one-pass scorers share: this rank's batches, per-head float64 sums, one all-reduce.

Every scorer here is a sum over the scoring data's batches of per-head quantities, so it splits
over ``torchrun`` ranks like the gradient scorer (:mod:`pruning_core.core.runtime.distributed`): each rank adds
its share of the batches into :class:`HeadSums`, then one all-reduce adds the ranks' sums (equal
to one process up to float rounding of the summation order).

Head outputs: ``z_h`` is head h's output at one token, the input of the output projection
(``[..., heads, head_dim]``, recorded by :func:`pruning_core.modeling.masking.gate_heads` after its gate,
so a removed head's ``z_h`` is 0).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping

import torch

from pruning_core.core.runtime import distributed
from pruning_core.core.heads import HeadLayout, HeadMask, HeadScores
from pruning_core.modeling.masking import gate_heads, gates_from_mask, ones_gates
from pruning_core.core.progress import ProgressCallback, report


class HeadSums:
    """Named per-head float64 sums (per kind, per layer ``[heads]``, or ``[heads, width]``) and per-kind counts.

    ``add`` on this rank's batches, then ``all_reduce`` once: afterwards every rank holds the sums
    over all ranks' batches.

    vectors: for the names that sum vectors (a head's output, ``head_dim`` wide), ``{(kind, layer): width}``.
    """

    def __init__(self, layout: HeadLayout, names: tuple[str, ...],
                 vectors: Mapping[str, Mapping[tuple[str, int], int]] | None = None) -> None:
        vectors = vectors or {}

        def zeros(name: str, kind: str, layer: int, n: int) -> torch.Tensor:
            width = vectors.get(name)
            return torch.zeros((n,) if width is None else (n, width[(kind, layer)]), dtype=torch.float64)
        self.layout = layout
        self.sums = {name: {k: [zeros(name, k, l, n) for l, n in enumerate(rows)] for k, rows in layout.kinds.items()}
                     for name in names}
        self.counts = {k: 0.0 for k in layout.kinds}

    def add(self, name: str, kind: str, layer: int, value: torch.Tensor) -> None:
        self.sums[name][kind][layer] += value.detach().double().cpu()

    def count(self, kind: str, n: float) -> None:
        self.counts[kind] += float(n)

    def all_reduce(self, what: str) -> None:
        """Sum every rank's sums and counts (one all-reduce); a no-op in a single process."""
        if distributed.batch_part() is None:
            return
        kinds = list(self.layout.kinds)
        flat = [t for name in self.sums for k in kinds for t in self.sums[name][k]]
        counts = torch.tensor([self.counts[k] for k in kinds], dtype=torch.float64)
        summed = iter(distributed.sum_tensors(flat + [counts], what))
        for name in self.sums:
            for k in kinds:
                self.sums[name][k] = [next(summed) for _ in self.sums[name][k]]
        self.counts = dict(zip(kinds, next(summed).tolist()))

    def scores(self, name: str, per_count: bool = False) -> HeadScores:
        """The sums ``name`` as scores (``[heads]`` sums only); ``per_count``: divided by the kind's count."""
        return HeadScores.from_lists({k: [(t / (max(self.counts[k], 1.0) if per_count else 1.0)).tolist()
                                          for t in rows] for k, rows in self.sums[name].items()})


def rank_batches(loaded, data, batch_size: int, stage: str,
                 progress: ProgressCallback | None = None) -> Iterator:
    """This rank's batches of ``data`` on the model's device, reporting progress as ``stage``.

    Call it inside ``distributed.guard``, so a rank that fails tells the others.
    """
    batches, total = distributed.batches(data, batch_size, loaded.device)
    for i, batch in enumerate(batches):
        yield batch
        report(progress, stage, i + 1, total)


def gates_for(loaded, mask: HeadMask | None) -> dict[str, list[torch.Tensor]]:
    """The gates of ``mask`` (1 = keep) on the model's device; every head kept without one."""
    if mask is not None:
        mask.check_fits(loaded.layout)
        return gates_from_mask(mask, loaded.device)
    return ones_gates(loaded.layout, loaded.device)


def head_outputs(loaded, batch, gates) -> dict[tuple[str, int], list[torch.Tensor]]:
    """Forward ``batch`` without gradients; per site the recorded head outputs ``z`` ``[B, T, heads, head_dim]``."""
    with torch.inference_mode(), gate_heads(loaded.model, loaded.sites, gates, record=True) as session:
        loaded.model(**batch.inputs)
    return {key: recs for key, recs in session.records.items() if recs}


def outputs_and_grads(loaded, task, batch, gates) -> dict[tuple[str, int], list[tuple[torch.Tensor, torch.Tensor]]]:
    """Forward and backward of ``batch``'s summed loss; per site ``(z, dL/dz)`` pairs, each ``[B, T, heads, head_dim]``.

    Gradients are taken with respect to the head outputs only (no parameter gradient is stored).
    """
    with torch.enable_grad(), gate_heads(loaded.model, loaded.sites, gates, record=True) as session:
        outputs = loaded.model(**batch.inputs)
        loss = task.loss_sum(loaded, batch, outputs)
        keys = [key for key, recs in session.records.items() for _ in recs]
        recs = [r for recs in session.records.values() for r in recs]
        if not recs:                # every head was pruned away
            return {}
        grads = torch.autograd.grad(loss, recs, allow_unused=True)
    out: dict[tuple[str, int], list[tuple[torch.Tensor, torch.Tensor]]] = {}
    for key, z, g in zip(keys, recs, grads):
        out.setdefault(key, []).append((z.detach(), torch.zeros_like(z) if g is None else g))
    return out


def real_tokens(batch, kind: str, like: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` 1.0 for the real (non-padding) tokens ``kind`` attends from, as ``like``'s dtype and device."""
    return batch.token_masks[kind].to(like.device, like.dtype)


def zero_removed(scores: HeadScores, mask: HeadMask | None) -> HeadScores:
    """``scores`` with the heads ``mask`` removes set to 0 (the scorers' contract for a masked model)."""
    if mask is None:
        return scores
    return HeadScores({k: tuple(tuple(v if m else 0.0 for v, m in zip(r, mr)) for r, mr in zip(rows, mask.kinds[k]))
                       for k, rows in scores.kinds.items()})


def settings_of(config, mask: HeadMask | None, **extra) -> dict:
    """The provenance settings every scorer here records."""
    return {"normalize": config.normalize, "batch_size": config.batch_size, "max_length": config.max_length,
            "masked_heads": len(mask.removed()) if mask is not None else 0, **extra}
