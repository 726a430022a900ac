"""Drafts: decoded tokens of recent evaluations, kept for the next, and greedy decoding checked against them. A click
on the head map changes a few words of a few outputs, so the output under the nearest mask already evaluated (fewest
heads apart; the all-heads output at first) is checked in one teacher-forced pass (:func:`draft_greedy_decode`) and
decoded step by step only from each row's first difference: the same tokens as
:func:`pruning_core.modeling.inference.greedy.greedy_decode`.

Keyed by model (its identity and weights), data and decoding options; a few masks per key, the least recently used
dropped first. Drafts only save work: any draft gives greedy decoding's tokens. Thread-safe (sessions share one store).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from dataclasses import dataclass

import torch
from torch import Tensor

from pruning_core.core.heads import HeadId, HeadMask
from pruning_core.modeling.architectures import adapter_for
from pruning_core.modeling.inference.greedy import (AllowedIds, CachedSteps, Choice, Resume, Rules, _cache_of, _pairs,
                                                    OnStep, run_steps, translation_rules)
from pruning_core.modeling.inference.lookahead import Lookahead


def draft_key(loaded, data, options: dict) -> tuple:
    """What decides an evaluation's decoded tokens besides the mask: the model, the encoded data and the options."""
    return (id(loaded.model), loaded.weights_sha256, data.task.name, data.split, data.n_examples, data.fingerprint,
            tuple(sorted((k, v) for k, v in options.items() if isinstance(v, (bool, int, float, str)))))


def _removed(mask: HeadMask | None) -> frozenset[HeadId]:
    return frozenset() if mask is None else frozenset(mask.removed())


class DraftStore:
    """Per key, the decoded tokens (one list per example) under up to ``masks`` masks."""

    def __init__(self, masks: int = 16, keys: int = 8) -> None:
        if masks < 1 or keys < 1:
            raise ValueError(f"DraftStore keeps at least one mask of one key, got masks={masks}, keys={keys}.")
        self.masks, self.keys = masks, keys
        self._entries: OrderedDict[Hashable, OrderedDict[frozenset, tuple[tuple[int, ...], ...]]] = OrderedDict()
        self._lock = threading.Lock()

    def draft(self, key: Hashable, mask: HeadMask | None) -> list[list[int]] | None:
        """Per example the tokens decoded under the stored mask nearest ``mask`` (ties: the latest), or None."""
        removed = _removed(mask)
        with self._lock:
            outputs = self._entries.get(key)
            if not outputs:
                return None
            self._entries.move_to_end(key)
            nearest = min(reversed(outputs), key=lambda other: len(other ^ removed))
            return [list(row) for row in outputs[nearest]]

    def put(self, key: Hashable, mask: HeadMask | None, tokens: list[list[int]]) -> None:
        """Keep ``tokens`` (per example) as decoded under ``mask``."""
        removed = _removed(mask)
        with self._lock:
            outputs = self._entries.setdefault(key, OrderedDict())
            self._entries.move_to_end(key)
            outputs.pop(removed, None)
            outputs[removed] = tuple(tuple(row) for row in tokens)
            while len(outputs) > self.masks:
                outputs.popitem(last=False)
            while len(self._entries) > self.keys:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._entries.values())


# two best logits closer than this (float32 logits) are a near-tie: a teacher-forced pass and step-by-step decoding
# add in different orders (float32 rounding, far below this), so the check does not decide such a position; a greedy
# step does (benchmarks/draft_decoding.py counts them)
NEAR_TIE = 1e-3


