"""Kwon et al.'s neuron mask tuning used as repair: one least-squares scale per feed-forward neuron.

After :func:`.tuning.repair_mask` repairs an attention layer, the feed-forward block after it
(:meth:`ArchitectureAdapter.feed_forward`: ``norm(W2 h + b + x)``) gets one scale ``m_i`` per neuron, fitted
so that ``W2 (m * h_s) + b + x_s`` reproduces the unpruned ``W2 h_t + b + x_t`` on the calibration tokens
(the first token only in a classifier's last layer, ``only_first``). The normal equations
``(G + lambda I) m = c``, ``G = (sum_t h_t h_t') * (W2'W2)``, ``c_i = sum_t h_ti <w_i, r_t>`` are summed in
float64 over batches. Scales are kept only where they lower the error and lie in ±MAX_SCALE; they fold into
W2's columns. ``damping`` pulls them towards 1 (:func:`.least_squares.damped_solve`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from pruning_core.modeling.architectures import FeedForward
from pruning_core.compress.capture import capture_site, run_to_site
from pruning_core.compress.least_squares import MAX_SCALE, damped_solve


@dataclass(frozen=True)
class FeedForwardRepair:
    """What repair did to one feed-forward block (JSON-ready)."""

    kind: str
    layer: int
    choice: str                       # "none" | "scales"
    residual_before: float            # mean squared error per token of the residual sum, untuned
    residual_after: float             # the same after repair (<= residual_before)
    target_power: float               # mean ||y_t + x_t - b - x_s||^2 per token, for scale
    scale_min: float = 1.0
    scale_max: float = 1.0
    tokens: str = "all"               # "all" real tokens | "first" (the last layer of a head that reads token 0)
    note: str = ""


def _rows(tensor: torch.Tensor, batch, kind: str, only_first: bool) -> torch.Tensor:
    """``[B, T, w]`` -> ``[N, w]``: the real tokens of ``kind``, or each example's first token."""
    if only_first:
        return tensor[:, 0]
    return tensor[batch.token_masks[kind].to(tensor.device).bool()]


def tune_feed_forward(teacher: nn.Module, t_block: FeedForward, student: nn.Module, s_block: FeedForward, data,
                      batch_size: int, device, kind: str, layer: int, only_first: bool = False,
                      damping: float = 0.0) -> FeedForwardRepair:
    """Fit and fold the neuron scales of ``s_block`` (the student's copy of ``t_block``) in place; see the module
    docstring. ``teacher`` is only read."""
    weight = s_block.out.weight.detach().double()                   # [d, n]: nn.Linear stores [out, in]
    bias = s_block.out.bias.detach().double() if s_block.out.bias is not None else 0.0
    n = weight.shape[1]
    hh, hr = torch.zeros(n, n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
    rr, tokens = 0.0, 0
    with capture_site(t_block, t_block.residual) as t, capture_site(s_block, s_block.residual) as s:
        for batch in data.batches(batch_size, device=device):
            run_to_site(teacher, batch.inputs, t)
            run_to_site(student, batch.inputs, s)
            goal = _rows(t.y + t.x, batch, kind, only_first).double()
            h = _rows(s.z, batch, kind, only_first).double()        # [N, n]
            r = goal - bias - _rows(s.x, batch, kind, only_first).double()
            hh += (h.T @ h).cpu()
            hr += (h * (r @ weight)).sum(0).cpu()
            rr += float((r * r).sum())
            tokens += h.shape[0]
    gram = hh * (weight.T @ weight).cpu()
    ones = torch.ones(n, dtype=torch.float64)
    residual = lambda m: max(float(m @ gram @ m - 2 * m @ hr) + rr, 0.0)
    before, count = residual(ones), max(tokens, 1)
    scales = damped_solve(gram, hr, damping)
    where = "first" if only_first else "all"
    if scales is None:
        return FeedForwardRepair(kind, layer, "none", before / count, before / count, rr / count, tokens=where,
                                 note=f"a scale fell outside [-{MAX_SCALE:g}, {MAX_SCALE:g}], refused")
    after = residual(scales)
    if after >= before:
        return FeedForwardRepair(kind, layer, "none", before / count, before / count, rr / count, tokens=where)
    with torch.no_grad():
        s_block.out.weight.mul_(scales.to(s_block.out.weight.dtype).to(s_block.out.weight.device)[None, :])
    return FeedForwardRepair(kind, layer, "scales", before / count, after / count, rr / count,
                             float(scales.min()), float(scales.max()), where)
