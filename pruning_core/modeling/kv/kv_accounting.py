"""The field's two ways of counting what a KV policy saves, beside our bytes (:func:`.kv_policy.kv_bytes`).

* :func:`compression_ratio` (kvpress): after a full prefill of ``context`` tokens, the share of the context's key/value
  entries dropped, over all layers and key/value heads; a streaming head's sink and window count as kept.
  ``1 - sum(kept) / (heads x context)``.
* :func:`kv_footprint` (PruLong, Bhaskar et al. 2025): entries x how long they stay in memory, normalised by the
  full cache's. Time runs in tokens processed: the prefill in steps of ``chunk`` tokens (the whole context in one
  step by default), then one step per generated token. The entry of position ``p`` is written in the step that
  processes ``p`` and stays until the end of the step after which the policy no longer keeps it (the cache evicts
  after each step), or to the end: it counts ``end - p`` token-times. The full cache counts ``N - p`` for every
  entry (``N`` = context + new tokens). A one-step prefill evicts nothing before its end, so its footprint without
  generation is 1 whatever the policy: the peak memory of a post-fill eviction, which the footprint is made to show.
"""
from __future__ import annotations

import bisect

from pruning_core.core.errors import FormatError
from pruning_core.modeling.kv.kv_policy import KVPolicy


def compression_ratio(policy: KVPolicy, context: int) -> float:
    """kvpress's compression ratio after a full prefill of ``context`` tokens (0: nothing dropped)."""
    if context < 1:
        raise FormatError(f"The context must be 1 token or more, got {context}.")
    kept = sum(map(sum, policy.kept_entries(context)))
    return 1.0 - kept / (policy.n_heads * context)


def _steps(context: int, new_tokens: int, chunk: int | None) -> list[int]:
    """Tokens seen after each step: the prefill in chunks, then one generated token a step."""
    if context < 1 or new_tokens < 0 or (chunk is not None and chunk < 1):
        raise FormatError(f"A footprint needs context >= 1, new tokens >= 0 and chunk >= 1, got {context}, "
                          f"{new_tokens}, {chunk}.")
    step = chunk or context
    ends = list(range(step, context, step)) + [context]
    return ends + list(range(context + 1, context + new_tokens + 1))


def _entry_times(sink: int, window: int | None, ends: list[int]) -> int:
    """Token-times of one head's entries: ``window`` None keeps everything."""
    total = ends[-1]
    if window is None:
        return total * (total + 1) // 2
    times, start = 0, 0
    for end in ends:                        # entries p in [start, end) are written in this step
        for p in range(start, end):
            if p < sink:
                times += total - p
                continue
            i = bisect.bisect_right(ends, max(p + window, end - 1))    # the first step end e >= end with e > p + window
            times += (ends[i] if i < len(ends) else total) - p
        start = end
    return times


def footprint_entries(policy: KVPolicy, context: int, new_tokens: int = 0, chunk: int | None = None) -> int:
    """Entry x token-times of ``policy`` over a prefill of ``context`` (in ``chunk`` steps) and ``new_tokens``."""
    ends = _steps(context, new_tokens, chunk)
    memo: dict = {}
    total = 0
    for l, row in enumerate(policy.streaming):
        for j, streaming in enumerate(row):
            key = policy.window_of(l, j) if streaming else None
            if key not in memo:
                memo[key] = _entry_times(policy.sink, key, ends)
            total += memo[key]
    return total


def kv_footprint(policy: KVPolicy, context: int, new_tokens: int = 0, chunk: int | None = None) -> float:
    """PruLong's KV footprint: :func:`footprint_entries` over the full cache's (1: no saving)."""
    full = KVPolicy.full(policy.kv_heads, policy.sink, policy.window)
    return footprint_entries(policy, context, new_tokens, chunk) / footprint_entries(full, context, new_tokens, chunk)