@dataclass(frozen=True)
class DraftStats:
    """What checking drafts cost and saved: ``rows``; ``drafted``/``accepted`` tokens (accepted: the draft's tokens
    kept); ``near_ties``: positions whose two best logits were within :data:`NEAR_TIE`, decided by a greedy step;
    ``passes``: teacher-forced checks (one per round); ``resumed``: rows decoded on by greedy steps after the last
    round; ``steps``: the steps they took, one or more tokens each (plain greedy takes about the longest output's
    length); ``lookahead``: decoder calls that fed guessed tokens (:mod:`pruning_core.modeling.inference.lookahead`;
    one that kept none is followed by a plain step), ``guessed``: the guessed tokens they kept."""

    rows: int = 0
    drafted: int = 0
    accepted: int = 0
    near_ties: int = 0
    passes: int = 0
    resumed: int = 0
    steps: int = 0
    lookahead: int = 0
    guessed: int = 0

    def __add__(self, other: "DraftStats") -> "DraftStats":
        return DraftStats(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple())))

    def as_tuple(self) -> tuple[int, ...]:
        return (self.rows, self.drafted, self.accepted, self.near_ties, self.passes, self.resumed, self.steps,
                self.lookahead, self.guessed)


def draft_greedy_decode(model, input_ids: Tensor | None, attention_mask: Tensor | None, *,
                        drafts: list[list[int] | None], max_new_tokens: int | Tensor,
                        encoder_hidden: Tensor | None = None, allowed: AllowedIds | None = None,
                        rules: Rules | None = None, cross=None, tolerance: float = NEAR_TIE,
                        rounds: int = 1, on_step: OnStep | None = None,
                        lookahead: bool = True) -> tuple[list[list[int]], DraftStats]:
    """:func:`greedy_decode`'s tokens, checked against a draft per row (an output already known: the previous mask's)
    in a few teacher-forced passes, decoded step by step only where the drafts run out.

    A pass feeds the prompt and each row's draft (cut at its first ``</s>`` and its bound) and scores every position
    as a greedy step would (the same shortlist, suppressed ids and forced ``</s>``). A row keeps its draft up to the
    first position whose best token differs and takes the best token there; its draft then goes on with the old
    draft's rest, re-aligned after that token, and the next pass checks it (at most ``rounds`` passes; more than one
    cost Bergamot more than it saved, docs/FIGURES.md). After the
    last, a row not finished goes on with greedy steps from the cache its last pass filled, cut to its length (rows
    resuming at one length decode together; later ones join the batch when it reaches them). A position whose two
    best logits lie within ``tolerance`` is not decided by a pass: the row goes on from there with greedy steps.
    Same arguments as :func:`greedy_decode`, and:

    Args:
        drafts: per row its draft tokens after the prompt (None or [] for none: the row decodes greedily).
        tolerance: the near-tie margin, in logits.
        rounds: at most this many passes (1: check the draft once, then greedy steps).
        lookahead: let the steps after the last pass check guessed tokens, several in one call (from the row's draft
            and its own output: :mod:`pruning_core.modeling.inference.lookahead`); False: one token a step.
    Returns:
        per row its tokens after the prompt (those of :func:`greedy_decode`), and the :class:`DraftStats`.
    """
    rules = rules or translation_rules(model)
    if encoder_hidden is None:
        encoder_hidden = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    n, device = encoder_hidden.shape[0], encoder_hidden.device
    if len(drafts) != n:
        raise ValueError(f"draft_greedy_decode got {len(drafts)} drafts for {n} rows.")
    if rounds < 1:
        raise ValueError(f"draft_greedy_decode needs at least one round, got rounds={rounds}.")
    limits = torch.as_tensor(max_new_tokens).long().expand(n).clone()                    # [n]
    out: list[list[int]] = [[] for _ in range(n)]
    if n == 0 or int(limits.max()) < 1:
        return out, DraftStats(rows=n)
    bounds = limits.tolist()
    spec = [_cut(d or [], rules.eos, b) for d, b in zip(drafts, bounds)]     # per row: what the next pass checks
    drafted = sum(len(d) for d in spec)
    start = [0] * n                                          # per row: its tokens known before spec[start]
    prompt, choice = list(rules.prompt), Choice(model, rules, allowed, encoder_hidden)
    p = len(prompt)
    live, resumes = list(range(n)), []
    accepted = ties = passes = 0
    for round_ in range(rounds):
        if not live:
            break
        sub = torch.tensor(live)
        on = sub.to(device)
        width = max(len(spec[r]) for r in live)
        fed = torch.tensor([prompt + spec[r] + [rules.eos] * (width - len(spec[r])) for r in live], device=device)
        enc, mask = encoder_hidden[on], None if attention_mask is None else attention_mask[on]
        filled = _filled_cache(model, cross if len(live) == n else _cross_rows(model, cross, on))
        masked = {} if mask is None else {"encoder_attention_mask": mask}
        hidden = model.get_decoder()(input_ids=fed, encoder_hidden_states=enc, past_key_values=filled,
                                     use_cache=True, **masked).last_hidden_state                 # [b, P + D, d]
        passes += 1
        # new token i of a row is predicted at input P - 1 + i, from its first unknown token up to its draft's end
        spans = [(start[r], min(len(spec[r]), bounds[r] - 1) + 1) for r in live]
        going: list[int] = []

        def ends(q: int, i: int, t: int, g: float) -> bool:
            """Whether batch row ``q``'s check ends at its new token ``i`` (best ``t``, gap ``g``), settling it."""
            nonlocal accepted, ties
            r = live[q]
            d = spec[r]
            if g < tolerance:                                # decided by a greedy step from input P - 1 + i
                ties += 1
                out[r] = d[:i]
                resumes.append((i, r, d[i - 1] if i else prompt[-1], filled, q))
                return True
            if i < len(d) and t == d[i]:
                accepted += 1
                if t == rules.eos or i == bounds[r] - 1:
                    out[r] = d[:i + 1]
                    return True
                return False
            out[r] = d[:i] + [t]
            if t == rules.eos or i == bounds[r] - 1:
                return True
            rest = _realigned(d, i, t)
            if round_ == rounds - 1 or not rest:
                resumes.append((i + 1, r, t, filled, q))
            else:
                spec[r], start[r] = _cut(out[r] + rest, rules.eos, bounds[r]), i + 1
                going.append(r)
            return True

        _check(choice, hidden, sub, spans, p, limits, rules.forced_eos, ends)
        live = sorted(going)
    groups: dict[tuple[int, int], list] = {}
    for index, r, token, filled, q in sorted(resumes, key=lambda m: m[1]):     # in row order, as the rows were fed
        groups.setdefault((index, id(filled)), []).append((r, token, filled, q))
    ahead = Lookahead({r: spec[r] for _, r, *_ in resumes}, rules.eos, tolerance) if lookahead else None
    ran = run_steps(choice, rules, out, [_resume(model, encoder_hidden, attention_mask, index, members, limits, p)
                                         for (index, _), members in groups.items()], on_step, ahead)
    return out, DraftStats(rows=n, drafted=drafted, accepted=accepted, near_ties=ties, passes=passes,
                           resumed=len(resumes), steps=ran, lookahead=ahead.calls if ahead else 0,
                           guessed=ahead.kept if ahead else 0)


