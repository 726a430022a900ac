"""Retraining-free repair of a masked model, on a copy: per-layer least-squares scales folded into W_O
(Kwon et al. 2022) and FLAP's bias compensation (An et al. 2024).

:func:`repair_mask` deep-copies the model (the one passed in is only read) and visits the sites in forward
order: the calibration data runs to each site (:func:`.capture.run_to_site`) through the unpruned teacher and
the already-tuned copy, :mod:`.least_squares` picks the kept heads' scales (and the bias shift), and they are
folded into the copy's W_O, removed heads' columns becoming 0. Targets: ``"output"`` fits the layer's output,
``"residual"`` the residual sum (so each layer also corrects the drift from below). On grouped-query models
scales belong to query heads. Why the defaults, and the options measured and left off: docs/METHODS.md.
:class:`RepairResult` holds the tuned copy at full shape; ``pruning.prune_heads`` then removes the zeroed heads.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from pruning_core.modeling.architectures import AttentionSite, adapter_for
from pruning_core.core.heads import KINDS, HeadMask
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.compress.capture import capture_site, head_columns, record_outputs, run_to_site
from pruning_core.compress.choose import SuffixLoss, apply_candidate, pick_by_loss
from pruning_core.compress.ffn import FeedForwardRepair, tune_feed_forward
from pruning_core.compress.least_squares import LayerStats, NormJacobian, solve_layer


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
    target: str = "output"            # "normed" | "residual": y_t + x_t - x_s (drift from below corrected) | "output"
    tokens: str = "all"               # "all" real tokens | "first" (the last layer of a head that reads token 0)
    losses: dict = field(default_factory=dict)   # choice -> calibration loss, when chosen by loss


@dataclass
class RepairResult:
    """The tuned full-shape copy and the per-layer record. ``model`` is a private copy: prune it, evaluate it."""

    model: nn.Module
    mask: HeadMask
    layers: list[LayerRepair] = field(default_factory=list)
    calibration_examples: int = 0
    calibration_tokens: dict = field(default_factory=dict)   # kind -> real tokens per pass
    bias_compensation: bool = False
    target: str = "output"
    choose: str = "residual"
    feed_forward: list[FeedForwardRepair] = field(default_factory=list)   # neuron scales per block (ffn=True)
    seconds: float = 0.0

    def to_json(self) -> dict:
        # by hand: the record holds the tuned model (not written); target and choice written as their descriptions
        return {"layers": [asdict(l) for l in self.layers], "calibration_examples": self.calibration_examples,
                "calibration_tokens": self.calibration_tokens, "bias_compensation": self.bias_compensation,
                "target": TARGETS[self.target], "choose": CHOICES[self.choose],
                "feed_forward": [asdict(f) for f in self.feed_forward], "seconds": self.seconds}


TARGETS = {"residual": "residual sum before LayerNorm, W_O z + b + x: y_t + (x_t - x_s) where the family's adapter "
                       "names its residual (each layer's 'target' says), else the output projection's output",
           "output": "output projection output y_t (teacher: the unpruned model on the same example)",
           "normed": "residual sum, its error mapped through the Jacobian of the LayerNorm after it at the teacher's "
                     "sum (post-LN families; others: the residual target)"}
CHOICES = {"residual": "per layer, the candidate with the smallest least-squares error",
           "loss": "per layer from the bottom, the candidate with the smallest calibration loss of the whole model"}


def compute_order(sites: list[AttentionSite]) -> list[AttentionSite]:
    """Sites in the order a forward pass reaches them: encoder layers, then per decoder layer self before cross."""
    def key(s: AttentionSite) -> tuple[int, int, int]:
        return (0 if s.kind == "encoder_self" else 1, s.layer, KINDS.index(s.kind))
    return sorted(sites, key=key)


def _real_rows(tensor: torch.Tensor, batch, kind: str) -> torch.Tensor:
    """``tensor`` ``[B, T, w]`` -> ``[N, w]``: the rows of the real (non-padding) tokens of ``kind``."""
    real = batch.token_masks[kind].to(tensor.device).bool()
    return tensor[real]


def _first_of_real(batch, kind: str) -> torch.Tensor:
    """``[N]`` bool over the real tokens' rows (:func:`_real_rows`): True at each example's first token."""
    real = batch.token_masks[kind].bool()
    first = torch.zeros_like(real)
    first[:, 0] = real[:, 0]
    return first[real]


TEACHER_CACHE_BYTES = 2**30     # the teacher's outputs are kept from one pass when they fit in this, else recomputed


def teacher_outputs(loaded, sites: list[AttentionSite], data, batch_size: int,
                    residuals: dict | None = None) -> list[dict] | None:
    """Per batch, per site ``(kind, layer)``: the unpruned model's output projection output on the real tokens
    ``[N, d_out]`` (plus its residual where ``residuals`` names the source), from one full pass; None (nothing
    kept) as soon as the batches so far, extrapolated to all, would take more than :data:`TEACHER_CACHE_BYTES`."""
    batches = max(1, math.ceil(data.n_examples / batch_size))
    cached, used = [], 0
    with record_outputs(sites, residuals) as outputs, torch.inference_mode():
        for b, batch in enumerate(data.batches(batch_size, device=loaded.device)):
            loaded.model(**batch.inputs)
            cached.append({key: _real_rows(y, batch, key[0]) for key, y in outputs.items()})
            used += sum(t.numel() * t.element_size() for t in cached[-1].values())
            if used / (b + 1) * batches > TEACHER_CACHE_BYTES:
                return None
    return cached


def repair_mask(loaded, mask: HeadMask, data, *, bias_compensation: bool = False, fit_bias: bool = False,
                target: str = "output", choose: str = "residual", task=None, head_tokens: bool = False,
                ffn: bool = False, damping: float = 0.0, batch_size: int = 32,
                progress: ProgressCallback | None = None) -> RepairResult:
    """Tune a copy of ``loaded.model`` under ``mask`` (1 = keep) on ``data`` (calibration examples).

    Args:
        loaded: a ``LoadedModel``; read only (its model is the teacher).
        mask: which heads stay. A full mask returns an untouched copy.
        data: encoded calibration examples (labels are not read).
        bias_compensation: also offer FLAP's bias shift per layer (kept where it lowers the residual).
        fit_bias: also offer scales and bias shift fitted together (lower residual; on the default it cost
            3 points of accuracy against FLAP's shift: off by default, see benchmarks/compress.py).
        target: ``"output"`` (the output projection's output) or ``"residual"`` (the layer's residual sum, where
            the family names its residual) or ``"normed"`` (the residual sum's error after the LayerNorm that
            follows it, to first order: :class:`.least_squares.NormJacobian`; post-LN families); see the module
            docstring.
        choose: ``"residual"`` (each layer keeps its candidate with the smallest least-squares error) or ``"loss"``
            (the smallest calibration loss of the whole model, greedy from the bottom: :mod:`.choose`; needs ``task``
            and labelled ``data``).
        task: the task whose loss ``choose="loss"`` reads.
        head_tokens: where the output head reads only the first token of the last layer (``LayerStack.first_token``),
            fit that layer on that token alone (the other tokens' outputs reach nothing).
        ffn: after each repaired attention layer, also tune one scale per neuron of the feed-forward block after
            it (:mod:`.ffn`, Kwon et al.'s neuron mask tuning), where the family names that block.
        damping: pull every least-squares scale towards 1 by this share of the mean Gram diagonal
            (:func:`.least_squares.damped_solve`; 0: none, only the tiny ridge).
        batch_size: calibration examples per forward pass.
        progress: ``report`` callback, stage ``"repair"`` (one unit per site); raise ``Cancelled`` to stop.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {sorted(TARGETS)}, got {target!r}.")
    if choose not in CHOICES or (choose == "loss" and task is None):
        raise ValueError(f"choose must be one of {sorted(CHOICES)} ('loss' with a task), got {choose!r}.")
    start = time.perf_counter()
    mask.check_fits(loaded.layout)
    student = copy.deepcopy(loaded.model).eval()
    result = RepairResult(student, mask, calibration_examples=int(data.n_examples),
                          bias_compensation=bias_compensation, target=target, choose=choose)
    if mask.is_full():
        result.seconds = time.perf_counter() - start
        return result
    teacher_sites = compute_order(loaded.sites)
    student_sites = compute_order(adapter_for(student).sites(student))
    first = next(i for i, s in enumerate(teacher_sites) if 0 in mask.kinds[s.kind][s.layer])
    t_res, s_res = _residual_sources(loaded.model, teacher_sites, student, student_sites, target)
    norms = _post_norms(loaded.model, teacher_sites, t_res) if target == "normed" else {}
    cached = teacher_outputs(loaded, teacher_sites[first:], data, batch_size, t_res)
    stack = adapter_for(student).layer_stack(student) if head_tokens else None
    last_read = (stack.kind, len(stack.layers) - 1) if stack is not None and stack.first_token else None
    student_loaded = loaded.derive(student) if choose == "loss" else None
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
        only_first = key == last_read
        with capture_site(t_site, t_res.get(key)) as teacher, capture_site(s_site, s_res.get(key)) as own:
            for b, batch in enumerate(data.batches(batch_size, device=loaded.device)):
                if cached is None:
                    run_to_site(loaded.model, batch.inputs, teacher)
                goal = cached[b][key] if cached is not None else _real_rows(_summed(teacher), batch, s_site.kind)
                run_to_site(student, batch.inputs, own)
                z = _real_rows(own.z, batch, s_site.kind)
                x = _real_rows(own.x, batch, s_site.kind) if key in s_res and own.x is not None else None
                if only_first:                                      # the head reads token 0 of this layer only
                    rows = _first_of_real(batch, s_site.kind).to(z.device)
                    goal, z, x = goal[rows], z[rows], (x[rows] if x is not None else None)
                jacobian = NormJacobian.at(norms[key], goal) if key in norms else None   # at the teacher's sum
                if key in s_res:                                    # y_t + x_t - x_s (module docstring)
                    if x is None:
                        raise RuntimeError(f"{key}: the residual source never ran before the output projection.")
                    goal = goal - x
                stats.add(z, goal, columns, bias, jacobian)
        result.calibration_tokens[s_site.kind] = max(int(stats.n), result.calibration_tokens.get(s_site.kind, 0))
        can_shift = bias_compensation and bias is not None and bool(removed)
        losses: dict[str, float] = {}
        pick = None
        if choose == "loss":
            suffix = SuffixLoss(student_loaded, task, data, mask, s_site, batch_size)
            pick = pick_by_loss(s_site, row, kept, suffix, losses)
        solution = solve_layer(stats, stats.bias_shift(removed, columns) if can_shift else None,
                               fit_bias=fit_bias and can_shift, pick=pick, damping=damping)
        apply_candidate(s_site, row, kept, solution.scales, solution.delta)
        blocks = (adapter_for(loaded.model).feed_forward(loaded.model, t_site),
                  adapter_for(student).feed_forward(student, s_site)) if ffn else (None, None)
        if blocks[0] is not None and blocks[1] is not None:
            result.feed_forward.append(tune_feed_forward(loaded.model, blocks[0], student, blocks[1], data, batch_size,
                                                         loaded.device, s_site.kind, s_site.layer, only_first,
                                                         damping))
        note = solution.note
        if bias_compensation and bias is None and removed:
            note = "; ".join(filter(None, [note, "no output bias: bias compensation not possible"]))
        result.layers.append(LayerRepair(
            s_site.kind, s_site.layer, tuple(kept), solution.scales, solution.choice, solution.residual_before,
            solution.residual_after, solution.target_power,
            float(solution.delta.norm()) if solution.delta is not None else 0.0, note,
            "normed" if key in norms else "residual" if key in s_res else "output",
            "first" if only_first else "all", losses))
        report(progress, "repair", i + 1, len(student_sites), f"{s_site.kind} layer {s_site.layer}")
    result.seconds = time.perf_counter() - start
    return result


def _residual_sources(teacher: nn.Module, teacher_sites: list[AttentionSite], student: nn.Module,
                      student_sites: list[AttentionSite], target: str) -> tuple[dict, dict]:
    """``(kind, layer)`` -> residual source module, for the teacher and for the student: empty with
    ``target="output"``; sites whose family names no residual are left out (they fit the output alone)."""
    if target == "output":
        return {}, {}
    t_adapter, s_adapter = adapter_for(teacher), adapter_for(student)
    t_res, s_res = {}, {}
    for t_site, s_site in zip(teacher_sites, student_sites):
        t_mod, s_mod = t_adapter.residual_source(t_site), s_adapter.residual_source(s_site)
        if t_mod is not None and s_mod is not None:
            t_res[(t_site.kind, t_site.layer)], s_res[(s_site.kind, s_site.layer)] = t_mod, s_mod
    return t_res, s_res


def _summed(held) -> torch.Tensor:
    """The captured output projection output, plus the residual where one was captured."""
    return held.y + held.x if held.x is not None else held.y


def _post_norms(teacher: nn.Module, sites: list[AttentionSite], residuals: dict) -> dict:
    """``(kind, layer)`` -> the LayerNorm after the site's residual sum, where the family names it and its residual."""
    adapter = adapter_for(teacher)
    found = {(s.kind, s.layer): adapter.post_norm(s) for s in sites if (s.kind, s.layer) in residuals}
    return {key: norm for key, norm in found.items() if norm is not None}
