"""The output layer where a loss reads it: the target positions of a batch alone, and in chunks.

A translation batch pads its targets to the longest one, and the output projection over the whole vocabulary
is most of a teacher-forced pass. :func:`only_at`: a pre-hook on the output embeddings hands the head the
hidden states of the kept positions alone, so ``outputs.logits`` is ``[N, V]`` instead of ``[B, T, V]``.
:func:`hidden_at` with :func:`target_losses` (logits ``lm_head(h) + final_logits_bias``, :func:`output_layer`):
the head gets no position; the kept hidden states' losses are computed a chunk of positions at a time, so no
``[N, V]`` tensor is ever made (docs/MODELS.md gives the memory it saves). The hooks act for the calling thread
only (a shared model's other passes are left whole) and are removed on leaving.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pruning_core.modeling.masking import shared_hooks

CHUNK = 256     # positions per chunk: [256, V] float32 is 32.8 MB for a 32,001-word vocabulary, within the
#                 allocator's heap (glibc serves blocks up to 32 MiB there once it has adapted)


@contextlib.contextmanager
def only_at(model: nn.Module, keep: Tensor) -> Iterator[bool]:
    """Inside, ``model``'s output head projects only the positions where ``keep`` ``[B, T]`` is True (row by
    row, in order). Yields whether it does: False for a model without output embeddings. A call whose
    hidden states are not ``[B, T, ...]`` (another batch, or a decoding step) is left whole."""
    with _packing(model, keep, lambda hidden: hidden[keep]) as packing:
        yield packing


class Kept:
    """What :func:`hidden_at` found: ``hidden`` ``[N, d]``, the hidden states of the kept positions in order."""

    hidden: Tensor | None = None


@contextlib.contextmanager
def hidden_at(model: nn.Module, keep: Tensor) -> Iterator[Kept | None]:
    """Inside, ``model``'s output head projects no position of a ``[B, T, d]`` call (``outputs.logits`` is
    ``[B, 0, V]``); the hidden states where ``keep`` ``[B, T]`` is True go to the yielded :class:`Kept` instead.
    Yields None for a model without output embeddings."""
    found = Kept()

    def drop(hidden: Tensor) -> Tensor:
        found.hidden = hidden[keep]
        return hidden[:, :0]

    with _packing(model, keep, drop) as packing:
        yield found if packing else None


# per thread: id(output head) -> (keep, change) of the calling thread's _packing (a shared model's other threads
# run through the same hook and see their own, or none)
_PACKING: ContextVar[dict[int, tuple[Tensor, Callable[[Tensor], Tensor]]] | None] = ContextVar(
    "headprune_packing", default=None)


def _packing_hook(module: nn.Module, args: tuple) -> tuple | None:
    entry = (_PACKING.get() or {}).get(id(module))
    if entry is None:
        return None
    keep, change = entry
    hidden = args[0]
    if hidden.dim() != 3 or tuple(hidden.shape[:2]) != tuple(keep.shape):
        return None
    return (change(hidden),) + tuple(args[1:])


@contextlib.contextmanager
def _packing(model: nn.Module, keep: Tensor, change: Callable[[Tensor], Tensor]) -> Iterator[bool]:
    """Inside, a ``[B, T, d]`` call of ``model``'s output head (``keep`` ``[B, T]``) from this thread gets
    ``change(hidden)`` instead; yields False (and changes nothing) for a model without output embeddings. The hook
    is shared (:func:`pruning_core.modeling.masking.shared_hooks`): other threads' passes are left alone."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if not isinstance(head, nn.Module):
        yield False
        return
    mine = dict(_PACKING.get() or {})
    mine[id(head)] = (keep, change)
    token = _PACKING.set(mine)
    try:
        with shared_hooks(model, "packing", lambda: [head.register_forward_pre_hook(_packing_hook)]):
            yield True
    finally:
        _PACKING.reset(token)


