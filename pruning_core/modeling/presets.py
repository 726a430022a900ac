"""Mask presets: the ways people pick which heads to remove, from scores or at random.

The one home of "drop a share of every layer": removing ``fraction`` of a layer of ``n`` heads
removes :func:`removed_per_layer` ``= round(fraction * n)`` of them (Python rounds halves to even:
1 of 2, 2 of 3, 2 of 4, 2 of 5, 6 of 12). SMP's "keep the top half" and the random-half baseline
use these functions. ``protected`` heads (e.g. :func:`pruning_core.analysis.roles.protected_heads`: the induction heads) are
never removed: the share is taken from the other heads. For grouped-query attention, :func:`prune_by_group`, :func:`prune_k_per_group` and
:func:`uniform_by_group` keep every layer's key/value groups even (physical pruning then needs no per-head
key/value index); :func:`uniform_by_group` also keeps the same count in every layer (a stock config's shape). All
functions return a new :class:`HeadMask`; none modifies its input.
"""
from __future__ import annotations

import random
from collections.abc import Callable

from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadId, HeadLayout, HeadMask, HeadScores, KVGroups, group_scores

Protected = frozenset[HeadId] | set[HeadId]       # heads a preset never removes


def _check_fraction(fraction: float) -> None:
    if not 0.0 <= fraction <= 1.0:
        raise HeadpruneError(f"The share of heads to remove must be between 0 and 1 (e.g. 0.5 for 50 %); "
                             f"got {fraction}.")


def removed_per_layer(n_heads: int, fraction: float) -> int:
    """Heads removed from a layer of ``n_heads`` when ``fraction`` of every layer is removed."""
    return round(fraction * n_heads)


def remove_least_important(scores: HeadScores, fraction: float, per_layer: bool = False, seed: int = 0,
                           protected: Protected = frozenset()) -> HeadMask:
    """Remove ``fraction`` of the heads with the lowest scores, over all heads or within each layer.

    Global: round(fraction * total) heads. Per layer: round(fraction * heads in layer) in every layer.
    ``protected`` heads are never removed: the count is taken from the others (fewer when too few are left).
    """
    _check_fraction(fraction)
    layout = scores.layout
    if not per_layer:
        count = round(fraction * layout.total_heads)
        return HeadMask.from_removed(layout, [h for h in scores.ranked(seed=seed) if h not in protected][:count])
    rng = random.Random(seed)
    removed = []
    for kind, rows in scores.kinds.items():
        for layer, row in enumerate(rows):
            order = sorted(range(len(row)), key=lambda h: (row[h], rng.random()))
            order = [h for h in order if (kind, layer, h) not in protected]
            removed += [(kind, layer, h) for h in order[:removed_per_layer(len(row), fraction)]]
    return HeadMask.from_removed(layout, removed)


def keep_top_fraction_per_layer(scores: HeadScores, keep_fraction: float = 0.5, seed: int = 0) -> HeadMask:
    """Keep the best ``keep_fraction`` of every layer (SMP: half), ties broken by ``seed``.

    A layer of ``n`` heads keeps ``n - removed_per_layer(n, 1 - keep_fraction)`` (6 of 12, 2 of 4, 1 of 2, 1 of 3).
    """
    return remove_least_important(scores, 1.0 - keep_fraction, per_layer=True, seed=seed)


def keep_top_per_layer(scores: HeadScores, keep: int = 1, protected: Protected = frozenset()) -> HeadMask:
    """Keep the ``keep`` best-scoring heads of every layer (SMP keeps half; Michel et al. one), and every
    ``protected`` head besides."""
    if keep < 0:
        raise HeadpruneError(f"Heads to keep per layer must be 0 or more; got {keep}.")
    kinds = {}
    for kind, rows in scores.kinds.items():
        new_rows = []
        for row in rows:
            best = sorted(range(len(row)), key=lambda h: -row[h])[:keep]
            new_rows.append(tuple(1 if h in best or (kind, len(new_rows), h) in protected else 0
                                  for h in range(len(row))))
        kinds[kind] = tuple(new_rows)
    return HeadMask(kinds)


def random_per_layer(layout: HeadLayout, fraction: float, seed: int = 0) -> HeadMask:
    """Remove round(fraction * heads) random heads in every layer (the random-pruning baseline)."""
    _check_fraction(fraction)
    return _random_per_layer(layout, lambda n: removed_per_layer(n, fraction), seed)


