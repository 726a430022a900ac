"""Greedy decoding of an encoder-decoder translation model, step by step: what a click on the head map waits for.

The same tokens as ``model.generate(num_beams=1, do_sample=False, max_new_tokens=N)`` for the Bart/Marian family
(``lm_head`` plus ``final_logits_bias``), with less work per click:

- the encoder's output can be passed in (the teacher-forced forward that gave the loss already computed it);
- each step feeds only the last token: the decoder's cache keeps each SSRU's state ``c_t`` (or a self-attention's
  keys/values) and each cross-attention layer's keys/values, projected from the encoder output once; a family
  whose adapter has lean steps (Marian-SSRU) runs them without transformers' cache bookkeeping;
- a row that produced ``</s>`` leaves the batch (its cache rows, its encoder rows), so later steps run on the rows
  still decoding.

Head masks apply as in any forward pass: the decoder's modules are called, and their hooks gate the heads.

``allowed``: a vocabulary shortlist (:mod:`pruning_core.modeling.shortlist`): per row, the target ids it may
produce; each step scores only the batch's union of them (``W[ids] h``, not the whole ``[vocab, d]`` matrix) and
every row picks among its own. That is an approximation of full decoding (Marian's and Bergamot's deployed one), not
the same tokens; without it the result is exact.
"""
from __future__ import annotations

import torch
from torch import Tensor

from pruning_core.modeling.architectures import adapter_for
from pruning_core.modeling.packed_logits import output_layer, projection

# generation settings that change greedy tokens beyond </s> and the forced </s> at the last step: a model whose
# generation config sets one of them decodes with ``generate`` (see :func:`supports_greedy`)
_OTHER_PROCESSORS = ("min_length", "min_new_tokens", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
                     "bad_words_ids", "forced_bos_token_id", "suppress_tokens", "begin_suppress_tokens",
                     "sequence_bias", "exponential_decay_length_penalty", "renormalize_logits")


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
    eos = gen.eos_token_id if gen.eos_token_id is not None else model.config.eos_token_id
    eos = eos[0] if isinstance(eos, (list, tuple)) else eos
    return int(start), int(eos)


def _forced_eos(model) -> int | None:
    forced = getattr(model.generation_config, "forced_eos_token_id", None)
    forced = forced[0] if isinstance(forced, (list, tuple)) else forced
    return None if forced is None else int(forced)


def greedy_decode(model, input_ids: Tensor, attention_mask: Tensor, *, max_new_tokens: int,
                  encoder_hidden: Tensor | None = None, allowed: "AllowedIds | None" = None) -> list[list[int]]:
    """Greedy tokens of every row, each ending with ``</s>`` unless ``max_new_tokens`` ran out first.

    Args:
        model: a model :func:`supports_greedy` accepts, in eval mode (call under ``torch.inference_mode()`` and
            the head mask, as any forward).
        input_ids, attention_mask: ``[B, S]`` source ids and 1 = token, 0 = padding.
        max_new_tokens: at most this many tokens per row; the last is ``</s>`` when the model forces it.
        encoder_hidden: ``[B, S, d]`` the encoder's output for these inputs under the same mask, if already computed.
        allowed: per row the target ids it may produce (a shortlist), or None for the whole vocabulary.
    Returns:
        per row, its tokens without the decoder start token.
    """
    start, eos = _specials(model)
    forced = _forced_eos(model)
    if encoder_hidden is None:
        encoder_hidden = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    steps = decoder_steps(model, encoder_hidden, attention_mask)
    n = input_ids.shape[0]
    out: list[list[int]] = [[] for _ in range(n)]
    rows = torch.arange(n)                                   # live row -> original row
    ids, blocked = (allowed.ids, ~allowed.row_mask) if allowed is not None else (None, None)
    project = projection(*_output_layer(model, ids), encoder_hidden)        # hidden [b, d] -> logits [b, V']
    token = torch.full((n,), start, dtype=torch.long, device=input_ids.device)
    for step in range(max_new_tokens):
        hidden = steps.step(token)                                                             # [b, d]
        if forced is not None and step == max_new_tokens - 1:
            nxt = torch.full((hidden.shape[0],), forced, dtype=torch.long, device=hidden.device)
        else:
            logits = project(hidden)                                                           # [b, V']
            if blocked is not None:
                logits.masked_fill_(blocked, float("-inf"))
            nxt = logits.argmax(-1)
            nxt = ids[nxt] if ids is not None else nxt
        for r, t in zip(rows.tolist(), nxt.tolist()):
            out[r].append(t)
        live = nxt != eos
        if not bool(live.any()):
            break
        if not bool(live.all()):                             # finished rows leave the batch
            keep = live.nonzero().squeeze(1)
            steps.keep(keep)
            rows, nxt = rows[keep.cpu()], nxt[keep]
            blocked = blocked[keep] if blocked is not None else None
        token = nxt
    return out


class CachedSteps:
    """Decoder steps through the model's own decoder and transformers' key/value cache (any family
    :func:`supports_greedy` accepts): each step feeds the last token; the cache holds the self-attention's
    keys/values (an SSRU's state) and the cross-attention's, projected from the encoder output once."""

    def __init__(self, model, encoder_hidden: Tensor, encoder_mask: Tensor) -> None:
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        self.decoder = model.get_decoder()
        self.enc, self.enc_mask = encoder_hidden, encoder_mask
        self.cache = EncoderDecoderCache(DynamicCache(config=model.config), DynamicCache(config=model.config))

    def step(self, token: Tensor) -> Tensor:
        """``[b]`` each live row's last token -> ``[b, d]`` the decoder's last hidden state."""
        return self.decoder(input_ids=token.unsqueeze(1), encoder_hidden_states=self.enc,
                            encoder_attention_mask=self.enc_mask, past_key_values=self.cache,
                            use_cache=True).last_hidden_state[:, -1]

    def keep(self, rows: Tensor) -> None:
        """Only the live rows ``rows`` (indices into the current batch) go on."""
        self.cache.batch_select_indices(rows)
        self.enc, self.enc_mask = self.enc[rows], self.enc_mask[rows]


def decoder_steps(model, encoder_hidden: Tensor, encoder_mask: Tensor):
    """The family's own lean steps where its adapter has them (the same operations without transformers'
    cache bookkeeping: :meth:`~pruning_core.modeling.architectures.ArchitectureAdapter.decoder_steps`), else
    :class:`CachedSteps`."""
    lean = adapter_for(model).decoder_steps(model, encoder_hidden, encoder_mask)
    return lean if lean is not None else CachedSteps(model, encoder_hidden, encoder_mask)


def as_generate_output(model, rows: list[list[int]]) -> Tensor:
    """``[B, 1 + longest]`` what ``generate`` returns for these tokens: the decoder start token first, rows that
    stopped early padded with the pad id (so decoding the texts gives exactly what decoding its output gave)."""
    start, _ = _specials(model)
    pad = model.generation_config.pad_token_id
    pad = model.config.pad_token_id if pad is None else pad
    width = max(len(r) for r in rows) if rows else 0
    return torch.tensor([[start] + r + [pad] * (width - len(r)) for r in rows], dtype=torch.long)


def _output_layer(model, ids: Tensor | None) -> tuple[Tensor, Tensor]:
    """The output projection's weight ``[V, d]`` and bias ``[V]`` (float32), or only the rows ``ids``."""
    weight, bias = output_layer(model)
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
