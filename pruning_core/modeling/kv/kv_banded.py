"""Streaming heads computed over their sink and window keys only (:mod:`.kv_policy`'s fast path).

A streaming key/value head's query at position ``t`` attends to ``[0, sink) ∪ (t - window, t]``. Instead of a
``[Q, K]`` mask over every key, the queries are cut into blocks of ``BLOCK``; block ``[s, e)`` gathers the sink keys
and the band ``[s - window + 1, e)`` (positions below ``sink`` dropped from the band, so no key counts twice) and
attends to those ``sink + BLOCK + window - 1`` keys with a small mask, all blocks in one ``scaled_dot_product_attention``
call. The cost is ``Q x (sink + BLOCK + window)`` per head instead of ``Q x K``. Full heads take the model's own
attention (eager or sdpa) on their share of the heads, unchanged.

:func:`attention` is registered in transformers' ``AttentionInterface`` as :data:`NAME`; :mod:`.kv_policy` points an
attention module at it for the duration of a policy block, and passes ``kv_band`` (:class:`Band`) per call. A call
without ``kv_band`` (another thread, or attention weights asked for) runs the module's own implementation.
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

NAME = "headprune_banded"
BLOCK = 64                      # queries per block: a block attends to sink + BLOCK + window - 1 keys
LAYOUTS = 8                     # block layouts kept (one per window size and shape): more window sizes take the mask


@dataclass(frozen=True)
class Band:
    """One layer's split: ``full`` key/value heads (model attention), and per window size the streaming ones.

    groups: query heads per key/value head (uniform, contiguous: kv head j has query heads j*g .. j*g+g-1).
    streams: ``((window, (kv heads ...)), ...)``; sink: first tokens every streaming head keeps.
    """

    full: tuple[int, ...]
    streams: tuple[tuple[int, tuple[int, ...]], ...]
    sink: int
    groups: int


def base_attention(module, implementation: str):
    """The attention function the module would run without a policy (its family's eager one for 'eager')."""
    eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if implementation == "eager":
        if eager is None:
            raise RuntimeError(f"{type(module).__name__} has no eager_attention_forward in its module.")
        return eager
    return ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager)


def _heads(kv: tuple[int, ...], g: int, device) -> torch.Tensor:
    return torch.tensor([j * g + i for j in kv for i in range(g)], dtype=torch.long, device=device)


