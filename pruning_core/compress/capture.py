"""Read one attention site's output projection during a forward pass, and its weights per head.

:func:`capture_site` runs a model up to one site's output projection and stops there: a hook on ``site.out``
keeps its input ``z`` ``[B, T, heads * head_dim]`` and output ``y`` ``[B, T, d_out]``, then raises
:class:`_Stop`; given the family's residual source (:meth:`ArchitectureAdapter.residual_source`) it also
keeps the residual ``x``. The hooks are scoped to the block (removed in ``finally``) and act only in the
asking thread (a ``ContextVar``), so the dashboard's shared model can be read while others evaluate it.
:func:`head_columns` gives the output projection's weight as one ``[head_dim, d_out]`` block per head
(``nn.Linear`` and ``Conv1D``); :func:`scale_head_columns` multiplies each block in place.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import torch
from torch import nn

from pruning_core.modeling.architectures import AttentionSite, FeedForward

# the capture tokens active in this thread (nested captures: a teacher's and a student's site at once)
_ACTIVE: ContextVar[frozenset] = ContextVar("headprune_repair_capture", default=frozenset())


class _Stop(Exception):
    """Raised by the capture hook once it has what it needs: the rest of the forward pass is skipped."""


@dataclass
class Captured:
    """What one forward pass gave at the site: ``z`` ``[B, T, heads * head_dim]``, ``y`` ``[B, T, d_out]`` and
    the residual added to ``y``, ``x`` ``[B, T, d_out]`` (None when no residual source was given)."""

    z: torch.Tensor | None = None
    y: torch.Tensor | None = None
    x: torch.Tensor | None = None


def _first_input(args: tuple, kwargs: dict) -> torch.Tensor:
    """A module's hidden-state input: ``hidden_states=`` when passed by name, else the first positional argument."""
    value = kwargs.get("hidden_states", args[0] if args else None)
    if not isinstance(value, torch.Tensor):
        raise RuntimeError("The residual source's input is not a tensor: the adapter's residual_source is wrong.")
    return value.detach()


@contextlib.contextmanager
def _residual_hooks(sources: dict, store) -> Iterator[None]:
    """Pre-hooks on each ``sources[key]`` module (None: skipped) calling ``store(key, input)``; removed on exit."""
    def hook_for(key):
        def hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
            store(key, _first_input(args, kwargs))
        return hook
    handles = [m.register_forward_pre_hook(hook_for(k), with_kwargs=True) for k, m in sources.items() if m is not None]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def capture_site(site: AttentionSite | FeedForward, residual: nn.Module | None = None) -> Iterator[Captured]:
    """Inside the block, :func:`run_to_site` fills the yielded :class:`Captured` from ``site``'s output projection
    ``site.out`` (an attention site's, or a feed-forward block's second projection: then ``z`` is the neurons'
    activations) and ``x`` from ``residual``'s input, when given.

    Blocks nest (one site of each of two models); a forward pass stops at the first captured site it reaches.
    """
    held = Captured()
    token = object()

    def hook(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        if token not in _ACTIVE.get():          # another thread's forward pass: not ours
            return
        held.z, held.y = args[0].detach(), output.detach()
        raise _Stop

    def keep_residual(key, x: torch.Tensor) -> None:
        if token in _ACTIVE.get():
            held.x = x

    handle = site.out.register_forward_hook(hook)
    reset = _ACTIVE.set(_ACTIVE.get() | {token})
    try:
        with _residual_hooks({0: residual}, keep_residual):
            yield held
    finally:
        _ACTIVE.reset(reset)
        handle.remove()


@contextlib.contextmanager
def record_outputs(sites: Sequence[AttentionSite], residuals: dict | None = None
                   ) -> Iterator[dict[tuple[str, int], torch.Tensor]]:
    """Inside the block, every forward pass in this thread leaves each site's output projection output
    ``[B, T, d_out]`` in the yielded dict under ``(kind, layer)`` (the last pass's; nothing is stopped);
    plus its residual where ``residuals[(kind, layer)]`` names the residual source module."""
    outputs: dict[tuple[str, int], torch.Tensor] = {}
    added: dict[tuple[str, int], torch.Tensor] = {}
    token = object()

    def keep_residual(key, x: torch.Tensor) -> None:
        if token in _ACTIVE.get():
            added[key] = x

    def hook_for(key: tuple[str, int]):
        def hook(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
            if token in _ACTIVE.get():
                outputs[key] = output.detach() + added.pop(key) if key in added else output.detach()
        return hook

    handles = [s.out.register_forward_hook(hook_for((s.kind, s.layer))) for s in sites]
    reset = _ACTIVE.set(_ACTIVE.get() | {token})
    try:
        with _residual_hooks(residuals or {}, keep_residual):
            yield outputs
    finally:
        _ACTIVE.reset(reset)
        for h in handles:
            h.remove()


def run_to_site(model: nn.Module, inputs: dict, held: Captured) -> Captured:
    """Forward ``inputs`` through ``model`` until the captured site (inside :func:`capture_site`)."""
    held.z = held.y = held.x = None
    try:
        with torch.inference_mode():
            model(**inputs)
    except _Stop:
        pass
    if held.z is None:
        raise RuntimeError("The forward pass never reached the attention site being tuned.")
    return held


def _is_conv1d(module: nn.Module) -> bool:
    return hasattr(module, "nf") and hasattr(module, "nx")       # transformers' Conv1D stores [in, out]


def head_columns(site: AttentionSite) -> torch.Tensor:
    """``[heads, head_dim, d_out]``: the output projection's weight block of each head (a view when possible)."""
    w = site.out.weight.detach()
    per_input = w if _is_conv1d(site.out) else w.t()            # [heads * head_dim, d_out]
    return per_input.reshape(site.num_heads, site.head_dim, per_input.shape[-1])


def scale_head_columns(site: AttentionSite, scales: Sequence[float]) -> None:
    """Multiply head h's input columns of ``site.out`` by ``scales[h]``, in place (0 removes the head's effect)."""
    factor = torch.tensor(list(scales), dtype=site.out.weight.dtype, device=site.out.weight.device)
    factor = factor.repeat_interleave(site.head_dim)             # [heads * head_dim]
    with torch.no_grad():
        if _is_conv1d(site.out):
            site.out.weight.mul_(factor[:, None])
        else:
            site.out.weight.mul_(factor[None, :])


def add_to_bias(site: AttentionSite, delta: torch.Tensor) -> bool:
    """``site.out.bias += delta``, in place; False (nothing changed) when the projection has no bias."""
    bias = getattr(site.out, "bias", None)
    if bias is None:
        return False
    with torch.no_grad():
        bias.add_(delta.to(bias.dtype).to(bias.device))
    return True