def half_mask(layout: HeadLayout, seed: int = 0) -> HeadMask:
    """Remove half of every layer's heads, rounded down, chosen by ``random.Random(seed)``: the 50 %
    setting of Michel et al.'s speed table (which heads go does not change the speed). The same
    masks as ``random_per_layer(layout, 0.5, seed)`` except in layers of 3, 7, 11 ... heads, where
    that one rounds half to even and removes one head more."""
    return _random_per_layer(layout, lambda n: n // 2, seed)


def _random_per_layer(layout: HeadLayout, how_many: Callable[[int], int], seed: int) -> HeadMask:
    rng = random.Random(seed)
    removed = []
    for kind, rows in layout.kinds.items():
        for layer, n in enumerate(rows):
            removed += [(kind, layer, h) for h in rng.sample(range(n), how_many(n))]
    return HeadMask.from_removed(layout, removed)


def prune_by_group(scores: HeadScores, groups: KVGroups, fraction: float, seed: int = 0) -> HeadMask:
    """Remove whole key/value groups (a key/value head and all its query heads): the
    round(fraction * groups) groups with the lowest summed score over all layers.

    ``groups``: :func:`pruning_core.modeling.architectures.kv_groups_of` of the model's sites. Every layer's
    groups stay even, so the pruned model keeps a stock config (no per-head key/value index).
    """
    _check_fraction(fraction)
    by_group = group_scores(scores, groups)
    count = round(fraction * by_group.layout.total_heads)
    removed = [(k, l, h) for k, l, g in by_group.ranked(seed=seed)[:count] for h in groups[k][l][g]]
    return HeadMask.from_removed(scores.layout, removed)


def prune_k_per_group(scores: HeadScores, groups: KVGroups, k: int, seed: int = 0) -> HeadMask:
    """Remove the ``k`` lowest-scoring query heads of every key/value group of every layer (ties
    broken by ``seed``); ``k`` = group size removes everything. Groups stay even (a stock config fits)."""
    sizes = {len(g) for rows in groups.values() for row in rows for g in row}
    if k < 0 or (sizes and k > min(sizes)):
        raise HeadpruneError(f"Query heads to remove per key/value group must be between 0 and the group size "
                             f"({min(sizes or {0})}); got {k}.")
    group_scores(scores, groups)              # checks that the groups fit the scores
    rng = random.Random(seed)
    removed = []
    for kind, rows in groups.items():
        for layer, row in enumerate(rows):
            for group in row:
                order = sorted(group, key=lambda h: (scores.kinds[kind][layer][h], rng.random()))
                removed += [(kind, layer, h) for h in order[:k]]
    return HeadMask.from_removed(scores.layout, removed)


def uniform_by_group(scores: HeadScores, groups: KVGroups, fraction: float, seed: int = 0,
                     protected: Protected = frozenset()) -> HeadMask:
    """Remove the same number of whole key/value groups from every layer: round(fraction * groups) of each
    layer's groups, those with the lowest summed score (the most important kept; ties broken by ``seed``).

    Every layer of a kind then keeps as many query heads and key/value heads as every other, so a
    grouped-query decoder (Llama, Qwen2, Mistral, Gemma) pruned with it has a shape a stock config can
    write (:meth:`~pruning_core.modeling.architectures.ArchitectureAdapter.stock_shape`). Without grouping each
    head is its own group: the same count of heads per layer. ``groups``: :func:`pruning_core.modeling.architectures.
    kv_groups_of` of the model's sites. Raises when ``fraction`` rounds to no group although it is above 0, or
    when a layer has too few groups without a ``protected`` head.
    """
    _check_fraction(fraction)
    by_group = group_scores(scores, groups)
    rng = random.Random(seed)
    removed = []
    for kind, rows in by_group.kinds.items():
        for layer, row in enumerate(rows):
            count = removed_per_layer(len(row), fraction)
            if fraction > 0 and count == 0:
                raise HeadpruneError(
                    f"Removing {fraction:g} of {len(row)} key/value group(s) per layer rounds to none ({kind} "
                    f"layer {layer}); a uniform mask removes whole groups, at least 1/{len(row)} of each layer. "
                    "Give a larger share, or remove query heads inside every group instead (the 'k per group' "
                    "preset, presets.prune_k_per_group).")
            order = sorted(range(len(row)), key=lambda g: (row[g], rng.random()))
            order = [g for g in order if not any((kind, layer, h) in protected for h in groups[kind][layer][g])]
            if len(order) < count:
                raise HeadpruneError(
                    f"{kind} layer {layer} has only {len(order)} key/value group(s) without a protected head, but a "
                    f"uniform mask removes {count} from every layer. Protect fewer roles, or drop --uniform.")
            removed += [(kind, layer, h) for g in order[:count] for h in groups[kind][layer][g]]
    return HeadMask.from_removed(scores.layout, removed)
