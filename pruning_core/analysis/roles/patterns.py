"""The attention-pattern roles, each a score per head on the ``text`` or ``repeated`` probe.

Notation as in METHODS.md: ``a`` is one layer's maps ``[heads, T_q, T_k]`` of one sequence (row i = query
i), ``t`` the token ids. A score is the mean over probe sequences of a per-sequence value (positional:
pooled over every query of every sequence). Bidirectional encoders see both sides of a query, so
previous-token takes the larger of the -1 and +1 offsets and duplicate-token counts earlier and later
copies; causal stacks read only earlier positions.
"""
from __future__ import annotations

import numpy as np

from pruning_core.analysis.roles.base import (
    SELF_KINDS,
    Accumulator,
    MeanOverSequences,
    ProbeSequence,
    Role,
    register_role,
)


def _diagonal_mean(a: np.ndarray, offset: int) -> np.ndarray | None:
    """Per head, the mean of ``a[h].diagonal(offset)`` (offset -1: each query's weight on the previous key)."""
    d = np.diagonal(a, offset=offset, axis1=1, axis2=2)                 # [heads, T - |offset|]
    return d.mean(axis=1) if d.shape[1] else None


def previous_token(seq: ProbeSequence, a: np.ndarray) -> np.ndarray | None:
    before = _diagonal_mean(a, -1)
    if seq.causal or before is None:
        return before
    return np.maximum(before, _diagonal_mean(a, 1))


def current_token(seq: ProbeSequence, a: np.ndarray) -> np.ndarray | None:
    return _diagonal_mean(a, 0)


def first_token(seq: ProbeSequence, a: np.ndarray) -> np.ndarray | None:
    return a[:, :, 0].mean(axis=1) if a.shape[1] and a.shape[2] else None


def duplicate_token(seq: ProbeSequence, a: np.ndarray) -> np.ndarray | None:
    """sum(A * D) / sum(A) over the query rows that have a duplicate key (D: same token, diagonal excluded)."""
    same = seq.query_ids[:, None] == seq.key_ids[None, :]               # [T_q, T_k]
    np.fill_diagonal(same, False)
    if seq.causal:
        same &= np.tri(*same.shape, k=-1, dtype=bool)                  # j < i
    rows = same.any(axis=1)
    if not rows.any():
        return None
    return (a[:, rows] * same[rows]).sum(axis=(1, 2)) / a[:, rows].sum(axis=(1, 2))


def induction(seq: ProbeSequence, a: np.ndarray) -> np.ndarray:
    """Mean of A.diagonal(-(n - 1)) over the second copy's queries: attention to the token after the first
    occurrence of the current token."""
    n, start = seq.marks["repeat"], seq.marks["start"]
    queries = np.arange(start, start + n)
    return a[:, queries, queries - (n - 1)].mean(axis=1)


def rare_word(seq: ProbeSequence, a: np.ndarray) -> np.ndarray | None:
    """1 per head whose most attended key (attention summed over queries; causal: divided by the queries
    that can see the key) is the sentence's rarest token in the training text, else 0."""
    keep = ~seq.special_keys
    if keep.sum() < 2 or seq.frequency is None:
        return None
    counts = np.array([seq.frequency.get(int(t), 0) for t in seq.key_ids])
    if counts[keep].min() == counts[keep].max():                     # every token equally rare: no information
        return None
    received = a.sum(axis=1)                                          # [heads, T_k]
    if seq.causal:
        received = received / (a.shape[1] - np.arange(a.shape[2]))    # queries j..T-1 see key j
    received[:, ~keep] = -np.inf
    top = received.argmax(axis=1)                                     # [heads]
    return (counts[top] == counts[keep].min()).astype(np.float64)


class OffsetMode(Accumulator):
    """Positional: per head, the share of all probe queries whose argmax key sits at the head's most common
    relative offset (j - i), pooled over the sequences."""

    def __init__(self) -> None:
        self.hist: dict[int, dict[int, np.ndarray]] = {}           # layer -> offset -> [heads] counts
        self.queries: dict[int, int] = {}

    def add(self, seq: ProbeSequence) -> None:
        for layer, a in enumerate(seq.maps):
            if a.shape[0] == 0 or a.shape[1] == 0:
                continue
            offsets = a.argmax(axis=2) - np.arange(a.shape[1])[None, :]     # [heads, T_q]
            per = self.hist.setdefault(layer, {})
            for off in np.unique(offsets):
                per[int(off)] = per.get(int(off), 0) + (offsets == off).sum(axis=1)
            self.queries[layer] = self.queries.get(layer, 0) + a.shape[1]

    def result(self, rows: tuple[int, ...]) -> np.ndarray:
        out = np.full((len(rows), max(rows, default=0)), np.nan)
        for layer, per in self.hist.items():
            out[layer, :rows[layer]] = np.max(np.stack(list(per.values())), axis=0) / self.queries[layer]
        return out


def _mean(fn):
    return lambda: MeanOverSequences(fn)


register_role(Role("previous_token", "previous token", "text", 0.4,
                   "mean of A.diagonal(-1) (weight on the previous token) over the probe's queries; bidirectional "
                   "encoders: the larger of the -1 and +1 offsets' means (previous or next token)",
                   SELF_KINDS, _mean(previous_token)))
register_role(Role("current_token", "current token", "text", 0.4,
                   "mean of A.diagonal() (weight on the query's own token)", SELF_KINDS, _mean(current_token)))
register_role(Role("first_token", "first token (sink)", "text", 0.4,
                   "mean of A[:, 0] (weight on the first position: the first token, or the first audio frame "
                   "for speech cross-attention)", SELF_KINDS + ("cross",), _mean(first_token)))
register_role(Role("duplicate_token", "duplicate token", "text", 0.4,
                   "sum(A * D) / sum(A) over query rows with a duplicate, D[i, j] = 1 if t_i = t_j, j != i "
                   "(causal: j < i)", SELF_KINDS, _mean(duplicate_token)))
register_role(Role("induction", "induction", "repeated", 0.4,
                   "mean of A.diagonal(-(n - 1)) over the second copy of [BOS] + R + R (attention to the token "
                   "after the current token's first occurrence); causal self-attention only",
                   ("decoder_self",), _mean(induction)))
register_role(Role("positional", "positional (fixed offset)", "text", 0.9,
                   "share of query tokens whose most attended key sits at the head's most common relative "
                   "offset j - i, pooled over the probe", SELF_KINDS, OffsetMode))
register_role(Role("rare_word", "rare word", "text", 0.5,
                   "share of sentences whose most attended key (attention summed over queries, special tokens "
                   "excluded; causal: per query that sees it) is the sentence's rarest token in the task's "
                   "training text", SELF_KINDS, _mean(rare_word)))