def _realigned(draft: list[int], i: int, token: int, window: int = 3) -> list[int]:
    """What of ``draft`` likely follows once ``token`` replaced ``draft[i]``: after the same token a little further
    on (the output skipped a few), else after ``draft[i]`` (a word for a word)."""
    ahead = draft[i + 1:i + 1 + window]
    return draft[i + 2 + ahead.index(token):] if token in ahead else draft[i + 1:]


def _cut(draft: list[int], eos: int, bound: int) -> list[int]:
    """``draft`` up to its first ``eos`` (kept) and at most ``bound`` tokens."""
    draft = list(draft[:bound])
    return draft[:draft.index(eos) + 1] if eos in draft else draft


def _filled_cache(model, cross):
    """An empty ``EncoderDecoderCache`` for a teacher-forced pass (its cross-attention ``cross``, if given)."""
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    return EncoderDecoderCache(DynamicCache(config=model.config),
                               cross if cross is not None else DynamicCache(config=model.config))


def _cross_rows(model, cross, rows: Tensor):
    """The rows ``rows`` of a cross-attention cache (a new one; None stays None)."""
    if cross is None:
        return None
    return _cache_of(model, [None if kv is None else (kv[0][rows], kv[1][rows]) for kv in _pairs(cross)])


FIRST_WINDOW = 8      # positions per row scored at first; the window doubles for the rows still matching


