"""Greedy decoding of an encoder-decoder translation model, step by step: what a click on the head map waits for.

The same tokens as ``model.generate(num_beams=1, do_sample=False, max_new_tokens=N)`` (Bart/Marian; Whisper with
its own :class:`Rules`, :func:`pruning_core.tasks.speech.greedy_rules`), with less work per click: the encoder's
output can be passed in; each step feeds only the last token (cached SSRU states or self-attention keys/values,
cross-attention keys/values projected once; lean adapter steps where the family has them); a finished row leaves
the batch. ``max_new_tokens`` may be one bound per row (:class:`LengthBound`). Head masks apply as in any forward
pass. ``allowed``: a vocabulary shortlist (:mod:`pruning_core.modeling.inference.shortlist`) scores only the batch's union
of allowed ids: an approximation (Marian's and Bergamot's deployed one); without it the result is exact.
:func:`pruning_core.modeling.inference.drafts.draft_greedy_decode` gives the same tokens from a draft per row.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from pruning_core.modeling.architectures import adapter_for
from pruning_core.modeling.inference.packed_logits import output_layer, projection

if TYPE_CHECKING:
    from pruning_core.modeling.inference.lookahead import Lookahead

# generation settings that change greedy tokens beyond </s> and the forced </s> at the last step: a model whose
# generation config sets one of them decodes with ``generate`` (see :func:`supports_greedy`)
_OTHER_PROCESSORS = ("min_length", "min_new_tokens", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
                     "bad_words_ids", "forced_bos_token_id", "suppress_tokens", "begin_suppress_tokens",
                     "sequence_bias", "exponential_decay_length_penalty", "renormalize_logits")


@dataclass(frozen=True)
class Rules:
    """What greedy decoding feeds first and may produce, besides the argmax.

    ``prompt``: the decoder's first input ids, fed at once (Bart/Marian: the start token; Whisper: start of
    transcript, language, task, no timestamps). ``eos``: a row ends with it. ``forced_eos``: produced at a row's last
    step when its ``max_new_tokens`` run out (Bart). ``suppressed``: never produced; ``first_suppressed``: not produced
    as the first new token; ``below``: only ids below it are produced (Whisper's timestamps start there).
    """

    prompt: tuple[int, ...]
    eos: int
    forced_eos: int | None = None
    suppressed: tuple[int, ...] = ()
    first_suppressed: tuple[int, ...] = ()
    below: int | None = None

    def __post_init__(self) -> None:
        if not self.prompt:
            raise ValueError("Rules.prompt needs at least the decoder's start token.")


@dataclass(frozen=True)
class LengthBound:
    """At most ``plus + per * length`` new tokens for an input of ``length`` ``unit`` (source tokens, seconds of
    audio), and never more than the task's own maximum: greedy decoding stops a row that repeats itself there."""

    per: float
    plus: int
    unit: str

    def __post_init__(self) -> None:
        if self.per <= 0 or self.plus < 1:
            raise ValueError(f"LengthBound needs per > 0 and plus >= 1, got per={self.per}, plus={self.plus}.")

    def tokens(self, lengths: Tensor, most: int) -> Tensor:
        """``[B]`` long: each row's bound for inputs of ``lengths`` ``[B]`` (in ``unit``), at most ``most``."""
        bound = torch.floor(lengths.double() * self.per).long() + self.plus
        return bound.clamp(max=most)

    def describe(self) -> str:
        return f"at most {self.plus} + {self.per:g} x {self.unit} new tokens"


def supports_greedy(model) -> bool:
    """Whether :func:`greedy_decode` gives ``model``'s greedy ``generate`` tokens: an encoder-decoder whose logits are
    ``lm_head(h) + final_logits_bias`` (Bart, Marian, Marian-SSRU) and whose generation config asks for nothing but
    ``</s>`` and the forced ``</s>``."""
    gen = getattr(model, "generation_config", None)
    if gen is None or not getattr(model.config, "is_encoder_decoder", False):
        return False
    if output_layer(model) is None or not all(hasattr(model, a) for a in ("get_decoder", "get_encoder")):
        return False
    if getattr(gen, "repetition_penalty", 1.0) not in (None, 1.0):
        return False
    return not any(getattr(gen, name, None) for name in _OTHER_PROCESSORS)


def _specials(model) -> tuple[int, int]:
    gen = model.generation_config
    start = gen.decoder_start_token_id if gen.decoder_start_token_id is not None else model.config.decoder_start_token_id
    return int(start), eos_of(model)


def eos_of(model) -> int:
    """The id that ends a generated row (the generation config's first, else the model config's)."""
    gen = model.generation_config
    eos = gen.eos_token_id if gen.eos_token_id is not None else model.config.eos_token_id
    return int(eos[0] if isinstance(eos, (list, tuple)) else eos)


def _forced_eos(model) -> int | None:
    forced = getattr(model.generation_config, "forced_eos_token_id", None)
    forced = forced[0] if isinstance(forced, (list, tuple)) else forced
    return None if forced is None else int(forced)


def translation_rules(model) -> Rules:
    """The rules of ``generate``'s greedy decoding for a model :func:`supports_greedy` accepts."""
    start, eos = _specials(model)
    return Rules(prompt=(start,), eos=eos, forced_eos=_forced_eos(model))


def greedy_decode(model, input_ids: Tensor | None, attention_mask: Tensor | None, *, max_new_tokens: int | Tensor,
                  encoder_hidden: Tensor | None = None, allowed: "AllowedIds | None" = None,
                  rules: Rules | None = None, cross=None, on_step: "OnStep | None" = None) -> list[list[int]]:
    """Greedy tokens of every row, each ending with ``</s>`` unless its ``max_new_tokens`` ran out first.

    Args:
        model: a model :func:`supports_greedy` accepts, or any whose ``rules`` are given (Whisper), in eval mode (call
            under ``torch.inference_mode()`` and the head mask, as any forward).
        input_ids, attention_mask: ``[B, S]`` source ids and 1 = token, 0 = padding; ``attention_mask`` None for an
            encoder without padding (Whisper's frames), ``input_ids`` None when ``encoder_hidden`` is given.
        max_new_tokens: at most this many tokens per row, or ``[B]`` one bound per row (:class:`LengthBound`); a
            row's last is ``</s>`` when the model forces it.
        encoder_hidden: ``[B, S, d]`` the encoder's output for these inputs under the same mask, if already computed.
        allowed: per row the target ids it may produce (a shortlist), or None for the whole vocabulary.
        rules: what is fed first and may be produced; None: the model's own (:func:`translation_rules`).
        cross: the cross-attention keys and values of ``encoder_hidden`` already projected (a transformers cache of
            every decoder layer, as the teacher-forced pass left them), for the model's own decoder; None: projected
            here, once.
        on_step: called after each step with the tokens decoded so far and the most any row may have (progress).
    Returns:
        per row, its tokens after the prompt.
    """
    rules = rules or translation_rules(model)
    if encoder_hidden is None:
        encoder_hidden = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    n, device = encoder_hidden.shape[0], encoder_hidden.device
    limits = torch.as_tensor(max_new_tokens).long().expand(n).clone()           # [n] per live row
    out: list[list[int]] = [[] for _ in range(n)]
    if n == 0 or int(limits.max()) < 1:
        return out
    prompt = torch.tensor(rules.prompt, dtype=torch.long, device=device).expand(n, -1)    # [n, P]
    steps = decoder_steps(model, encoder_hidden, attention_mask, prompt_length=prompt.shape[1], cross=cross)
    choice = Choice(model, rules, allowed, encoder_hidden)
    token = prompt[:, 0] if prompt.shape[1] == 1 else prompt
    run_steps(choice, rules, out, [Resume(0, steps, token, torch.arange(n), limits)], on_step)
    return out


@dataclass
class Resume:
    """Rows that go on decoding together from new token ``index`` (each row's first ``index`` tokens already in
    ``out``): ``steps`` hold their decoder state before ``token`` ``[b]`` (``[b, P]`` the whole prompt), ``rows``
    ``[b]`` their indices in ``out``, ``limits`` ``[b]`` their ``max_new_tokens``."""

    index: int
    steps: object
    token: Tensor
    rows: Tensor
    limits: Tensor


OnStep = Callable[[int, int], None]      # (tokens decoded so far, the most any row may have)


def run_steps(choice: "Choice", rules: Rules, out: list[list[int]], groups: list[Resume],
              on_step: OnStep | None = None, ahead: "Lookahead | None" = None) -> int:
    """Greedy steps for every group, appending to ``out``; a group joins the running batch when that batch reaches
    its ``index`` (both then hold the same number of tokens, so their states stack). ``ahead``: where it finds a call
    worth making, it decodes several tokens in one (:mod:`pruning_core.modeling.inference.lookahead`). Returns the
    steps taken (one or more tokens each)."""
    groups = sorted(groups, key=lambda g: g.index)
    run, ran = None, 0
    bound = max((int(g.limits.max()) for g in groups if g.limits.numel()), default=0)
    while run is not None or groups:
        while groups and (run is None or groups[0].index == run.index):
            g = groups.pop(0)
            if run is None:
                run = g
            else:
                run.steps.join(g.steps)
                run.token, run.rows = torch.cat([run.token, g.token]), torch.cat([run.rows, g.rows])
                run.limits = torch.cat([run.limits, g.limits])
        nxt = None if ahead is None else ahead.step(run, choice, out, groups[0].index - run.index if groups else None)
        if nxt is None:
            hidden = run.steps.step(run.token)                                               # [b, d]
            nxt = choice.best(hidden, run.rows, first=run.index == 0)
            last = run.limits == run.index + 1                                               # [b]
            if rules.forced_eos is not None and bool(last.any()):
                nxt = torch.where(last.to(nxt.device), torch.full_like(nxt, rules.forced_eos), nxt)
            for r, t in zip(run.rows.tolist(), nxt.tolist()):
                out[r].append(t)
            run.index += 1
        else:
            last = run.limits == run.index           # a row at its bound ends (never after a call: it leaves a step)
        ran += 1
        if on_step is not None:
            on_step(run.index, bound)
        live = (nxt != rules.eos) & ~last.to(nxt.device)
        if not bool(live.any()):
            run = None
            continue
        if not bool(live.all()):                             # finished rows leave the batch
            keep = live.nonzero().squeeze(1)
            run.steps.keep(keep)
            run.rows, nxt, run.limits = run.rows[keep.cpu()], nxt[keep], run.limits[keep.cpu()]
        run.token = nxt
    return ran


class Choice:
    """Scores a decoder's hidden states as greedy decoding does: logits over the shortlist's union of ids (or the
    whole vocabulary), each row's own shortlist and the ``rules``' forbidden ids set to -inf."""

    def __init__(self, model, rules: Rules, allowed: "AllowedIds | None", like: Tensor) -> None:
        self.ids, self.blocked = (allowed.ids, ~allowed.row_mask) if allowed is not None else (None, None)
        self.project = projection(*_output_layer(model, self.ids), like)      # hidden [n, d] -> logits [n, V']
        self.never, self.first = _blocked_ids(rules, self.ids, _output_layer(model, None)[0].shape[0], like.device)

    def logits(self, hidden: Tensor, rows: Tensor, first: bool | Tensor) -> Tensor:
        """``[n, V']`` the masked logits of ``hidden`` ``[n, d]``, which belong to rows ``rows`` ``[n]`` of the
        batch; ``first``: whether (``[n]`` bool: where) they predict a row's first new token."""
        logits = self.project(hidden)
        if self.blocked is not None:
            logits.masked_fill_(self.blocked[rows.to(self.blocked.device)], float("-inf"))
        if self.never is not None:
            logits.masked_fill_(self.never, float("-inf"))
        if self.first is not None:
            if isinstance(first, Tensor):
                logits.masked_fill_(first.to(logits.device)[:, None] & self.first[None, :], float("-inf"))
            elif first:
                logits.masked_fill_(self.first, float("-inf"))
        return logits

    def best(self, hidden: Tensor, rows: Tensor, first: bool) -> Tensor:
        """``[n]`` the ids :meth:`logits` puts first (the lowest column among equals), found without building each
        row's shortlist mask where the best of the batch's ids is already one the row may produce: the same id,
        since that row's allowed ids are among the batch's."""
        if self.blocked is None:
            return self.tokens(self.logits(hidden, rows, first).argmax(-1))
        blocked, self.blocked = self.blocked, None
        try:
            logits = self.logits(hidden, rows, first)
        finally:
            self.blocked = blocked
        columns = logits.argmax(-1)
        on = rows.to(blocked.device)
        wrong = blocked[on, columns.to(blocked.device)]                                    # [n]
        if bool(wrong.any()):
            at = wrong.nonzero().squeeze(1)
            columns[at.to(logits.device)] = logits[at.to(logits.device)].masked_fill_(
                blocked[on[at]].to(logits.device), float("-inf")).argmax(-1)
        return self.tokens(columns)

    def best_two(self, hidden: Tensor, rows: Tensor, first: bool | Tensor) -> tuple[Tensor, Tensor]:
        """``[n]`` the ids :meth:`logits` puts first and ``[n]`` the gap to the second-best logit (float32, inf where
        one id is possible), both on the CPU: what a check of guessed tokens decides near-ties by."""
        logits = self.logits(hidden, rows, first)
        best = self.tokens(logits.argmax(-1)).cpu()
        if logits.shape[-1] < 2:
            return best, torch.full((logits.shape[0],), float("inf"))
        top = logits.topk(2, dim=-1).values.float().cpu()
        return best, torch.where(top[:, 1] == float("-inf"), float("inf"), top[:, 0] - top[:, 1])

    def tokens(self, columns: Tensor) -> Tensor:
        """Vocabulary ids of logit columns ``columns``."""
        return self.ids[columns] if self.ids is not None else columns


def _blocked_ids(rules: Rules, ids: Tensor | None, vocab: int, device) -> tuple[Tensor | None, Tensor | None]:
    """``[V']`` True where ``rules`` forbid an id at every step, and where at the first step (None: nowhere), over
    ``ids`` (a shortlist) or the whole vocabulary of ``vocab`` ids."""
    def where(forbidden: tuple[int, ...], below: int | None) -> Tensor | None:
        if not forbidden and below is None:
            return None
        mask = torch.zeros(vocab, dtype=torch.bool, device=device)
        mask[[i for i in forbidden if 0 <= i < vocab]] = True
        if below is not None:
            mask[below:] = True
        return mask if ids is None else mask[ids]

    never = where(rules.suppressed, rules.below)
    first = where(rules.first_suppressed, None)
    return never, first


class CachedSteps:
    """Decoder steps through the model's own decoder and transformers' key/value cache (any family
    :func:`supports_greedy` accepts): each step feeds the last token; the cache holds the self-attention's
    keys/values (an SSRU's state) and the cross-attention's, projected from the encoder output once."""

    def __init__(self, model, encoder_hidden: Tensor, encoder_mask: Tensor | None, cross=None) -> None:
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        self.decoder = model.get_decoder()
        self.enc, self.enc_mask = encoder_hidden, encoder_mask
        self.cache = EncoderDecoderCache(DynamicCache(config=model.config),
                                         cross if cross is not None else DynamicCache(config=model.config))

    def step(self, token: Tensor) -> Tensor:
        """``[b]`` each live row's last token (or ``[b, t]`` its first tokens) -> ``[b, d]`` the decoder's last
        hidden state."""
        return self.step_many(token if token.dim() == 2 else token.unsqueeze(1))[:, -1]

    def step_many(self, tokens: Tensor) -> Tensor:
        """``[b, t]`` the next ``t`` inputs of each row -> ``[b, t, d]`` the decoder's hidden state at each."""
        masked = {} if self.enc_mask is None else {"encoder_attention_mask": self.enc_mask}
        return self.decoder(input_ids=tokens, encoder_hidden_states=self.enc, past_key_values=self.cache,
                            use_cache=True, **masked).last_hidden_state

    def back(self, inputs: int) -> None:
        """Forget the last ``inputs`` decoder inputs (fed by :meth:`step_many`)."""
        if inputs > 0:
            for layer in self.cache.self_attention_cache.layers:
                if layer.is_initialized:
                    layer.crop(-inputs)

    def keep(self, rows: Tensor) -> None:
        """Only the live rows ``rows`` (indices into the current batch) go on."""
        self.cache.batch_select_indices(rows)
        self.enc = self.enc[rows]
        self.enc_mask = None if self.enc_mask is None else self.enc_mask[rows]

    @classmethod
    def resumed(cls, model, encoder_hidden: Tensor, encoder_mask: Tensor | None, filled, rows: Tensor,
                length: int) -> "CachedSteps":
        """Steps of rows ``rows`` after their first ``length`` decoder inputs, from ``filled`` (the
        ``EncoderDecoderCache`` a teacher-forced pass over the whole batch left): its self-attention entries cut to
        ``length``, its cross-attention entries reused. ``encoder_hidden``/``encoder_mask``: those rows' already."""
        steps = cls(model, encoder_hidden, encoder_mask,
                    _cache_of(model, [None if kv is None else (kv[0][rows], kv[1][rows])
                                      for kv in _pairs(filled.cross_attention_cache)]))
        if length > 0:
            for i, kv in enumerate(_pairs(filled.self_attention_cache)):
                if kv is not None:
                    steps.cache.self_attention_cache.update(kv[0][rows, :, :length], kv[1][rows, :, :length], i)
        return steps

    def join(self, other: "CachedSteps") -> None:
        """Append ``other``'s rows (holding as many decoder inputs as these) to the batch."""
        for mine, theirs in ((self.cache.self_attention_cache, other.cache.self_attention_cache),
                             (self.cache.cross_attention_cache, other.cache.cross_attention_cache)):
            for a, b in zip(mine.layers, theirs.layers):
                if a.is_initialized and b.is_initialized:
                    a.keys, a.values = torch.cat([a.keys, b.keys]), torch.cat([a.values, b.values])
        self.enc = torch.cat([self.enc, other.enc])
        self.enc_mask = None if self.enc_mask is None else torch.cat([self.enc_mask, other.enc_mask])


def _pairs(cache) -> list[tuple[Tensor, Tensor] | None]:
    """Per layer of a transformers ``DynamicCache`` its (keys, values), None where empty."""
    return [(layer.keys, layer.values) if layer.is_initialized and layer.keys.numel() else None
            for layer in cache.layers]


def _cache_of(model, pairs: list[tuple[Tensor, Tensor] | None]):
    """A ``DynamicCache`` holding ``pairs[i]`` as its layer i (left empty where None)."""
    from transformers.cache_utils import DynamicCache

    cache = DynamicCache(config=model.config)
    for i, kv in enumerate(pairs):
        if kv is not None:
            cache.update(kv[0], kv[1], i)
    return cache


def decoder_steps(model, encoder_hidden: Tensor, encoder_mask: Tensor | None, prompt_length: int = 1, cross=None):
    """The family's own lean steps where its adapter has them (the same operations without transformers'
    cache bookkeeping: :meth:`~pruning_core.modeling.architectures.ArchitectureAdapter.decoder_steps`; they feed one
    token at a time, so a longer prompt takes the model's decoder), else :class:`CachedSteps` (with ``cross``, the
    cross-attention keys and values already projected, if given)."""
    lean = adapter_for(model).decoder_steps(model, encoder_hidden, encoder_mask) if prompt_length == 1 else None
    return lean if lean is not None else CachedSteps(model, encoder_hidden, encoder_mask, cross)


def as_generate_output(model, rows: list[list[int]]) -> Tensor:
    """``[B, 1 + longest]`` what ``generate`` returns for these tokens: the decoder start token first, rows that
    stopped early padded with the pad id (so decoding the texts gives exactly what decoding its output gave)."""
    start, _ = _specials(model)
    pad = model.generation_config.pad_token_id
    pad = model.config.pad_token_id if pad is None else pad
    width = max(len(r) for r in rows) if rows else 0
    return torch.tensor([[start] + r + [pad] * (width - len(r)) for r in rows], dtype=torch.long)


def _output_layer(model, ids: Tensor | None) -> tuple[Tensor, Tensor]:
    """The output projection's weight ``[V, d]`` and bias ``[V]`` (float32), or only the rows ``ids``: the
    ``lm_head`` and ``final_logits_bias`` of Bart/Marian, else a bias-free output Linear (Whisper's ``proj_out``)."""
    found = output_layer(model)
    if found is None:
        head = model.get_output_embeddings()
        if not isinstance(head, torch.nn.Linear) or head.bias is not None:
            raise ValueError(f"{type(model).__name__} has neither lm_head + final_logits_bias nor a bias-free output "
                             "Linear: decode it with generate.")
        found = head.weight, torch.zeros(head.weight.shape[0], dtype=torch.float32, device=head.weight.device)
    weight, bias = found
    if ids is None:
        return weight, bias
    return weight.index_select(0, ids).contiguous(), bias.index_select(0, ids)


class AllowedIds:
    """Target ids each row of a batch may produce: ``ids`` ``[V']`` the batch's union (sorted), ``row_mask``
    ``[B, V']`` True where row b may produce ``ids[v]``."""

    def __init__(self, ids: Tensor, row_mask: Tensor) -> None:
        if row_mask.shape[-1] != ids.shape[0]:
            raise ValueError(f"row_mask has {row_mask.shape[-1]} columns for {ids.shape[0]} ids.")
        self.ids, self.row_mask = ids, row_mask
