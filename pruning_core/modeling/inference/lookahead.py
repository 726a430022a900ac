"""Lookahead steps: greedy decoding that checks several guessed tokens in one decoder call, for the same tokens.

A row that has diverged from its draft often rejoins it a word later, and a row that repeats itself (a pruned model
looping up to the length bound) repeats a cycle it has written. So what followed the row's last few tokens, in its
old draft or earlier in its own output (n-gram lookup, as in prompt-lookup decoding), is fed after its last token in
one call (``step_many``), every position is scored as a greedy step would score it, and the batch keeps the longest
run of positions where every row's best token is the one fed next: exactly what greedy steps would produce. The steps
are then cut back (``back``) to the inputs kept; a near-tie in any row ends the run, and a plain step decides it.
Used by :func:`pruning_core.modeling.inference.drafts.draft_greedy_decode`; plain ``greedy_decode`` stays the
reference."""
from __future__ import annotations

import torch
from torch import Tensor

NGRAM = 3          # the longest tail looked up (then shorter ones)
FIRST_WIDTH = 4    # tokens guessed per call at first; doubled when all are kept, halved when few are
MOST_WIDTH = 32
MOST_ROWS = 2      # a call feeds rows x (1 + width) tokens: only for a batch down to its last rows (a looping row)
PATIENCE = 4       # plain steps after a call that kept no guessed token


class Lookahead:
    """Guesses per row from ``sources`` (row index -> an earlier output of that row, e.g. its draft) and from the
    row's own tokens; counts the calls made (``calls``) and the guessed tokens they kept (``kept``)."""

    def __init__(self, sources: dict[int, list[int]] | None = None, eos: int | None = None,
                 tolerance: float = 0.0) -> None:
        self.sources, self.eos, self.tolerance = sources or {}, eos, tolerance
        self.width, self.wait = FIRST_WIDTH, 0
        self.calls = self.kept = 0

    def step(self, run, choice, out: list[list[int]], room: int | None) -> Tensor | None:
        """Decode one or more tokens of every row of ``run`` (a :class:`~pruning_core.modeling.inference.greedy.Resume`
        whose steps have ``step_many`` and ``back``) in one call, appending them to ``out`` and advancing
        ``run.index``; returns ``[b]`` each row's last new token, or None where no call is worth making (the caller
        takes a plain step). ``room``: at most this many tokens (a group waits to join at that index), or None."""
        width = self._width(run, room)
        if width < 2:
            return None
        rows = run.rows.tolist()
        guesses = [guess(out[r], self.sources.get(r), width, self.eos) for r in rows]
        if any(not g for g in guesses):
            return None
        width = min(width, max(len(g) for g in guesses))
        device = run.token.device
        fed = torch.tensor([(g + g[-1:] * width)[:width] for g in guesses], dtype=torch.long, device=device)
        fed = torch.cat([run.token[:, None], fed], dim=1)                                   # [b, 1 + width]
        hidden = run.steps.step_many(fed)                                                   # [b, 1 + width, d]
        t = fed.shape[1]
        kept, new = self._kept(choice, run.rows, hidden, fed.cpu())
        self.calls += 1
        self._adapt(kept, t)
        run.steps.back(t - kept)
        if kept == 0:
            return None
        for r, tokens in zip(rows, new.tolist()):
            out[r].extend(tokens)
        self.kept += kept - 1
        run.index += kept
        return new[:, -1].to(run.token.device)

    def _kept(self, choice, rows: Tensor, hidden: Tensor, fed: Tensor) -> tuple[int, Tensor]:
        """How many positions the batch keeps, and ``[b, kept]`` their best tokens: positions scored a few at a
        time (1, 2, 4, ... : a wrong guess early costs little of the output layer) until one is a near-tie in some
        row, or some row's best token is not the one fed after it (or is ``</s>``)."""
        b, t = fed.shape
        best, start, size = [], 0, 1
        while start < t:
            end = min(t, start + size)
            tokens, gap = choice.best_two(hidden[:, start:end].reshape(b * (end - start), -1),
                                          rows.repeat_interleave(end - start), first=False)
            tokens, sure = tokens.view(b, -1), (gap >= self.tolerance).view(b, -1)
            for j in range(end - start):
                if not bool(sure[:, j].all()):
                    return start + j, torch.cat(best + [tokens[:, :j]], dim=1)
                at = start + j
                ends = at == t - 1 or not bool((tokens[:, j] == fed[:, at + 1]).all()) or \
                    (self.eos is not None and bool((tokens[:, j] == self.eos).any()))
                if ends:
                    return at + 1, torch.cat(best + [tokens[:, :j + 1]], dim=1)
            best.append(tokens)
            start, size = end, 2 * size
        return t, torch.cat(best, dim=1)

    def _width(self, run, room: int | None) -> int:
        """Guessed tokens for this call (0: none): within every row's bound with a step to spare (no forced
        ``</s>`` falls inside a call) and before a waiting group's index."""
        if self.wait > 0:
            self.wait -= 1
            return 0
        if run.index == 0 or run.rows.numel() > MOST_ROWS or not hasattr(run.steps, "step_many"):
            return 0
        width = min(self.width, int(run.limits.min()) - run.index - 2)
        return width if room is None else min(width, room - 1)

    def _adapt(self, kept: int, fed: int) -> None:
        if kept == fed:
            self.width = min(MOST_WIDTH, 2 * self.width)
        elif kept <= 1:
            self.width, self.wait = max(2, self.width // 2), PATIENCE
        else:
            self.width = max(2, self.width // 2) if kept < fed // 2 else self.width


def guess(tokens: list[int], source: list[int] | None, width: int, eos: int | None) -> list[int]:
    """Up to ``width`` tokens likely to follow ``tokens``: what followed its last ``NGRAM`` (or fewer) tokens in
    ``source`` (the occurrence nearest the same place), else earlier in ``tokens`` itself (repeated as a cycle);
    [] where neither has them. Cut after ``eos``."""
    found = (_from_source(tokens, source, width) if source else []) or _from_itself(tokens, width)
    if eos is not None and eos in found:
        found = found[:found.index(eos) + 1]
    return found


def _from_source(tokens: list[int], source: list[int], width: int) -> list[int]:
    for n in range(min(NGRAM, len(tokens)), 0, -1):
        tail = tokens[-n:]
        starts = [i for i in range(len(source) - n) if source[i:i + n] == tail]
        if starts:
            i = min(starts, key=lambda s: abs(s - (len(tokens) - n)))
            return source[i + n:i + n + width]
    return []


def _from_itself(tokens: list[int], width: int) -> list[int]:
    for n in range(min(NGRAM, len(tokens) - 1), 0, -1):
        tail = tokens[-n:]
        for i in range(len(tokens) - n - 1, -1, -1):            # the latest earlier occurrence
            if tokens[i:i + n] == tail:
                seq = list(tokens)
                for j in range(width):                          # what followed it, and on as a cycle
                    seq.append(seq[i + n + j])
                return seq[len(tokens):]
    return []
