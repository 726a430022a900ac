"""Kwon et al.'s mask tuning for one attention layer, as a small least-squares problem (float64).

The pruned layer's output is ``y_s = b + delta + sum_{h kept} m_h a_h`` per token (``a_h = z_h @ W_h``, head
h's contribution; ``m_h`` its scale; ``delta`` FLAP's bias shift); the teacher is the unpruned layer's ``y_t``.
:class:`LayerStats` adds up, batch by batch, the sums that the squared error over the calibration tokens is
made of, and :func:`solve_layer` solves the ridge-regularised normal equations, refuses scales outside
``[-MAX_SCALE, MAX_SCALE]`` and keeps the candidate of smallest error (no change is always one, so tuning
never increases the residual); :func:`solve_centred` fits scales and shift together. A :class:`NormJacobian`
weighs each token's error through the Jacobian of the LayerNorm after the residual sum (``target="normed"``).
The equations in full: docs/METHODS.md, "Repair as least squares".
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

RIDGE = 1e-6          # lambda = RIDGE * mean diagonal of G: ties broken, the optimum moved by ~1e-6 relative
MAX_SCALE = 10.0      # scales outside [-10, 10] are refused (METHODS.md)


@dataclass(frozen=True)
class NormJacobian:
    """The Jacobian of ``LayerNorm(u) = gamma * (u - mean u) / sigma + beta`` at the teacher's sums ``u_t``:
    ``J_t = diag(gamma) / sigma_t (I - 11'/d - u_hat u_hat'/d)`` with ``u_hat = (u_t - mean) / sigma_t``
    (``sigma_t = sqrt(var + eps)``), one per token. ``gamma`` ``[d]``, ``inv_sigma`` ``[N]``, ``u_hat`` ``[N, d]``,
    float64."""

    gamma: torch.Tensor
    inv_sigma: torch.Tensor
    u_hat: torch.Tensor

    @classmethod
    def at(cls, norm: torch.nn.LayerNorm, u: torch.Tensor) -> "NormJacobian":
        """``norm``'s Jacobian at each row of ``u`` ``[N, d]`` (the teacher's residual sums)."""
        u = u.double()
        centred = u - u.mean(-1, keepdim=True)
        sigma = (centred.pow(2).mean(-1, keepdim=True) + norm.eps).sqrt()           # [N, 1]
        gamma = norm.weight.detach().double() if norm.weight is not None else torch.ones(u.shape[-1], dtype=u.dtype)
        return cls(gamma.to(u.device), (1 / sigma).squeeze(-1), centred / sigma)

    def _project(self, v: torch.Tensor) -> torch.Tensor:
        """``(I - 11'/d - u_hat u_hat'/d) v`` per token; ``v`` ``[N, ..., d]``."""
        d = v.shape[-1]
        u = self.u_hat.reshape(self.u_hat.shape[0], *([1] * (v.dim() - 2)), d)
        v = v - v.mean(-1, keepdim=True)
        return v - u * (v * u).sum(-1, keepdim=True) / d

    def _diag(self, v: torch.Tensor) -> torch.Tensor:
        """``gamma / sigma_t`` broadcast over ``v`` ``[N, ..., d]``."""
        return self.gamma * self.inv_sigma.reshape(-1, *([1] * (v.dim() - 1)))

    def apply(self, v: torch.Tensor) -> torch.Tensor:
        """``J_t v_t`` for ``v`` ``[N, ..., d]``."""
        return self._project(v) * self._diag(v)

    def apply_t(self, w: torch.Tensor) -> torch.Tensor:
        """``J_t' w_t`` (the projection is symmetric) for ``w`` ``[N, ..., d]``."""
        return self._project(w * self._diag(w))

    def gram(self) -> torch.Tensor:
        """``sum_t J_t' J_t`` ``[d, d]``: with ``V_t = [1, u_hat_t] / sqrt(d)`` and ``D_t = diag(gamma / sigma_t)``,
        ``J_t' J_t = D^2 - V V' D^2 - D^2 V V' + V (V' D^2 V) V'`` (two matrix products over all tokens)."""
        n, d = self.u_hat.shape
        v = torch.stack([torch.ones_like(self.u_hat), self.u_hat], -1) / d ** 0.5       # [N, d, 2]
        d2 = (self.gamma ** 2) * self.inv_sigma[:, None] ** 2                            # [N, d]
        w = v * d2[..., None]                                                            # D^2 V  [N, d, 2]
        b = v.permute(1, 0, 2).reshape(d, 2 * n) @ w.permute(0, 2, 1).reshape(2 * n, d)     # sum V W'
        m = torch.einsum("nia,nib->nab", v, w)                                           # V' D^2 V  [N, 2, 2]
        vm = torch.einsum("nia,nab->nib", v, m)                                          # [N, d, 2]
        c = vm.permute(1, 0, 2).reshape(d, 2 * n) @ v.permute(0, 2, 1).reshape(2 * n, d)
        return torch.diag(d2.sum(0)) - b - b.T + c


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
    delta_gram: torch.Tensor | None = field(init=False, default=None)   # [d_out, d_out] sum J'J; None: n I

    def __post_init__(self) -> None:
        k = len(self.kept)
        f64 = torch.float64
        self.gram, self.cross = torch.zeros(k, k, dtype=f64), torch.zeros(k, dtype=f64)
        self.head_sum, self.r_sum = torch.zeros(k, self.d_out, dtype=f64), torch.zeros(self.d_out, dtype=f64)
        self.z_sum = torch.zeros(self.heads, self.head_dim, dtype=f64)

    def add(self, z: torch.Tensor, y_teacher: torch.Tensor, columns: torch.Tensor, bias: torch.Tensor | None,
            norm: NormJacobian | None = None) -> None:
        """Add the real tokens of one batch.

        Args:
            z: ``[N, heads * head_dim]`` the pruned model's head outputs at this layer (every head, removed
                ones too: their mean feeds the bias compensation).
            y_teacher: ``[N, d_out]`` the unpruned layer's output projection output on the same tokens.
            columns: ``[heads, head_dim, d_out]`` the original W_O blocks (:func:`.capture.head_columns`).
            bias: ``[d_out]`` the output projection's bias, or None.
            norm: the LayerNorm's Jacobian at these tokens' teacher sums: errors are measured after it.
        """
        z = z.double().reshape(z.shape[0], self.heads, self.head_dim)            # [N, heads, head_dim]
        r = y_teacher.double() - (bias.double() if bias is not None else 0.0)     # [N, d_out]
        a = torch.einsum("nhd,hdo->nho", z[:, self.kept], columns[self.kept].double())   # [N, K, d_out]
        self.z_sum += z.sum(0).cpu()
        self.n += float(z.shape[0])
        if norm is not None:                               # errors after the LayerNorm, to first order
            a, r = norm.apply(a), norm.apply(r)
            self.head_sum += norm.apply_t(a).sum(0).cpu()  # S[h] = sum J'J a_h
            self.r_sum += norm.apply_t(r).sum(0).cpu()
            gram = norm.gram().cpu()
            self.delta_gram = gram if self.delta_gram is None else self.delta_gram + gram
        else:
            self.head_sum += a.sum(0).cpu()
            self.r_sum += r.sum(0).cpu()
        self.gram += torch.einsum("nho,nko->hk", a, a).cpu()
        self.cross += torch.einsum("nho,no->h", a, r).cpu()
        self.rr += float((r * r).sum())

    def residual(self, scales: torch.Tensor, delta: torch.Tensor | None = None) -> float:
        """``f(m, delta)``: the summed squared error of the layer's output against the teacher's."""
        m = scales.double()
        c = self.cross - (self.head_sum @ delta if delta is not None else 0.0)
        value = float(m @ self.gram @ m - 2 * m @ c) + self.rr
        if delta is not None:
            value += float(-2 * self.r_sum @ delta + delta @ self.shift_gram() @ delta)
        return max(value, 0.0)

    def shift_gram(self) -> torch.Tensor:
        """``H`` ``[d_out, d_out]``: the bias shift's quadratic term, ``sum_t J_t' J_t`` (``n I`` without Jacobian)."""
        if self.delta_gram is not None:
            return self.delta_gram
        return self.n * torch.eye(self.d_out, dtype=torch.float64)

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


