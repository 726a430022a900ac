"""Kwon et al.'s mask tuning for one attention layer, as a small least-squares problem (float64).

The pruned layer's output projection computes ``y_s = b + delta + sum_{h kept} m_h a_h`` per token,
where ``a_h = z_h @ W_h`` is head h's contribution (its output ``z_h`` ``[head_dim]`` on the pruned
model's own input to this layer, times its ``[head_dim, d_out]`` block of W_O), ``m_h`` the tuned
scale (1 = untouched), ``b`` the bias and ``delta`` FLAP's bias compensation (0 = none). The
teacher is the unpruned layer's output ``y_t`` on the same example. Over the calibration tokens

    f(m, delta) = sum_tokens ||y_s - y_t||^2
                = m'Gm - 2 m'(c - S delta) + rr - 2 <r_sum, delta> + n ||delta||^2

with ``r = y_t - b``, ``G[h, k] = sum <a_h, a_k>``, ``c[h] = sum <a_h, r>``, ``S[h] = sum a_h``,
``rr = sum ||r||^2``, ``r_sum = sum r`` and ``n`` tokens: :class:`LayerStats` adds these up batch by
batch, so memory does not grow with the calibration size.

:func:`solve_layer` solves the normal equations ``(G + lambda I) m = c - S delta`` (lambda = a small
ridge, :data:`RIDGE` times the mean diagonal of G, so a head whose output is a copy of another's
still gives one answer), refuses scales outside ``[-MAX_SCALE, MAX_SCALE]`` (METHODS.md), and keeps
whichever candidate has the smallest ``f``: no change, scales, the bias shift, or both. No change is
always a candidate, so tuning never increases the layer's residual on the calibration data. With a bias to
shift, :func:`solve_centred` also fits scales and shift together (their joint least-squares optimum, of
which FLAP's shift with the fitted scales is one point).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

RIDGE = 1e-6          # lambda = RIDGE * mean diagonal of G: ties broken, the optimum moved by ~1e-6 relative
MAX_SCALE = 10.0      # scales outside [-10, 10] are refused (METHODS.md)


@dataclass
class LayerStats:
    """Float64 sums over one layer's calibration tokens (see the module docstring); ``kept``: head ids."""

    kept: list[int]
    heads: int
    head_dim: int
    d_out: int
    gram: torch.Tensor = field(init=False)           # [K, K]
    cross: torch.Tensor = field(init=False)          # [K]
    head_sum: torch.Tensor = field(init=False)       # [K, d_out]
    r_sum: torch.Tensor = field(init=False)          # [d_out]
    z_sum: torch.Tensor = field(init=False)          # [heads, head_dim]: every head's output summed
    rr: float = 0.0
    n: float = 0.0

    def __post_init__(self) -> None:
        k = len(self.kept)
        f64 = torch.float64
        self.gram, self.cross = torch.zeros(k, k, dtype=f64), torch.zeros(k, dtype=f64)
        self.head_sum, self.r_sum = torch.zeros(k, self.d_out, dtype=f64), torch.zeros(self.d_out, dtype=f64)
        self.z_sum = torch.zeros(self.heads, self.head_dim, dtype=f64)

    def add(self, z: torch.Tensor, y_teacher: torch.Tensor, columns: torch.Tensor, bias: torch.Tensor | None) -> None:
        """Add the real tokens of one batch.

        Args:
            z: ``[N, heads * head_dim]`` the pruned model's head outputs at this layer (every head, removed
                ones too: their mean feeds the bias compensation).
            y_teacher: ``[N, d_out]`` the unpruned layer's output projection output on the same tokens.
            columns: ``[heads, head_dim, d_out]`` the original W_O blocks (:func:`.capture.head_columns`).
            bias: ``[d_out]`` the output projection's bias, or None.
        """
        z = z.double().reshape(z.shape[0], self.heads, self.head_dim)            # [N, heads, head_dim]
        r = y_teacher.double() - (bias.double() if bias is not None else 0.0)     # [N, d_out]
        a = torch.einsum("nhd,hdo->nho", z[:, self.kept], columns[self.kept].double())   # [N, K, d_out]
        self.gram += torch.einsum("nho,nko->hk", a, a).cpu()
        self.cross += torch.einsum("nho,no->h", a, r).cpu()
        self.head_sum += a.sum(0).cpu()
        self.r_sum += r.sum(0).cpu()
        self.z_sum += z.sum(0).cpu()
        self.rr += float((r * r).sum())
        self.n += float(z.shape[0])

    def residual(self, scales: torch.Tensor, delta: torch.Tensor | None = None) -> float:
        """``f(m, delta)``: the summed squared error of the layer's output against the teacher's."""
        m = scales.double()
        c = self.cross - (self.head_sum @ delta if delta is not None else 0.0)
        value = float(m @ self.gram @ m - 2 * m @ c) + self.rr
        if delta is not None:
            value += float(-2 * self.r_sum @ delta + self.n * delta @ delta)
        return max(value, 0.0)

    def bias_shift(self, removed: list[int], columns: torch.Tensor) -> torch.Tensor:
        """FLAP's compensation: ``sum_{h removed} mean(z_h) @ W_h`` ``[d_out]`` (the removed heads' mean contribution)."""
        if not removed or self.n == 0:
            return torch.zeros(self.d_out, dtype=torch.float64)
        mean = self.z_sum[removed] / self.n                                       # [R, head_dim]
        return torch.einsum("hd,hdo->o", mean, columns[removed].double().cpu())