@functools.lru_cache(maxsize=LAYOUTS)
def band_layout(queries: int, keys: int, sink: int, window: int, block: int, device: str = "cpu") -> tuple:
    """Where each block looks: ``(rows [n, block], cols [n, C], allowed [n, block, C])`` with ``C = sink + block +
    window - 1``. ``rows``: query index (clamped), ``cols``: key index (clamped) of each gathered key; ``allowed``
    (True = attend): key position ``k`` for query position ``t = keys - queries + row`` is ``k <= t`` and
    ``k < sink`` in the sink part, ``max(sink, t - window + 1) <= k`` in the band. Padding rows attend to key 0.
    Every layer of a forward pass has the same sizes: the layout is built once (cached)."""
    past = keys - queries
    n = -(-queries // block)
    sink = min(sink, keys)
    row = torch.arange(n * block, device=device).view(n, block)                   # [n, block] query index
    t = (past + row)[:, :, None]                                                  # [n, block, 1] position
    start = past + torch.arange(n, device=device) * block - window + 1            # [n] first band position
    band = start[:, None] + torch.arange(block + window - 1, device=device)      # [n, L]
    cols = torch.cat([torch.arange(sink, device=device).expand(n, sink), band], dim=1)      # [n, C]
    k = cols[:, None, :]                                                          # [n, 1, C]
    in_sink = torch.zeros_like(cols, dtype=torch.bool)
    in_sink[:, :sink] = True
    allowed = (k <= t) & torch.where(in_sink[:, None, :], k < sink,
                                     (k >= sink) & (k > t - window))             # [n, block, C]
    padding = row >= queries
    allowed[padding] = False
    allowed[..., 0] |= padding                                                    # padding rows: key 0, discarded
    return row.clamp(max=queries - 1), cols.clamp(0, keys - 1).flatten(), allowed


@functools.lru_cache(maxsize=LAYOUTS)
def _bias(queries: int, keys: int, sink: int, window: int, block: int, device: str, groups: int,
          dtype: torch.dtype) -> torch.Tensor:
    """The layout's additive mask for ``groups`` query heads a block: ``[1, n, groups * block, C]``, 0 or -inf."""
    allowed = band_layout(queries, keys, sink, window, block, device)[2]
    n, blk, c = allowed.shape
    allowed = allowed[None, :, None].expand(1, n, groups, blk, c).reshape(1, n, groups * blk, c)
    return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill_(~allowed, float("-inf"))


def _model_allowed(mask: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """The model's own mask ``[B, 1, Q, K]`` (bool: True attends; float: 0 attends) at the gathered places:
    ``[B, n, block, C]`` bool."""
    n = rows.shape[0]
    m = mask[:, 0][:, rows[:, :, None], cols.view(n, -1)[:, None, :]]
    return m if m.dtype == torch.bool else m > torch.finfo(m.dtype).min / 2


def streaming_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, sink: int, window: int,
                        scaling: float, mask: torch.Tensor | None = None, block: int | None = None) -> torch.Tensor:
    """Sink-and-window attention of ``query [B, S*g, Q, D]`` (g query heads per key/value head, in group order)
    over ``key, value [B, S, K, D]``; the queries are the last ``Q`` of the ``K`` positions. ``mask``: the model's
    own ``[B, 1, Q, K]`` mask, or None (causal). Returns ``[B, S*g, Q, D]``."""
    b, hq, q_len, d = query.shape
    s, k_len = key.shape[1], key.shape[2]
    g = hq // s
    block = max(1, min(block or BLOCK, q_len))
    where = (q_len, k_len, sink, window, block, str(query.device))
    rows, cols, allowed = band_layout(*where)
    n = rows.shape[0]
    c = cols.numel() // n
    pad = n * block - q_len
    q = F.pad(query, (0, 0, 0, pad)).view(b, s, g, n, block, d).permute(0, 1, 3, 2, 4, 5)  # [B, S, n, g, blk, D]
    q = q.reshape(b * s, n, g * block, d)
    k = key.index_select(2, cols).view(b * s, n, c, d)                            # [B*S, n, C, D]
    v = value.index_select(2, cols).view(b * s, n, c, d)
    if mask is None:
        bias = _bias(*where, g, query.dtype)                                      # [1, n, g*blk, C]
    else:
        allow = allowed[None] & _model_allowed(mask, rows, cols)                  # [B, n, blk, C]
        allow[..., 0] |= ~allow.any(-1)                # a row the model masks whole: key 0 (finite, like eager)
        allow = allow[:, None, :, None].expand(b, s, n, g, block, c).reshape(b * s, n, g * block, c)
        bias = torch.zeros(allow.shape, dtype=query.dtype, device=query.device).masked_fill_(~allow, float("-inf"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scaling)  # [B*S, n, g*blk, D]
    out = out.view(b, s, n, g, block, d).permute(0, 1, 3, 2, 4, 5).reshape(b, s * g, n * block, d)
    return out[:, :, :q_len]


def attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
              kv_band: Band | None = None, kv_base: str | None = None, **kwargs):
    """transformers' attention-function signature: ``query [B, H, Q, D]``, ``key, value [B, H_kv, K, D]``;
    returns ``([B, Q, H, D], None)``. Without ``kv_band`` it is the module's own attention (``kv_base``)."""
    base = base_attention(module, kv_base or _BASE.get(id(module), "sdpa"))
    if kv_band is None:
        return base(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    g, scale = kv_band.groups, scaling if scaling is not None else query.shape[-1] ** -0.5
    b, h, q_len, d = query.shape
    out = query.new_empty(b, q_len, h, d)
    if kv_band.full:
        kv = torch.tensor(kv_band.full, dtype=torch.long, device=query.device)
        heads = _heads(kv_band.full, g, query.device)
        part, _ = base(module, query.index_select(1, heads), key.index_select(1, kv), value.index_select(1, kv),
                       attention_mask, dropout=dropout, scaling=scaling, **kwargs)                  # [B, Q, Hf, D]
        out.index_copy_(2, heads, part)
    for window, kv_heads in kv_band.streams:
        kv = torch.tensor(kv_heads, dtype=torch.long, device=query.device)
        heads = _heads(kv_heads, g, query.device)
        part = streaming_attention(query.index_select(1, heads), key.index_select(1, kv),
                                   value.index_select(1, kv), kv_band.sink, window, scale,
                                   attention_mask if torch.is_tensor(attention_mask) else None)      # [B, Hs, Q, D]
        out.index_copy_(2, heads, part.transpose(1, 2))
    return out, None


# id(attention module) -> the implementation it had before it was pointed here (kv_policy keeps it current)
_BASE: dict[int, str] = {}

AttentionInterface.register(NAME, attention)
