"""Retraining-free repair of a masked model: per-layer least-squares scales folded into W_O (Kwon et al.
2022), and FLAP's bias compensation (An et al. 2024), on a copy.

:func:`repair_mask` deep-copies the model (the one passed in, often the dashboard's shared model, is
only read), then visits the attention sites in the order the forward pass computes them (encoder, then
each decoder layer's self- then cross-attention). For each site it runs the calibration data twice,
each pass stopping at that site (:func:`.capture.run_to_site`): through the unpruned model (the
teacher: the layer's output ``y_t``; kept from one full pass when every layer's fits in
:data:`TEACHER_CACHE_BYTES`) and through the copy, whose earlier layers are already pruned and
tuned (the student: the heads' outputs ``z`` on the input the pruned model really gives this layer).
:mod:`.least_squares` then picks the kept heads' scales and, with ``bias_compensation``, the shift of
the output bias (the removed heads' mean contribution); the copy's W_O gets the scales (removed heads'
columns become 0, which is exactly what the mask does) and the bias its shift. Layers before the first
one the mask changes are skipped: there the copy's input equals the teacher's.

The target is the output projection's output, not the residual sum after it: the adapters know where
that projection is in every family, not where each family adds its residual (pre- or post-norm). On
grouped-query models (Llama) a scale belongs to a query head (its W_O columns); key/value heads are
not tuned. A projection without a bias (Llama's ``o_proj``) takes no bias compensation (a new bias
would not load as a stock model); that is recorded per layer.

The result, :class:`RepairResult`, holds the tuned copy at full shape (removed heads' columns zero):
``pruning.prune_heads`` then removes them physically, and the smaller model has no extra parameters.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from ..architectures import AttentionSite, adapter_for
from ..heads import KINDS, HeadMask
from ..progress import ProgressCallback, report
from .capture import add_to_bias, capture_site, head_columns, record_outputs, run_to_site, scale_head_columns
from .least_squares import LayerSolution, LayerStats, solve_layer


@dataclass(frozen=True)
class LayerRepair:
    """What repair did to one attention site (JSON-ready)."""

    kind: str
    layer: int
    kept: tuple[int, ...]             # head ids kept (the order of ``scales``)
    scales: tuple[float, ...]         # the tuned scale of each kept head, folded into its W_O columns
    choice: str                       # "none" | "scales" | "bias" | "scales+bias" | "scales+fitted-bias"
    residual_before: float            # mean squared error per token of the output projection, untuned
    residual_after: float             # the same after repair (<= residual_before)
    target_power: float               # mean ||teacher output - bias||^2 per token, for scale
    bias_shift_norm: float = 0.0      # ||delta||_2 of the bias compensation applied (0 = none)
    note: str = ""


@dataclass
class RepairResult:
    """The tuned full-shape copy and the per-layer record. ``model`` is a private copy: prune it, evaluate it."""

    model: nn.Module
    mask: HeadMask
    layers: list[LayerRepair] = field(default_factory=list)
    calibration_examples: int = 0
    calibration_tokens: dict = field(default_factory=dict)   # kind -> real tokens per pass
    bias_compensation: bool = False
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"layers": [asdict(l) for l in self.layers], "calibration_examples": self.calibration_examples,
                "calibration_tokens": self.calibration_tokens, "bias_compensation": self.bias_compensation,
                "target": "output projection output (teacher: the unpruned model on the same example)",
                "seconds": self.seconds}


def compute_order(sites: list[AttentionSite]) -> list[AttentionSite]:
    """Sites in the order a forward pass reaches them: encoder layers, then per decoder layer self before cross."""
    def key(s: AttentionSite) -> tuple[int, int, int]:
        return (0 if s.kind == "encoder_self" else 1, s.layer, KINDS.index(s.kind))
    return sorted(sites, key=key)


def _real_rows(tensor: torch.Tensor, batch, kind: str) -> torch.Tensor:
    """``tensor`` ``[B, T, w]`` -> ``[N, w]``: the rows of the real (non-padding) tokens of ``kind``."""
    real = batch.token_masks[kind].to(tensor.device).bool()
    return tensor[real]


TEACHER_CACHE_BYTES = 2**30     # the teacher's outputs are kept from one pass when they fit in this, else recomputed


def teacher_outputs(loaded, sites: list[AttentionSite], data, batch_size: int) -> list[dict] | None:
    """Per batch, per site ``(kind, layer)``: the unpruned model's output projection output on the real tokens
    ``[N, d_out]``, from one full pass; None (nothing kept) as soon as the batches so far, extrapolated to all,
    would take more than :data:`TEACHER_CACHE_BYTES`."""
    batches = max(1, math.ceil(data.n_examples / batch_size))
    cached, used = [], 0
    with record_outputs(sites) as outputs, torch.inference_mode():
        for b, batch in enumerate(data.batches(batch_size, device=loaded.device)):
            loaded.model(**batch.inputs)
            cached.append({key: _real_rows(y, batch, key[0]) for key, y in outputs.items()})
            used += sum(t.numel() * t.element_size() for t in cached[-1].values())
            if used / (b + 1) * batches > TEACHER_CACHE_BYTES:
                return None
    return cached


def repair_mask(loaded, mask: HeadMask, data, *, bias_compensation: bool = False, fit_bias: bool = False,
                batch_size: int = 32, progress: ProgressCallback | None = None) -> RepairResult:
    """Tune a copy of ``loaded.model`` under ``mask`` (1 = keep) on ``data`` (calibration examples).

    Args:
        loaded: a ``LoadedModel``; read only (its model is the teacher).
        mask: which heads stay. A full mask returns an untouched copy.
        data: encoded calibration examples (labels are not read).
        bias_compensation: also offer FLAP's bias shift per layer (kept where it lowers the residual).
        fit_bias: also offer scales and bias shift fitted together (lower residual; on the default it cost
            3 points of accuracy against FLAP's shift: off by default, see benchmarks/compress.py).
        batch_size: calibration examples per forward pass.
        progress: ``report`` callback, stage ``"repair"`` (one unit per site); raise ``Cancelled`` to stop.
    """
    start = time.perf_counter()
    mask.check_fits(loaded.layout)
    student = copy.deepcopy(loaded.model).eval()
    result = RepairResult(student, mask, calibration_examples=int(data.n_examples),
                          bias_compensation=bias_compensation)
    if mask.is_full():
        result.seconds = time.perf_counter() - start
        return result
    teacher_sites = compute_order(loaded.sites)
    student_sites = compute_order(adapter_for(student).sites(student))
    first = next(i for i, s in enumerate(teacher_sites) if 0 in mask.kinds[s.kind][s.layer])
    cached = teacher_outputs(loaded, teacher_sites[first:], data, batch_size)
    for i, (t_site, s_site) in enumerate(zip(teacher_sites, student_sites)):
        row = mask.kinds[s_site.kind][s_site.layer]
        kept = [h for h, v in enumerate(row) if v]
        removed = [h for h, v in enumerate(row) if not v]
        if i < first or s_site.num_heads == 0:
            result.layers.append(LayerRepair(s_site.kind, s_site.layer, tuple(kept), (1.0,) * len(kept), "none",
                                             0.0, 0.0, 0.0, note="before the first pruned layer: input unchanged"))
            report(progress, "repair", i + 1, len(student_sites), f"{s_site.kind} layer {s_site.layer}")
            continue
        columns = head_columns(s_site).clone()          # the original W_O blocks [heads, head_dim, d_out]
        bias = s_site.out.bias.detach().clone() if getattr(s_site.out, "bias", None) is not None else None
        stats = LayerStats(kept, s_site.num_heads, s_site.head_dim, columns.shape[-1])
        key = (s_site.kind, s_site.layer)
        with capture_site(t_site) as teacher, capture_site(s_site) as own:
            for b, batch in enumerate(data.batches(batch_size, device=loaded.device)):
                if cached is None:
                    run_to_site(loaded.model, batch.inputs, teacher)
                target = cached[b][key] if cached is not None else _real_rows(teacher.y, batch, s_site.kind)
                run_to_site(student, batch.inputs, own)
                stats.add(_real_rows(own.z, batch, s_site.kind), target, columns, bias)
        result.calibration_tokens[s_site.kind] = int(stats.n)
        can_shift = bias_compensation and bias is not None and bool(removed)
        solution = solve_layer(stats, stats.bias_shift(removed, columns) if can_shift else None, fit_bias=fit_bias and can_shift)
        _apply(s_site, row, kept, solution)
        note = solution.note
        if bias_compensation and bias is None and removed:
            note = "; ".join(filter(None, [note, "no output bias: bias compensation not possible"]))
        result.layers.append(LayerRepair(
            s_site.kind, s_site.layer, tuple(kept), solution.scales, solution.choice, solution.residual_before,
            solution.residual_after, solution.target_power,
            float(solution.delta.norm()) if solution.delta is not None else 0.0, note))
        report(progress, "repair", i + 1, len(student_sites), f"{s_site.kind} layer {s_site.layer}")
    result.seconds = time.perf_counter() - start
    return result


def _apply(site: AttentionSite, row, kept: list[int], solution: LayerSolution) -> None:
    """Fold the solution into the copy's site: kept heads' columns times their scale, removed ones 0, bias shift."""
    factor = [0.0] * len(row)
    for h, s in zip(kept, solution.scales):
        factor[h] = s
    scale_head_columns(site, factor)
    if solution.delta is not None:
        add_to_bias(site, solution.delta)