@dataclass(frozen=True)
class LayerSolution:
    """What tuning chose for one layer: scales of the kept heads, a bias shift, and the residuals."""

    scales: tuple[float, ...]         # one per kept head (1.0 = untouched)
    delta: torch.Tensor | None        # [d_out] added to the output bias, or None
    choice: str                       # "none" | "scales" | "bias" | "scales+bias" | "scales+fitted-bias"
    residual_before: float            # mean squared error per token, untuned (m = 1, no shift)
    residual_after: float             # the same after the chosen repair (never above residual_before)
    target_power: float               # mean ||y_teacher - b||^2 per token: the scale the residuals compare to
    note: str = ""


def solve_scales(stats: LayerStats, delta: torch.Tensor | None = None) -> torch.Tensor | None:
    """The least-squares scales ``[K]`` (ridge :data:`RIDGE`), or None when one falls outside ±:data:`MAX_SCALE`."""
    k = len(stats.kept)
    if k == 0:
        return torch.zeros(0, dtype=torch.float64)
    c = stats.cross - (stats.head_sum @ delta if delta is not None else 0.0)
    ridge = RIDGE * max(float(stats.gram.diagonal().mean()), 1e-30)
    scales = torch.linalg.solve(stats.gram + ridge * torch.eye(k, dtype=torch.float64), c)
    if not torch.isfinite(scales).all() or scales.abs().max() > MAX_SCALE:
        return None
    return scales


def solve_centred(stats: LayerStats) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Scales and bias shift fitted together: for given scales the best shift is the mean residual,
    ``delta = (r_sum - S'm) / n``; put back, the scales solve the centred normal equations
    ``(G - S S'/n + lambda I) m = c - S r_sum / n``. None when a scale falls outside ±:data:`MAX_SCALE`."""
    n, k = max(stats.n, 1.0), len(stats.kept)
    gram = stats.gram - stats.head_sum @ stats.head_sum.T / n
    cross = stats.cross - stats.head_sum @ stats.r_sum / n
    ridge = RIDGE * max(float(gram.diagonal().mean()), 1e-30)
    scales = torch.linalg.solve(gram + ridge * torch.eye(k, dtype=torch.float64), cross)
    if not torch.isfinite(scales).all() or scales.abs().max() > MAX_SCALE:
        return None
    return scales, (stats.r_sum - stats.head_sum.T @ scales) / n


def solve_layer(stats: LayerStats, delta: torch.Tensor | None = None, fit_bias: bool = False) -> LayerSolution:
    """The best of: no change, least-squares scales, the bias shift ``delta`` (when given), both, and with
    ``fit_bias`` scales and shift fitted together (:func:`solve_centred`, the least-squares optimum of both)."""
    n = max(stats.n, 1.0)
    ones = torch.ones(len(stats.kept), dtype=torch.float64)
    candidates = [("none", ones, None)]
    notes = []
    for name, shift in (("scales", None), ("scales+bias", delta)):
        if not stats.kept or (name == "scales+bias" and shift is None):      # no kept head: nothing to scale
            continue
        scales = solve_scales(stats, shift)
        if scales is None:
            notes.append(f"{name}: a scale fell outside [-{MAX_SCALE:g}, {MAX_SCALE:g}], refused")
        else:
            candidates.append((name, scales, shift))
    if delta is not None:
        candidates.append(("bias", ones, delta))
    if fit_bias and stats.kept:
        fitted = solve_centred(stats)
        if fitted is None:
            notes.append(f"scales+fitted-bias: a scale fell outside [-{MAX_SCALE:g}, {MAX_SCALE:g}], refused")
        else:
            candidates.append(("scales+fitted-bias", *fitted))
    before = stats.residual(ones)
    name, scales, shift = min(candidates, key=lambda c: stats.residual(c[1], c[2]))
    after = stats.residual(scales, shift)
    return LayerSolution(tuple(float(s) for s in scales), shift, name, before / n, min(after, before) / n,
                         stats.rr / n, "; ".join(notes))
