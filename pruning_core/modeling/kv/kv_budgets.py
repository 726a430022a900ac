"""Per-head KV budgets: each key/value head keeps its own number of tokens (the sink and its own recent window).

HeadKV (Fu et al. 2025) splits one total budget over the heads by an importance score (retrieval, reasoning);
Ada-KV (Feng et al. 2024) lets heads compete for a shared budget above a per-head floor. :func:`split_by_scores`
does the split: every head gets ``floor`` tokens, the rest goes to the heads in proportion to their score, no head
above the context (its surplus goes to the others), rounded by largest remainder so that the budgets add up to the
total exactly. A head whose budget reaches the context keeps its whole cache; any other keeps ``sink`` tokens and a
window of ``budget - sink``. The token choice inside a head is recency (a window), as for streaming heads: Ada-KV's
and SnapKV's choice of tokens by attention is not implemented.

:func:`total_of` gives a binary policy's budget at a context, so a budget policy can be compared at equal memory.
"""
from __future__ import annotations

from collections.abc import Sequence

from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadScores, group_scores
from pruning_core.modeling.kv.kv_policy import KIND, KVPolicy


def total_of(policy: KVPolicy, context: int) -> int:
    """Cache entries ``policy`` keeps over all key/value heads after ``context`` tokens (its total budget)."""
    return sum(map(sum, policy.kept_entries(context)))


def split_by_scores(scores: Sequence[Sequence[float]], total: int, *, floor: int, context: int) -> tuple:
    """Budgets ``[layer][kv head]`` adding up to ``total``: ``floor`` each, the rest in proportion to ``scores``
    (negative scores count as 0; all zero: equal shares), none above ``context``."""
    heads = [(l, j) for l, row in enumerate(scores) for j in range(len(row))]
    if not heads:
        raise FormatError("No key/value heads to give budgets to.")
    if not 0 <= floor <= context:
        raise FormatError(f"The per-head floor must be between 0 and the context ({context}), got {floor}.")
    if not len(heads) * floor <= total <= len(heads) * context:
        raise FormatError(f"A total budget of {total} tokens cannot give {len(heads)} heads at least {floor} and at most "
                          f"{context} each: choose a total between {len(heads) * floor} and {len(heads) * context}.")
    weight = {h: max(0.0, float(scores[h[0]][h[1]])) for h in heads}
    budget = {h: float(floor) for h in heads}
    open_heads, left = set(heads), float(total - len(heads) * floor)
    while left > 1e-9 and open_heads:          # water-filling: shares above the context go back to the others
        mass = sum(weight[h] for h in open_heads)
        share = {h: left * (weight[h] / mass if mass > 0 else 1 / len(open_heads)) for h in open_heads}
        left = 0.0
        for h in sorted(open_heads):
            room = context - budget[h]
            if share[h] >= room:
                budget[h], left = float(context), left + share[h] - room
                open_heads.discard(h)
            else:
                budget[h] += share[h]
    whole = {h: int(budget[h]) for h in heads}
    short = total - sum(whole.values())        # largest remainder, ties by position
    for h in sorted(heads, key=lambda h: (-(budget[h] - whole[h]), h))[:short]:
        whole[h] += 1
    return tuple(tuple(whole[(l, j)] for j in range(len(row))) for l, row in enumerate(scores))


def budget_policy(budgets: Sequence[Sequence[int]], *, sink: int, context: int, source: dict | None = None) -> KVPolicy:
    """The policy whose head ``(l, j)`` keeps ``budgets[l][j]`` tokens at ``context``: the whole cache when the
    budget reaches the context, else ``sink`` tokens and a window of ``budget - sink`` (the budget must exceed the
    sink)."""
    small = [(l, j, b) for l, row in enumerate(budgets) for j, b in enumerate(row) if b < context and b <= sink]
    if small:
        raise FormatError(f"A head's budget must exceed the sink ({sink}) to keep a window; (layer, head, budget) "
                          f"{small[:3]}. Raise the floor above the sink or lower the sink.")
    streaming = tuple(tuple(b < context for b in row) for row in budgets)
    windows = tuple(tuple(b - sink if b < context else 0 for b in row) for row in budgets)
    stream_windows = [w for row in windows for w in row if w > 0]
    window = max(stream_windows) if stream_windows else 1
    return KVPolicy(streaming, sink, window, {"method": "budgets", "context": context, **(source or {})}, windows)


def from_scores(scores: HeadScores, groups, total: int, *, context: int, floor: int, sink: int = 128,
                source: dict | None = None) -> KVPolicy:
    """A budget policy from a score map (HeadKV's split): a key/value head's score is its query heads' sum
    (``groups``: :func:`~.kv_policy.groups_of`), ``total`` tokens over all heads, ``floor`` each."""
    per_group = group_scores(scores, {KIND: groups[KIND]}).kinds[KIND]           # [layers][kv heads]
    budgets = split_by_scores(per_group, total, floor=floor, context=context)
    return budget_policy(budgets, sink=sink, context=context,
                         source={"total": total, "floor": floor, **(source or {})})
