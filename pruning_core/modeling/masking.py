"""Head gates: multiply each head's output by a gate xi_h before the output projection.

Michel et al.'s Att(x) = W_o [xi_1 head_1(x); ...; xi_H head_H(x)], as a forward pre-hook on each site's
output projection (input ``[batch, tokens, heads * head_dim]``). Gates are *per call*, not per model: the
hooks read them from a ``ContextVar`` of the calling thread, so a shared model (the dashboard's) can be
evaluated under different masks at once, and a thread that set none sees the plain model. Hooks are installed
on first use with a per-model reference count and removed when the last user leaves, also on error.
``gate_heads`` takes float gates (optionally requiring grad: how dL/dxi is obtained) and can record the gated
head outputs for per-token products.
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
from torch import nn

from pruning_core.modeling.architectures import AttentionSite
from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadLayout, HeadMask

# id(out-projection module) -> (gate vector [heads], recorder list or None)
_ACTIVE: ContextVar[dict[int, tuple[torch.Tensor, list | None]] | None] = ContextVar(
    "headprune_active_gates", default=None)

_LOCK = threading.Lock()
# model -> {hook set name: [refcount, hook handles]}
_INSTALLED: "weakref.WeakKeyDictionary[nn.Module, dict[str, list]]" = weakref.WeakKeyDictionary()


def _gate_hook(module: nn.Module, args: tuple) -> tuple | None:
    active = _ACTIVE.get()
    if not active:
        return None
    entry = active.get(id(module))
    if entry is None:
        return None
    gate, recorder = entry
    x = args[0]                                    # [..., heads * head_dim]
    heads = gate.shape[-1]
    if heads == 0:
        return None
    shaped = x.view(*x.shape[:-1], heads, x.shape[-1] // heads)   # [..., heads, head_dim]
    # an offloaded layer's gate stayed where it was (see _on_device_of): follow the input
    gated = shaped * gate.to(device=x.device, dtype=x.dtype).unsqueeze(-1)
    if recorder is not None:
        recorder.append(gated)
    return (gated.reshape(x.shape),) + tuple(args[1:])


@contextlib.contextmanager
def shared_hooks(model: nn.Module, name: str, install: Callable[[], list]) -> Iterator[None]:
    """Hooks on ``model`` for the duration of the block: ``install()`` registers them (returning their
    handles) when no other thread holds the set ``name`` on this model; they are removed when the last
    holder leaves, also when the block raised. The hooks themselves must do nothing for a thread that
    did not ask (read a ``ContextVar``), since other threads' forward passes run through them too."""
    with _LOCK:
        sets = _INSTALLED.setdefault(model, {})
        entry = sets.get(name)
        if entry is None:
            entry = sets[name] = [0, install()]
        entry[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            entry[0] -= 1
            if entry[0] == 0:
                for h in entry[1]:
                    h.remove()
                sets.pop(name, None)
                if not sets:
                    _INSTALLED.pop(model, None)


def _hooks_installed(model: nn.Module, sites: Sequence[AttentionSite]) -> contextlib.AbstractContextManager:
    """The gate hooks on ``model``'s output projections for the duration; reference-counted across threads."""
    return shared_hooks(model, "gates", lambda: [s.out.register_forward_pre_hook(_gate_hook) for s in sites])


def installed_hook_count(model: nn.Module) -> int:
    """Number of forward hooks of any kind on ``model``'s modules (used by leak tests)."""
    return sum(len(m._forward_pre_hooks) + len(m._forward_hooks) + len(m._backward_hooks)
               for m in model.modules())


@dataclass
class GateSession:
    """What ``gate_heads`` yields: the gates in use and, if asked, the recorded head outputs."""

    gates: dict[str, list[torch.Tensor]]
    records: dict[tuple[str, int], list[torch.Tensor]] = field(default_factory=dict)


def gates_from_mask(mask: HeadMask, device: torch.device | str = "cpu") -> dict[str, list[torch.Tensor]]:
    return {k: [torch.tensor(row, dtype=torch.float32, device=device) for row in rows]
            for k, rows in mask.kinds.items()}


def ones_gates(layout: HeadLayout, device: torch.device | str = "cpu",
               requires_grad: bool = False) -> dict[str, list[torch.Tensor]]:
    """Gates xi_h = 1 for every head (a leaf per layer, so .grad holds dL/dxi)."""
    return {k: [torch.ones(n, device=device, requires_grad=requires_grad) for n in rows]
            for k, rows in layout.kinds.items()}


def _on_device_of(gate: torch.Tensor, module: nn.Module) -> torch.Tensor:
    """``gate`` on ``module``'s device: a model split over devices (``device_map``) gates each layer where it is.

    A module whose weights are on ``meta`` (accelerate keeps an offloaded layer's weights elsewhere
    until its forward: a device_map with "cpu" beside a GPU) keeps the gate where it is; the hook
    moves it to the layer's input then (a meta copy would hold no values).
    """
    weight = next(module.parameters(), None)
    if weight is None or weight.device == gate.device or weight.is_meta:
        return gate
    return gate.to(weight.device)


@contextlib.contextmanager
def gate_heads(model: nn.Module, sites: Sequence[AttentionSite],
               gates: Mapping[str, Sequence[torch.Tensor]], record: bool = False) -> Iterator[GateSession]:
    """Run ``model`` with head gates inside the ``with`` block, for this thread only.

    Args:
        model: the model the sites belong to (not modified; hooks are scoped to the block).
        sites: its attention sites, from ``architectures.find_sites`` (or ``LoadedModel.sites``).
        gates: per kind, one tensor ``[heads]`` per layer; 1.0 keeps a head, 0.0 removes it,
            anything between scales it. Tensors may require grad.
        record: keep the gated head outputs ``[..., heads, head_dim]`` of every forward pass in
            ``session.records[(kind, layer)]`` (take gradients with ``torch.autograd.grad``).
    """
    by_out: dict[int, tuple[torch.Tensor, list | None]] = {}
    session = GateSession(gates={k: list(v) for k, v in gates.items()})
    for s in sites:
        rows = gates.get(s.kind)
        if rows is None:
            raise FormatError(f"No gates given for attention kind {s.kind!r}; the model has it.")
        if s.layer >= len(rows) or rows[s.layer].shape[-1] != s.num_heads:
            got = rows[s.layer].shape[-1] if s.layer < len(rows) else "no row"
            raise FormatError(f"Gate for {s.kind} layer {s.layer} has {got} heads; the model has {s.num_heads}.")
        recorder = session.records.setdefault((s.kind, s.layer), []) if record else None
        by_out[id(s.out)] = (_on_device_of(rows[s.layer], s.out), recorder)
    outer = _ACTIVE.get()
    token = _ACTIVE.set({**(outer or {}), **by_out})
    try:
        with _hooks_installed(model, sites):
            yield session
    finally:
        _ACTIVE.reset(token)


@contextlib.contextmanager
def apply_mask(loaded, mask: HeadMask | None) -> Iterator[None]:
    """Run ``loaded.model`` with ``mask`` (1 = keep, 0 = remove) inside the block, for this thread only.

    Args:
        loaded: a ``LoadedModel`` (anything with ``model``, ``sites`` and ``layout``); not modified.
        mask: per kind, one row per layer, 1 = keep, 0 = removed. ``None`` or a full mask is a
            no-op. A mask of another shape raises :class:`FormatError` naming the mismatch.
    """
    if mask is None:
        yield
        return
    mask.check_fits(loaded.layout)
    if mask.is_full():
        yield
        return
    device = next(loaded.model.parameters()).device
    with gate_heads(loaded.model, loaded.sites, gates_from_mask(mask, device)):
        yield