def output_layer(model: nn.Module) -> tuple[Tensor, Tensor] | None:
    """``(weight [V, d], bias [V] float32)`` of a model whose logits are ``lm_head(h) + final_logits_bias`` (Bart,
    Marian, Marian-SSRU) or ``proj_out(h)`` (Whisper); None for any other."""
    head, extra = getattr(model, "lm_head", None), getattr(model, "final_logits_bias", None)
    if getattr(getattr(model, "config", None), "model_type", None) == "whisper":
        head = getattr(model, "proj_out", None)
        extra = None if not isinstance(head, nn.Linear) else head.weight.new_zeros(head.weight.shape[0])
    if not isinstance(head, nn.Linear) or not isinstance(extra, Tensor):
        return None
    bias = extra.reshape(-1).float()
    return head.weight, bias if head.bias is None else bias + head.bias.float()


def target_losses(weight: Tensor, bias: Tensor, hidden: Tensor, targets: Tensor, chunk: int = CHUNK) -> Tensor:
    """``[N]`` float32: the cross-entropy of each position of ``hidden`` ``[N, d]`` against ``targets`` ``[N]``
    under logits ``hidden @ weight.T + bias``, computed ``chunk`` positions at a time."""
    project = projection(weight, bias, hidden)
    out = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
    for start in range(0, hidden.shape[0], chunk):
        part = slice(start, start + chunk)
        out[part] = F.cross_entropy(project(hidden[part]), targets[part], reduction="none")    # logits [chunk, V]
    return out


def projection(weight: Tensor, bias: Tensor, like: Tensor) -> Callable[[Tensor], Tensor]:
    """``h`` ``[n, d]`` (of ``like``'s device and dtype) -> float32 logits ``h @ weight.T + bias`` ``[n, V]`` (``bias``
    ``[V]`` float32). For float32 on a CPU without autograd through oneDNN, the weight packed once here (2 to 3 times
    faster than MKL's matrix product on AMD processors for a vocabulary-wide output; the same values within float32
    rounding); else ``linear`` then the bias in float32."""
    if like.device.type == "cpu" and like.dtype == torch.float32 and not torch.is_grad_enabled() and _onednn():
        packed = _packed(weight)
        return lambda h: torch.ops.mkldnn._linear_pointwise(h, packed, bias, "none", [], "")
    return lambda h: F.linear(h, weight).float() + bias


# id(weight) -> (its version counter, the packed weight), while that weight lives: a model's output embeddings are
# packed once, not at every evaluation (packing SmolLM2's 49,152 x 576 weight costs about as much as using it)
_PACKED: dict[int, tuple[int, Tensor]] = {}
_PACKED_LOCK = threading.Lock()


def _packed(weight: Tensor) -> Tensor:
    """``weight`` reordered for oneDNN's linear, kept while ``weight`` lives and is not changed in place; a tensor made
    inside inference mode (a shortlist's rows) has no version counter and is packed each time."""
    try:
        version = weight._version
    except RuntimeError:                                    # an inference tensor
        return torch.ops.mkldnn._reorder_linear_weight(weight, None)
    key = id(weight)
    with _PACKED_LOCK:
        found = _PACKED.get(key)
    if found is not None and found[0] == version:
        return found[1]
    packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
    with _PACKED_LOCK:
        if key not in _PACKED:
            weakref.finalize(weight, _PACKED.pop, key, None)
        _PACKED[key] = (version, packed)
    return packed


@functools.cache
def _onednn() -> bool:
    """Whether this torch has oneDNN's packed linear (internal operators) and it agrees with ``addmm``."""
    try:
        with torch.inference_mode():
            gen = torch.Generator().manual_seed(0)
            w, b, h = (torch.randn(*shape, generator=gen) for shape in ((5, 3), (5,), (4, 3)))
            found = torch.ops.mkldnn._linear_pointwise(h, torch.ops.mkldnn._reorder_linear_weight(w, None), b,
                                                       "none", [], "")
            return bool(torch.backends.mkldnn.is_available() and torch.allclose(found, torch.addmm(b, h, w.t()),
                                                                                  atol=1e-5))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


__all__ = ["CHUNK", "Kept", "hidden_at", "only_at", "output_layer", "projection", "target_losses"]
