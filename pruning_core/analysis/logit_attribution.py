"""Direct logit attribution of one attention head of a decoder language model at one position.

Head ``h`` writes ``c_h = W_O[:, h] z_h`` into the residual stream (:func:`head_contributions`: the ``c_h`` and the
output projection's bias sum to the attention block's output). As in standard DLA, the final norm is linearised at
the full residual (its statistics frozen and applied to ``c_h`` alone, its bias left out) and the head's direct
logits are the unembedding of that: the tokens it promotes are the largest. The norm's form is checked against the
module itself, so a norm of another form raises. Removing the head is our own masking
(:func:`pruning_core.modeling.masking.apply_mask`); hooks are scoped to one call and the model is not modified.
:func:`attribute_at_answer` first decodes greedily past the prompt to the token where the answer starts (a model
often writes ":" or a space first), and attributes there. The formulas: docs/METHODS.md, "Direct logit attribution".
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import string
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import torch
from torch import nn

from pruning_core.core.errors import FormatError, UnsupportedArchitectureError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.architectures import adapter_for
from pruning_core.modeling.masking import apply_mask

KIND = "decoder_self"
TOP = 10
CONVENTION = ("final norm linearised at the full residual (its statistics from the residual, applied to the head's "
              "output; its bias and the unembedding's left out)")


@dataclass(frozen=True)
class TokenValue:
    """One vocabulary entry and a value: a direct logit, or a probability."""

    token_id: int
    token: str
    value: float


@dataclass(frozen=True)
class HeadAttribution:
    """What head ``(layer, head)`` writes towards the logits at ``position`` of an input of ``n_tokens`` tokens.

    promoted: the largest direct logits of the head (:data:`CONVENTION`); before / after: the model's most
    probable next tokens with all heads and with this head removed; target: an answer token's direct logit
    and its probability before and after (None when no target was given); answer_step: from
    :func:`attribute_at_answer`, ``{"prompt_tokens", "continuation", "found"}`` (the greedy text between the
    prompt and the answer, and whether the answer was reached), else None.
    """

    layer: int
    head: int
    position: int
    n_tokens: int
    promoted: tuple[TokenValue, ...]
    before: tuple[TokenValue, ...]
    after: tuple[TokenValue, ...]
    target: dict | None = None
    convention: str = CONVENTION
    answer_step: dict | None = None


def _site(loaded, layer: int, head: int):
    sites = [s for s in loaded.sites if s.kind == KIND]
    if not sites:
        raise UnsupportedArchitectureError(f"Model {loaded.model_id!r} has no decoder self-attention: direct logit "
                                           "attribution is for decoder language models.")
    if not 0 <= layer < len(sites) or not 0 <= head < sites[layer].num_heads:
        raise FormatError(f"Head ({layer}, {head}) is not in model {loaded.model_id!r}: it has {len(sites)} layers "
                          f"of {sites[0].num_heads} heads (zero-based).")
    return sites[layer]


def _out_weight(out: nn.Module) -> torch.Tensor:
    """``[hidden, heads * head_dim]`` of an output projection (``nn.Linear``, or GPT-2's ``Conv1D``)."""
    return out.weight.T if type(out).__name__ == "Conv1D" else out.weight


# the attributions being recorded in this thread
_ASKING: ContextVar[frozenset] = ContextVar("headprune_logit_attribution", default=frozenset())


@contextlib.contextmanager
def _captured(loaded, site, position: int):
    """Record the input and output of ``site.out`` and the final norm's input at ``position`` during the block."""
    norm = adapter_for(loaded.model).final_norm(loaded.model)
    if norm is None:
        raise UnsupportedArchitectureError(f"Model {loaded.model_id!r} ({type(loaded.model).__name__}) does not say "
                                           "which norm precedes its logits; direct logit attribution needs a causal LM "
                                           "of the llama, qwen2, mistral, gemma or gpt2 families.")
    seen: dict[str, torch.Tensor] = {}
    token = object()                  # the hooks record this thread's pass only (others may run the shared model)

    def on_out(module, args, output):
        if token in _ASKING.get():
            seen["z"] = args[0][0, position].detach()                  # [heads * head_dim]
            seen["attn_out"] = output[0, position].detach()            # [hidden]

    def on_norm(module, args):
        if token in _ASKING.get():
            seen["residual"] = args[0][0, position].detach()           # [hidden]

    handles = [site.out.register_forward_hook(on_out), norm.register_forward_pre_hook(on_norm)]
    reset = _ASKING.set(_ASKING.get() | {token})
    try:
        yield seen, norm
    finally:
        _ASKING.reset(reset)
        for h in handles:
            h.remove()


def _logits_at(model: nn.Module, input_ids: torch.Tensor, position: int) -> torch.Tensor:
    """``[vocab]``: the logits at ``position`` (>= 0) of one forward pass, computing no later position's where the
    model allows (``logits_to_keep``: a 1k-token prompt's logits over a 49k vocabulary are 200 MB)."""
    keep = input_ids.shape[1] - position
    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        return model(input_ids=input_ids, use_cache=False, logits_to_keep=keep).logits[0, 0]
    return model(input_ids=input_ids, use_cache=False).logits[0, position]


def head_contributions(loaded, input_ids: torch.Tensor, layer: int, position: int = -1) -> dict[str, torch.Tensor]:
    """One forward pass of ``input_ids`` ``[1, T]``; at ``position``: ``contributions`` ``[heads, hidden]`` (each
    head's ``W_O[:, h] z_h``), ``bias`` ``[hidden]`` (``o_proj``'s, zeros when it has none), ``attn_out``
    ``[hidden]`` (the block's output), ``residual`` ``[hidden]`` (the final norm's input) and ``logits`` ``[vocab]``."""
    site = _site(loaded, layer, 0)
    position = position % input_ids.shape[1]
    with _captured(loaded, site, position) as (seen, _), torch.inference_mode():
        logits = _logits_at(loaded.model, input_ids.to(loaded.device), position)
    weight = _out_weight(site.out).detach()                          # [hidden, H * d]
    z = seen["z"].view(site.num_heads, site.head_dim)                # [H, d]
    per_head = torch.einsum("hd,ohd->ho", z, weight.view(weight.shape[0], site.num_heads, site.head_dim))
    bias = site.out.bias.detach() if getattr(site.out, "bias", None) is not None else torch.zeros_like(seen["attn_out"])
    return {"contributions": per_head, "bias": bias, "attn_out": seen["attn_out"], "residual": seen["residual"],
            "logits": logits}


def linearised_norm(norm: nn.Module, residual: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """``vectors`` ``[N, hidden]`` through ``norm`` with the statistics of ``residual`` ``[hidden]`` (bias left
    out). Raises :class:`UnsupportedArchitectureError` unless the module is RMSNorm (gain ``w`` or Gemma's ``1 + w``)
    or LayerNorm, checked by rebuilding its output on ``residual``."""
    x = residual.float()
    eps = float(getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6)))
    weight = norm.weight.detach().float()
    with torch.inference_mode():
        actual = norm(residual[None])[0].float()
    if isinstance(norm, nn.LayerNorm):
        scale = torch.rsqrt(x.var(unbiased=False) + eps)
        bias = norm.bias.detach().float() if norm.bias is not None else 0.0
        if torch.allclose(weight * (x - x.mean()) * scale + bias, actual, rtol=1e-3, atol=1e-4):
            return weight * (vectors.float() - vectors.float().mean(-1, keepdim=True)) * scale
    else:
        scale = torch.rsqrt(x.pow(2).mean() + eps)
        for gain in (weight, 1.0 + weight):                       # RMSNorm; Gemma's (1 + w)
            if torch.allclose(gain * x * scale, actual, rtol=1e-3, atol=1e-4):
                return gain * vectors.float() * scale
    raise UnsupportedArchitectureError(f"The final norm {type(norm).__name__} is neither RMSNorm nor LayerNorm: "
                                       "direct logit attribution cannot linearise it.")