def damped_solve(gram: torch.Tensor, cross: torch.Tensor, damping: float = 0.0) -> torch.Tensor | None:
    """``m`` minimising ``m'Gm - 2 m'c + lambda ||m||^2 + mu ||m - 1||^2``: ``(G + (lambda + mu) I) m = c + mu 1``,
    with ``lambda`` = :data:`RIDGE` and ``mu`` = ``damping`` times the mean diagonal of G (damping pulls the scales
    towards 1, untouched; Kwon et al. solve with a damped LSMR). None when a scale falls outside ±:data:`MAX_SCALE`."""
    k = gram.shape[0]
    if k == 0:
        return torch.zeros(0, dtype=torch.float64)
    size = max(float(gram.diagonal().mean()), 1e-30)
    pull = damping * size
    scales = torch.linalg.solve(gram + (RIDGE * size + pull) * torch.eye(k, dtype=torch.float64),
                                cross + pull * torch.ones(k, dtype=torch.float64))
    if not torch.isfinite(scales).all() or scales.abs().max() > MAX_SCALE:
        return None
    return scales


def solve_scales(stats: LayerStats, delta: torch.Tensor | None = None, damping: float = 0.0) -> torch.Tensor | None:
    """The least-squares scales ``[K]`` (:func:`damped_solve`), or None when one falls outside ±:data:`MAX_SCALE`."""
    c = stats.cross - (stats.head_sum @ delta if delta is not None else 0.0)
    return damped_solve(stats.gram, c, damping)


