"""Logits only where a loss reads them: the output head projects the target positions of a batch, packed.

A translation batch pads its targets to the longest one, and the output projection over the whole vocabulary is
most of a teacher-forced pass. Inside :func:`only_at`, a forward pre-hook on the model's output embeddings hands
the head the hidden states of the kept positions alone, in order, so ``outputs.logits`` is ``[N, V]`` (N kept
positions) instead of ``[B, T, V]``; the hook is removed on leaving, whatever happens.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import Tensor, nn


@contextlib.contextmanager
def only_at(model: nn.Module, keep: Tensor) -> Iterator[bool]:
    """Inside, ``model``'s output head projects only the positions where ``keep`` ``[B, T]`` is True (row by
    row, in order). Yields whether it does: False for a model without output embeddings. A call whose
    hidden states are not ``[B, T, ...]`` (another batch, or a decoding step) is left whole."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if not isinstance(head, nn.Module):
        yield False
        return

    def pack(_module, args):
        hidden = args[0]
        if hidden.dim() != 3 or tuple(hidden.shape[:2]) != tuple(keep.shape):
            return None
        return (hidden[keep],) + tuple(args[1:])

    handle = head.register_forward_pre_hook(pack)
    try:
        yield True
    finally:
        handle.remove()


__all__ = ["only_at"]