def _top(values: torch.Tensor, tokenizer, k: int) -> tuple[TokenValue, ...]:
    found = torch.topk(values.float(), min(k, values.shape[-1]))
    return tuple(TokenValue(int(i), tokenizer.decode([int(i)]), float(v)) for v, i in zip(found.values, found.indices))


def attribute_head(loaded, input_ids: torch.Tensor, layer: int, head: int, *, position: int = -1,
                   target: int | None = None, top: int = TOP) -> HeadAttribution:
    """Direct logit attribution of head ``(layer, head)`` at ``position`` of ``input_ids`` ``[1, T]`` (the last
    token: the next-token prediction), with the model's top next tokens before and after removing the head.
    ``target``: a token id (an answer's first token) whose direct logit and probabilities are reported too."""
    site = _site(loaded, layer, head)
    position = position % input_ids.shape[1]
    found = head_contributions(loaded, input_ids, layer, position)
    norm = adapter_for(loaded.model).final_norm(loaded.model)
    unembed = adapter_for(loaded.model).logits_layer(loaded.model)
    if unembed is None:
        raise UnsupportedArchitectureError(f"Model {loaded.model_id!r} does not say which layer gives its logits.")
    direct = linearised_norm(norm, found["residual"], found["contributions"][head][None])[0] \
        @ unembed.weight.detach().float().T                                                  # [vocab]
    removed = HeadMask.full(loaded.layout).toggled(KIND, layer, head)
    with apply_mask(loaded, removed), torch.inference_mode():
        masked = _logits_at(loaded.model, input_ids.to(loaded.device), position)
    p_before, p_after = found["logits"].float().softmax(-1), masked.float().softmax(-1)
    tok = loaded.tokenizer
    answer = None if target is None else {
        "token_id": int(target), "token": tok.decode([int(target)]), "direct_logit": float(direct[target]),
        "direct_rank": int((direct > direct[target]).sum()), "p_before": float(p_before[target]),
        "p_after": float(p_after[target])}
    return HeadAttribution(layer, head, position, int(input_ids.shape[1]), _top(direct, tok, top),
                           _top(p_before, tok, top), _top(p_after, tok, top), answer)