def _check(choice: Choice, hidden: Tensor, rows: Tensor, spans: list[tuple[int, int]], p: int, limits: Tensor,
           forced_eos: int | None, ends) -> None:
    """Score each batch row ``q``'s new tokens ``spans[q]`` (from, to) in order, a window of positions at a time, and
    call ``ends(q, i, best, gap)`` for each until it returns True: positions after a row's first difference are never
    put through the output layer (most rows of a click differ early). ``rows``: the batch rows' indices in the
    output, for the shortlist; the forced ``</s>`` at a row's bound has an infinite gap."""
    at_pos = [b for b, _ in spans]
    active, size = [q for q, (b, e) in enumerate(spans) if e > b], FIRST_WINDOW
    while active:
        counts = [min(size, spans[q][1] - at_pos[q]) for q in active]
        at_row = torch.repeat_interleave(torch.tensor(active), torch.tensor(counts))
        at = torch.cat([torch.arange(at_pos[q], at_pos[q] + c) for q, c in zip(active, counts)])
        best, gap = _best_two(choice, hidden, at_row, rows[at_row], at, p)
        if forced_eos is not None:
            forced = at == limits[rows[at_row]] - 1
            best[forced], gap[forced] = forced_eos, float("inf")
        best, gap, offset, still = best.tolist(), gap.tolist(), 0, []
        for q, c in zip(active, counts):
            if not any(ends(q, i, t, g) for i, t, g in zip(range(at_pos[q], at_pos[q] + c), best[offset:offset + c],
                                                            gap[offset:offset + c])):
                at_pos[q] += c
                if at_pos[q] < spans[q][1]:
                    still.append(q)
            offset += c
        active, size = still, 2 * size


def _best_two(choice: Choice, hidden: Tensor, at_row: Tensor, rows: Tensor, at: Tensor, p: int,
              chunk: int = 2048) -> tuple[Tensor, Tensor]:
    """``[N]`` the best token and ``[N]`` the gap to the second-best logit at new token ``at`` of batch row ``rows``
    (predicted by ``hidden[at_row, p - 1 + at]``), a chunk of positions at a time (inf where one id is possible)."""
    best, gap = [], []
    for s in range(0, at_row.shape[0], chunk):
        index = at[s:s + chunk]
        b, g = choice.best_two(hidden[at_row[s:s + chunk].to(hidden.device), (p - 1 + index).to(hidden.device)],
                               rows[s:s + chunk], first=index == 0)
        best.append(b)
        gap.append(g)
    return torch.cat(best), torch.cat(gap)


def _resume(model, encoder_hidden: Tensor, encoder_mask: Tensor | None, index: int, members: list,
            limits: Tensor, p: int) -> Resume:
    """The rows ``members`` (row, token to feed, the pass's cache, the row's place in that pass) going on at new
    token ``index``, from that cache cut to their ``p + index - 1`` inputs: the family's lean steps where it has
    them."""
    rows = torch.tensor([m[0] for m in members])
    on, filled = rows.to(encoder_hidden.device), members[0][2]
    at = torch.tensor([m[3] for m in members], device=encoder_hidden.device)
    enc, mask = encoder_hidden[on], None if encoder_mask is None else encoder_mask[on]
    length = p + index - 1
    lean = adapter_for(model).decoder_steps(model, enc, mask) if p == 1 else None
    if lean is not None:
        lean.resume(filled, at, length)
        steps = lean
    else:
        steps = CachedSteps.resumed(model, enc, mask, filled, at, length)
    token = torch.tensor([m[1] for m in members], dtype=torch.long, device=encoder_hidden.device)
    return Resume(index, steps, token, rows, limits[rows])
