"""Generation under a KV policy: a ``Cache`` whose streaming heads store only their sink and window entries
(:func:`new_cache`); exact, since a dropped position is outside every later window. Its bytes are what
:func:`.kv_policy.kv_bytes` counts.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

from pruning_core.modeling.kv.kv_policy import KVPolicy


class PolicyLayer(DynamicLayer):
    """One layer's cache: full heads keep every entry, a streaming head the first ``sink`` and its last ``window``.

    ``update`` returns keys/values ``[B, H, seen, D]`` for the attention; a streaming head's dropped positions are
    zero there, outside its band (:mod:`.kv_banded`) or masked out by :func:`applied`'s hook.
    """

    def __init__(self, streaming: Sequence[bool], sink: int, window: int | Sequence[int]) -> None:
        super().__init__()
        windows = [window] * len(streaming) if isinstance(window, int) else list(window)
        self.n_heads = len(streaming)
        self.full_idx = torch.tensor([j for j, s in enumerate(streaming) if not s], dtype=torch.long)
        by_window: dict[int, list[int]] = {}
        for j, s in enumerate(streaming):
            if s:
                by_window.setdefault(windows[j], []).append(j)
        # one group per window size: [window, head ids, keys, values]
        self.groups = [[w, torch.tensor(h, dtype=torch.long), None, None] for w, h in sorted(by_window.items())]
        self.sink, self.seen = sink, 0
        self.full_k = self.full_v = None

    def _kept(self, seen: int, window: int) -> tuple[int, int]:
        """(sink entries, window entries) a streaming head keeps after ``seen`` tokens: positions
        ``[0, sink) ∪ [seen - window, seen)``, in that order, without overlap."""
        first = min(self.sink, seen)
        return first, min(window, seen - first)

    def update(self, key_states, value_states, *args, **kwargs):
        batch, heads, new, dim = key_states.shape                                       # [B, H_kv, new, D]
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self.full_idx = self.full_idx.to(self.device)
            self.full_k = self.full_v = key_states.new_zeros(batch, len(self.full_idx), 0, dim)
            for g in self.groups:
                g[1] = g[1].to(self.device)
                g[2] = g[3] = key_states.new_zeros(batch, len(g[1]), 0, dim)
        fi, seen = self.full_idx, self.seen + new
        self.full_k = torch.cat([self.full_k, key_states.index_select(1, fi)], dim=-2)
        self.full_v = torch.cat([self.full_v, value_states.index_select(1, fi)], dim=-2)
        keys = key_states.new_zeros(batch, heads, seen, dim)
        values = value_states.new_zeros(batch, heads, seen, dim)
        if len(fi):
            keys.index_copy_(1, fi, self.full_k)
            values.index_copy_(1, fi, self.full_v)
        for g in self.groups:
            window, si = g[0], g[1]
            sk = torch.cat([g[2], key_states.index_select(1, si)], dim=-2)            # [B, S, kept + new, D]
            sv = torch.cat([g[3], value_states.index_select(1, si)], dim=-2)
            first, last = self._kept(self.seen, window)
            positions = torch.cat([torch.arange(first, device=self.device),          # sk's positions
                                   torch.arange(self.seen - last, seen, device=self.device)])
            keys[:, si[:, None], positions] = sk
            values[:, si[:, None], positions] = sv
            first, last = self._kept(seen, window)
            if sk.shape[-2] > first + last:                   # drop what no later window reaches
                sk = torch.cat([sk[:, :, :first], sk[:, :, sk.shape[-2] - last:]], dim=-2)
                sv = torch.cat([sv[:, :, :first], sv[:, :, sv.shape[-2] - last:]], dim=-2)
            g[2], g[3] = sk, sv
        self.seen = seen
        return keys, values

    def get_seq_length(self) -> int:
        return self.seen

    def entries(self) -> list[int]:
        """Entries held per key/value head, in head order."""
        out = [0] * self.n_heads
        for j in self.full_idx.tolist():
            out[j] = 0 if self.full_k is None else int(self.full_k.shape[-2])
        for _, idx, k, _ in self.groups:
            for j in idx.tolist():
                out[j] = 0 if k is None else int(k.shape[-2])
        return out

    def stored_bytes(self) -> int:
        tensors = [self.full_k, self.full_v] + [t for g in self.groups for t in g[2:]]
        return sum(int(t.numel()) * t.element_size() for t in tensors if t is not None)

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("A KV-policy cache cannot be cropped (assisted decoding is not supported).")

    def reorder_cache(self, beam_idx) -> None:
        raise NotImplementedError("A KV-policy cache does not support beam search; decode greedily.")


def new_cache(loaded, policy: KVPolicy | None):
    """A cache for one generation of ``loaded`` under ``policy``: a plain ``DynamicCache`` without a policy;
    else one layer per decoder layer, :class:`PolicyLayer` where the layer has streaming heads."""
    if policy is None:
        return DynamicCache()
    policy.check_fits(loaded)
    return Cache(layers=[PolicyLayer(row, policy.sink, [policy.window_of(l, j) for j in range(len(row))])
                         if any(row) else DynamicLayer() for l, row in enumerate(policy.streaming)])