# the characters a model may write between an answer prefix and the answer itself (": ", a space, a quote)
_LEAD = string.whitespace + string.punctuation


@dataclass(frozen=True)
class AnswerStep:
    """Where a greedy continuation of a prompt starts its answer.

    input_ids: ``[1, T + j]``, the prompt and the ``j`` greedy tokens before the answer (the last position predicts
    the answer); target: the greedy token there, which starts the answer; continuation: those ``j`` tokens as
    text; found: False when no answer starts within the tokens decoded (then ``j = 0`` and ``target`` is the
    fallback token).
    """

    input_ids: torch.Tensor
    target: int
    continuation: str
    found: bool


def answer_step(loaded, prompt_ids: torch.Tensor, answers: Sequence[str], fallback: int, *,
                max_new: int = 16) -> AnswerStep:
    """Decode ``prompt_ids`` ``[1, T]`` greedily (up to ``max_new`` tokens, one cache) and find the first generated
    token ``j`` from which the text, leading spaces and punctuation stripped, starts with one of ``answers``; a token
    that is only spaces or punctuation is never that token (the next one carries the answer)."""
    tok = loaded.tokenizer
    ids = prompt_ids.to(loaded.device)
    generated: list[int] = []
    eos = getattr(tok, "eos_token_id", None)
    with torch.inference_mode():
        out = loaded.model(input_ids=ids, use_cache=True, logits_to_keep=1) \
            if "logits_to_keep" in inspect.signature(loaded.model.forward).parameters \
            else loaded.model(input_ids=ids, use_cache=True)
        cache = out.past_key_values
        for _ in range(max_new):
            nxt = int(out.logits[0, -1].argmax())
            if nxt == eos:
                break
            generated.append(nxt)
            out = loaded.model(input_ids=torch.tensor([[nxt]], device=ids.device), past_key_values=cache,
                               use_cache=True)
    for j in range(len(generated)):
        if not tok.decode(generated[j:j + 1], skip_special_tokens=True).strip(_LEAD):
            continue            # a bare space or punctuation before the answer (Qwen's " " before digits)
        rest = tok.decode(generated[j:], skip_special_tokens=True).lstrip(_LEAD)
        if rest and any(rest.startswith(a) or a.startswith(rest) for a in answers if a):
            before = torch.tensor([generated[:j]], dtype=prompt_ids.dtype)
            return AnswerStep(torch.cat([prompt_ids.cpu(), before], dim=1), generated[j],
                              tok.decode(generated[:j], skip_special_tokens=True), True)
    return AnswerStep(prompt_ids.cpu(), int(fallback), tok.decode(generated, skip_special_tokens=True), False)


def attribute_at_answer(loaded, prompt_ids: torch.Tensor, layer: int, head: int, answers: Sequence[str],
                        fallback: int, *, max_new: int = 16, top: int = TOP) -> HeadAttribution:
    """:func:`attribute_head` at the position that predicts the answer's first token (:func:`answer_step`), with
    that token as the target; at the prompt's last position with ``fallback`` when the greedy continuation holds
    no answer within ``max_new`` tokens."""
    step = answer_step(loaded, prompt_ids, answers, fallback, max_new=max_new)
    result = attribute_head(loaded, step.input_ids, layer, head, target=step.target, top=top)
    return dataclasses.replace(result, answer_step={"prompt_tokens": int(prompt_ids.shape[1]),
                                                    "continuation": step.continuation, "found": step.found})