def solve_centred(stats: LayerStats, damping: float = 0.0) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Scales and bias shift fitted together: for given scales the best shift solves ``H delta = r_sum - S'm``
    (the mean residual when ``H = n I``); put back, the scales solve ``(G - S H^+ S' + lambda I) m = c - S H^+ r_sum``
    (``H^+``: pseudo-inverse; a LayerNorm's Jacobian ignores shifts along 1). None when a scale falls outside
    ±:data:`MAX_SCALE`."""
    h_inv = (torch.linalg.pinv(stats.delta_gram, hermitian=True) if stats.delta_gram is not None
             else torch.eye(stats.d_out, dtype=torch.float64) / max(stats.n, 1.0))
    gram = stats.gram - stats.head_sum @ h_inv @ stats.head_sum.T
    cross = stats.cross - stats.head_sum @ h_inv @ stats.r_sum
    scales = damped_solve(gram, cross, damping)
    if scales is None:
        return None
    return scales, h_inv @ (stats.r_sum - stats.head_sum.T @ scales)


Candidate = tuple[str, torch.Tensor, "torch.Tensor | None"]        # (choice, scales [K], bias shift [d_out] or None)


def layer_candidates(stats: LayerStats, delta: torch.Tensor | None = None, fit_bias: bool = False,
                     damping: float = 0.0) -> tuple[list[Candidate], list[str]]:
    """No change, least-squares scales, the bias shift ``delta`` (when given), both, and with ``fit_bias``
    scales and shift fitted together (:func:`solve_centred`); and notes on the candidates refused."""
    ones = torch.ones(len(stats.kept), dtype=torch.float64)
    candidates: list[Candidate] = [("none", ones, None)]
    notes = []
    for name, shift in (("scales", None), ("scales+bias", delta)):
        if not stats.kept or (name == "scales+bias" and shift is None):      # no kept head: nothing to scale
            continue
        scales = solve_scales(stats, shift, damping)
        if scales is None:
            notes.append(f"{name}: a scale fell outside [-{MAX_SCALE:g}, {MAX_SCALE:g}], refused")
        else:
            candidates.append((name, scales, shift))
    if delta is not None:
        candidates.append(("bias", ones, delta))
    if fit_bias and stats.kept:
        fitted = solve_centred(stats, damping)
        if fitted is None:
            notes.append(f"scales+fitted-bias: a scale fell outside [-{MAX_SCALE:g}, {MAX_SCALE:g}], refused")
        else:
            candidates.append(("scales+fitted-bias", *fitted))
    return candidates, notes


def solve_layer(stats: LayerStats, delta: torch.Tensor | None = None, fit_bias: bool = False,
                pick: Callable[[list[Candidate]], int] | None = None, damping: float = 0.0) -> LayerSolution:
    """The candidate (:func:`layer_candidates`) with the smallest residual ``f``, or the one ``pick`` chooses
    (an index into the candidates: e.g. by the model's calibration loss, :mod:`.choose`); then the residual
    after may exceed the one before."""
    n = max(stats.n, 1.0)
    candidates, notes = layer_candidates(stats, delta, fit_bias, damping)
    before = stats.residual(candidates[0][1])
    if pick is None:
        name, scales, shift = min(candidates, key=lambda c: stats.residual(c[1], c[2]))
        after = min(stats.residual(scales, shift), before)
    else:
        name, scales, shift = candidates[pick(candidates)]
        after = stats.residual(scales, shift)
    return LayerSolution(tuple(float(s) for s in scales), shift, name, before / n, after / n,
                         stats.rr / n, "; ".join(notes))
