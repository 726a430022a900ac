"""Kwon et al.'s budgeted mask search: remove the least important heads until a budget is met.

Heads are taken least important first (ties by a seeded shuffle), skipping a head while its layer would keep
fewer than ``min_heads_per_layer`` (1 by default, as Kwon et al.). Every budget removes a prefix of that
order: ``remove F`` (``round(F * heads)`` heads), ``flops F`` (the fewest heads that cut F of one forward
pass's multiply-adds at ``seq_len`` tokens, :func:`pruning_core.bench.flop_ceiling`) or ``latency_ms X``
(the fewest whose physically pruned model runs in at most X ms, :mod:`.latency`: measured). A budget that
no prefix meets raises :class:`BudgetError` with the most the order can reach.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pruning_core.bench import flop_ceiling
from pruning_core.core.errors import BudgetError
from pruning_core.core.heads import HeadId, HeadLayout, HeadMask, HeadScores
from pruning_core.core.io.codec import JsonRecord, json_field

BUDGET_KINDS = ("remove", "flops", "latency_ms")


@dataclass(frozen=True)
class Budget:
    """What to compress to: ``kind`` one of :data:`BUDGET_KINDS`, ``value`` a fraction (remove, flops) or ms."""

    kind: str
    value: float

    def __post_init__(self) -> None:
        if self.kind not in BUDGET_KINDS:
            raise BudgetError(f"Unknown budget {self.kind!r}; use one of {', '.join(BUDGET_KINDS)}.")
        if self.kind in ("remove", "flops") and not 0 <= self.value <= 1:
            raise BudgetError(f"--{self.kind} is a fraction from 0 to 1 (0.5 = half); got {self.value:g}.")
        if self.kind == "latency_ms" and not self.value > 0:
            raise BudgetError(f"--latency-ms must be a number of milliseconds above 0; got {self.value:g}.")

    def describe(self) -> str:
        return {"remove": f"remove {self.value:.0%} of the heads", "flops": f"remove {self.value:.0%} of the "
                f"multiply-adds", "latency_ms": f"a forward pass in at most {self.value:g} ms"}[self.kind]


@dataclass(frozen=True)
class SearchResult(JsonRecord):
    """The mask the budget chose, with what it removes."""

    mask: HeadMask = field(metadata={"decode": HeadMask.from_lists})
    heads_removed: int
    removable: int                         # the most heads the order may remove (min heads per layer kept)
    flop_fraction: float                   # of one forward pass's multiply-adds at seq_len tokens
    attention_flop_fraction: float         # of the attention's multiply-adds alone
    seq_len: int = field(metadata=json_field("flops_counted_at_tokens"))
    latency: dict = field(default_factory=dict)     # latency budgets: what was measured (see .latency)



def removal_order(scores: HeadScores, min_heads_per_layer: int = 1, seed: int = 0) -> list[HeadId]:
    """Heads least important first, leaving out those that would take a layer below ``min_heads_per_layer``."""
    left = {(k, l): n for k, rows in scores.layout.kinds.items() for l, n in enumerate(rows)}
    order = []
    for head in scores.ranked(seed=seed):
        key = head[:2]
        if left[key] > min_heads_per_layer:
            left[key] -= 1
            order.append(head)
    return order


def check_remove_budget(layout: HeadLayout, budget: Budget, min_heads_per_layer: int = 1) -> None:
    """Refuse a ``remove`` budget that no order can meet, before any scoring (it depends on the layout alone)."""
    if budget.kind != "remove":
        return
    most = sum(max(0, n - min_heads_per_layer) for rows in layout.kinds.values() for n in rows)
    n = round(budget.value * layout.total_heads)
    if n > most:
        keep_note = (f"keeping at least {min_heads_per_layer} head(s) per layer" if min_heads_per_layer
                     else "layers may lose every head")
        raise BudgetError(f"--remove {budget.value:g} asks for {n} of {layout.total_heads} heads, but at most "
                          f"{most} ({most / layout.total_heads:.1%}) can go {keep_note}. Give "
                          f"--remove {most / layout.total_heads:.3f} or less, or allow empty layers.")


def flop_fractions(config, mask: HeadMask, seq_len: int) -> tuple[float, float]:
    """(removed share of the forward pass's multiply-adds, removed share of the attention's) for ``mask``."""
    ceiling = flop_ceiling(config, mask, seq_len)
    attention = ceiling.attention_macs
    return ceiling.removed_fraction, (ceiling.removed_macs / attention if attention else 0.0)


def search_mask(loaded, scores: HeadScores, budget: Budget, *, min_heads_per_layer: int = 1, seq_len: int = 128,
                seed: int = 0, latency_probe=None) -> SearchResult:
    """The mask ``budget`` asks for, removing heads in :func:`removal_order`.

    ``latency_probe(count_to_mask) -> (count, record)``: for latency budgets (:func:`.latency.latency_search`).
    """
    layout: HeadLayout = loaded.layout
    scores.check_fits(layout)
    order = removal_order(scores, min_heads_per_layer, seed)

    def mask_of(n: int) -> HeadMask:
        return HeadMask.from_removed(layout, order[:n])

    keep_note = (f"keeping at least {min_heads_per_layer} head(s) per layer" if min_heads_per_layer
                 else "layers may lose every head")
    latency: dict = {}
    if budget.kind == "remove":
        check_remove_budget(layout, budget, min_heads_per_layer)
        n = round(budget.value * layout.total_heads)
    elif budget.kind == "flops":
        most, _ = flop_fractions(loaded.config, mask_of(len(order)), seq_len)
        if budget.value > most + 1e-12:
            raise BudgetError(f"--flops {budget.value:g} cannot be met: removing every head it may ({len(order)}, "
                              f"{keep_note}) cuts {most:.1%} of the multiply-adds of a {seq_len}-token forward pass "
                              f"(the feed-forward blocks and output head stay). Give --flops {most:.3f} or less.")
        n = next(i for i in range(len(order) + 1) if flop_fractions(loaded.config, mask_of(i), seq_len)[0]
                 >= budget.value - 1e-12)
    else:
        if latency_probe is None:
            raise BudgetError("A latency budget needs a latency probe (pruning_core.compress.latency).")
        n, latency = latency_probe(mask_of, len(order), budget.value)
    mask = mask_of(n)
    total, attention = flop_fractions(loaded.config, mask, seq_len)
    return SearchResult(mask, n, len(order), total, attention, seq_len, latency)
