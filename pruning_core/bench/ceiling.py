"""The FLOP ceiling: the best speed-up that removing some heads can buy, from multiply-add counts.

:func:`flop_ceiling` counts the multiply-adds (MACs) of one forward pass per layer and kind, from
the architecture adapter's :class:`~pruning_core.modeling.architectures.FlopDims` and the actual mask, and
gives ``1 / (1 - removed fraction)``. Only the attention projections and the attention itself
shrink; the feed-forward blocks and the output head do not (REFERENCE.md, "The compute ceiling of
head pruning").

What is counted (projections, attention, feed-forward, output head; not embeddings, norms or
softmax) is written out in docs/METHODS.md, "The FLOP ceiling: what is counted".
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pruning_core.modeling.architectures import StackDims, adapter_for
from pruning_core.core.errors import FormatError, HeadpruneError
from pruning_core.core.heads import KINDS, HeadLayout, HeadMask
from pruning_core.core.io.codec import JsonRecord, json_field

COUNTS_NOTE = ("multiply-adds per sequence; embeddings, norms, activations, softmax and biases not counted; "
               "output head counted")
# multiply-adds of the output head: (hidden, head size, output tokens) -> MACs
HEAD_MACS: Mapping[str, Callable[[int, int, int], int]] = {
    "classifier": lambda d, n, tokens: d * d + d * n,      # pooler / pre-classifier + classifier, once
    "lm_head": lambda d, n, tokens: tokens * d * n,         # vocabulary logits for every token
}
KV_STACK = {"cross": "encoder"}     # kinds whose keys/values come from another stack than their queries


@dataclass(frozen=True)
class CeilingLayer(JsonRecord):
    """The multiply-adds of one attention site for one sequence, and how many of them the mask removes."""

    kind: str             # "encoder_self" | "decoder_self" | "cross"
    layer: int
    heads: int            # heads the layer has now
    heads_kept: int       # heads the mask keeps (1 entries)
    macs: int             # projections + attention, all heads
    removed_macs: int     # the part that belongs to removed heads


@dataclass(frozen=True, kw_only=True)
class CeilingReport(JsonRecord):
    """Compute of one forward pass of one sequence, and the best speed-up the mask can give.

    ``speedup = total_macs / (total_macs - removed_macs) = 1 / (1 - removed_fraction)``; the
    ``init=False`` fields are derived from the others.
    """

    _malformed = "The ceiling block of a bench file is malformed"

    seq_len: int
    decoder_len: int | None                  # None unless the model is encoder-decoder
    total_macs: int = field(init=False)
    attention_macs: int = field(init=False)
    ffn_macs: int                            # every feed-forward block (never shrinks)
    head_macs: int                           # output head (pooler + classifier, or LM head)
    head_kind: str                           # "classifier" | "lm_head"
    removed_macs: int = field(init=False)
    removed_fraction: float = field(init=False)
    speedup: float = field(init=False)       # the ceiling: no implementation beats it by removing these heads
    kind_totals: Mapping = field(init=False, metadata=json_field("by_kind"))
    layers: tuple[CeilingLayer, ...]
    counts: str = field(default=COUNTS_NOTE, init=False)

    def __post_init__(self) -> None:
        attention = sum(l.macs for l in self.layers)
        total = attention + self.ffn_macs + self.head_macs
        removed = sum(l.removed_macs for l in self.layers)
        left = total - removed
        totals: dict[str, dict[str, int]] = {}
        for l in self.layers:
            row = totals.setdefault(l.kind, {"heads": 0, "heads_kept": 0, "macs": 0, "removed_macs": 0})
            row["heads"] += l.heads
            row["heads_kept"] += l.heads_kept
            row["macs"] += l.macs
            row["removed_macs"] += l.removed_macs
        self._derive(total_macs=total, attention_macs=attention, removed_macs=removed,
                     removed_fraction=removed / total if total else 0.0,
                     speedup=total / left if left > 0 else math.inf, kind_totals=totals)

    def by_kind(self) -> dict[str, dict[str, int]]:
        """Per kind: heads, heads kept, MACs and removed MACs summed over layers."""
        return {k: dict(v) for k, v in self.kind_totals.items()}


def flop_ceiling(model_or_config, mask: HeadMask | None, seq_len: int, *,
                 decoder_len: int | None = None) -> CeilingReport:
    """Count the multiply-adds of one forward pass of one sequence, and those ``mask`` removes.

    Args:
        model_or_config: a ``LoadedModel``, a transformers model, or its config. Layer counts and
            sizes come from the architecture adapter's ``flop_dims(config)``; heads per layer come
            from the mask, so an already pruned model (fewer heads than its config says) is
            counted as it is.
        mask: per kind, one row per layer, 1 = keep, 0 = remove. ``None``: keep every head
            (then the layout is taken from the config).
        seq_len: encoder tokens ``T`` per sequence (no padding).
        decoder_len: decoder tokens for encoder-decoder models; ``None`` means ``seq_len``.

    Returns:
        a :class:`CeilingReport`; ``report.speedup`` is the ceiling ``1 / (1 - removed fraction)``.
    """
    config = getattr(model_or_config, "config", model_or_config)     # LoadedModel or model -> config
    dims = adapter_for(config).flop_dims(config)
    if seq_len < 1:
        raise HeadpruneError(f"seq_len must be at least 1, got {seq_len}.")
    tokens = {name: int(seq_len) for name in dims.stacks}
    t_dec = None
    if dims.is_encoder_decoder:
        t_dec = int(decoder_len if decoder_len is not None else seq_len)
        if t_dec < 1:
            raise HeadpruneError(f"decoder_len must be at least 1, got {t_dec}.")
        tokens["decoder"] = t_dec
    expected = {kind: dims.stacks[stack] for kind, stack in dims.kind_stack.items()}
    if mask is None:
        mask = HeadMask.full(HeadLayout({k: (s.heads,) * s.layers for k, s in expected.items()}))
    if set(mask.kinds) != set(expected):
        raise FormatError(f"The mask has attention kinds {sorted(mask.kinds)} but the model has "
                          f"{sorted(expected)}; make a mask for this model.")

    layers: list[CeilingLayer] = []
    for kind in (k for k in KINDS if k in expected):
        stack, rows = expected[kind], mask.kinds[kind]
        if len(rows) != stack.layers:
            raise FormatError(f"The mask has {len(rows)} {kind} layers but the model has {stack.layers}.")
        t_q = tokens[dims.kind_stack[kind]]
        t_kv = tokens[KV_STACK.get(kind, dims.kind_stack[kind])]
        for i, row in enumerate(rows):
            if len(row) > stack.heads:
                raise FormatError(f"The mask's {kind} layer {i} has {len(row)} heads; the model has at most "
                                  f"{stack.heads}.")
            all_macs = _site_macs(dims.hidden, stack, [1] * len(row), t_q, t_kv)
            kept_macs = _site_macs(dims.hidden, stack, row, t_q, t_kv)
            layers.append(CeilingLayer(kind, i, len(row), sum(row), all_macs, all_macs - kept_macs))

    d = dims.hidden
    ffn = sum(tokens[name] * s.ffn_matrices * d * s.ffn_dim * s.layers for name, s in dims.stacks.items())
    head = HEAD_MACS[dims.head_kind](d, dims.head_size, tokens[dims.output_stack])
    return CeilingReport(seq_len=int(seq_len), decoder_len=t_dec, layers=tuple(layers), ffn_macs=ffn,
                         head_macs=head, head_kind=dims.head_kind)


def _site_macs(d: int, stack: StackDims, row: Sequence[int], t_q: int, t_kv: int) -> int:
    """Multiply-adds of the heads that ``row`` keeps (1 entries) in one attention, over one sequence.

    Query heads sharing a key/value head (grouped-query attention) keep it while any of them is kept.
    """
    group = max(1, stack.heads // max(1, stack.kv_heads))
    w = sum(row) * stack.head_dim
    w_kv = sum(1 for g in range(0, len(row), group) if any(row[g:g + group])) * stack.head_dim
    return t_q * 2 * d * w + t_kv * 2 * d * w_kv + 2 * t_q * t_kv * w
