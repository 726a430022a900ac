"""Marian transformers whose decoder self-attention is an SSRU (Bergamot's student models), and their adapter.

``MarianMTModel`` with each decoder layer's ``self_attn`` an :class:`SSRU` (Kim et al. 2019), a gated
recurrence ``c_t = f_t * c_{t-1} + (1 - f_t) * (x_t W)``, ``f_t = sigmoid(x_t W_f + b_f)``, output
``ReLU(c_t)``, then the residual sum and ``self_attn_layer_norm``. Importing this module registers the
``"marian-ssru"`` config and model with transformers' Auto classes (no remote code is ever run). In the
key/value cache each SSRU keeps its state ``c_t`` in its layer's self-attention slot, so the cache still
counts the decoded tokens and beam search reorders the states. The adapter has the kinds ``encoder_self``
and ``cross`` only: this decoder has no self-attention heads.
"""
from __future__ import annotations

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForSeq2SeqLM, MarianConfig, MarianMTModel

from pruning_core.modeling.architectures.base import AttentionSite, FlopDims, register
from pruning_core.modeling.architectures.seq2seq import Seq2SeqAdapter, _site

MODEL_TYPE = "marian-ssru"
NO_DECODER_SELF = "this model's decoder has no self-attention (SSRU)"


class MarianSSRUConfig(MarianConfig):
    """``MarianConfig`` for a decoder whose self-attention is an SSRU (``decoder_attention_heads`` = cross heads)."""

    model_type = MODEL_TYPE


class SSRU(nn.Module):
    """Simpler Simple Recurrent Unit: the state ``c_t`` of a gated running average of ``x_t W``.

    ``input_proj``: ``W`` (no bias); ``forget_proj``: ``W_f`` and ``b_f``. Called as a decoder layer calls
    its self-attention: ``(hidden_states [B, T, d], past_key_values=..., ...)`` -> ``(ReLU(c) [B, T, d], None)``.
    """

    def __init__(self, d_model: int, layer_idx: int) -> None:
        super().__init__()
        self.input_proj = nn.Linear(d_model, d_model, bias=False)
        self.forget_proj = nn.Linear(d_model, d_model)
        self.layer_idx = layer_idx

    def forward(self, hidden_states: torch.Tensor, past_key_values=None, **kwargs) -> tuple[torch.Tensor, None]:
        forget = torch.sigmoid(self.forget_proj(hidden_states))          # [B, T, d]
        update = (1 - forget) * self.input_proj(hidden_states)           # [B, T, d]
        cache = getattr(past_key_values, "self_attention_cache", past_key_values)
        state = self._last_state(cache, hidden_states)                   # [B, d]
        if torch.onnx.is_in_onnx_export():
            c = _scan_closed_form(forget, update, state)
        else:
            states = []
            for t in range(hidden_states.shape[1]):
                state = forget[:, t] * state + update[:, t]
                states.append(state)
            c = torch.stack(states, dim=1)                               # [B, T, d]
        if cache is not None:
            kv = c.unsqueeze(1)                                          # [B, 1, T, d]: one "head", T tokens
            cache.update(kv, kv, self.layer_idx)
        return torch.relu(c), None

    def _last_state(self, cache, hidden_states: torch.Tensor) -> torch.Tensor:
        """``c_{t-1}`` of the last cached step ``[B, d]``, or zeros before the first."""
        if cache is None or cache.get_seq_length(self.layer_idx) == 0:
            return hidden_states.new_zeros(hidden_states.shape[0], hidden_states.shape[-1])
        return cache.layers[self.layer_idx].keys[:, 0, -1]


def _scan_closed_form(forget: torch.Tensor, update: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """The recurrence without a loop over time (an exported graph must not fix the length):
    ``c_t = sum_{s<=t} exp(A_t - A_s) u_s + exp(A_t) c_0`` with ``A_t = sum_{r<=t} log f_r``; every exponent is
    <= 0, so nothing overflows. Memory ``[B, T, T, d]``: only for export, the loop is used otherwise."""
    log_f = torch.log(forget.clamp_min(1e-30))                           # [B, T, d]
    a = torch.cumsum(log_f, dim=1)                                       # [B, T, d]
    t = forget.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool, device=forget.device).tril()          # [t, s]: s <= t
    gaps = (a.unsqueeze(2) - a.unsqueeze(1)).masked_fill(~causal[None, :, :, None], float("-inf"))  # [B, t, s, d]
    return (gaps.exp() * update.unsqueeze(1)).sum(2) + a.exp() * state.unsqueeze(1)


class MarianSSRUMTModel(MarianMTModel):
    """``MarianMTModel`` with an :class:`SSRU` as each decoder layer's ``self_attn``."""

    config_class = MarianSSRUConfig

    def __init__(self, config: MarianSSRUConfig) -> None:
        super().__init__(config)
        for i, layer in enumerate(self.model.decoder.layers):
            layer.self_attn = SSRU(config.d_model, i)
        self.post_init()


class SSRUDecoderSteps:
    """Greedy steps of a :class:`MarianSSRUMTModel` decoder without transformers' cache: per layer the SSRU state
    ``c_t`` ``[b, d]`` and the cross-attention's keys (stored transposed) and values, projected once.

    The same modules and operations, in the same order, as the decoder's forward with a cache (eager attention,
    every layer's cross-attention a ``MarianAttention``): the same tokens (``tests/modeling/test_greedy.py``),
    with a fraction of the per-step bookkeeping. Head gates apply through the output projections' hooks.
    """

    def __init__(self, model: MarianMTModel, encoder_hidden: torch.Tensor, encoder_mask: torch.Tensor) -> None:
        self.decoder = decoder = model.get_decoder()
        b, s, d = encoder_hidden.shape
        blocked = encoder_mask[:, None, None, :] == 0                                     # [B, 1, 1, S]
        self.mask_bias = torch.zeros(blocked.shape, dtype=encoder_hidden.dtype, device=encoder_hidden.device) \
            .masked_fill(blocked, torch.finfo(encoder_hidden.dtype).min)
        self.keys_t, self.values = [], []
        for layer in decoder.layers:
            attn = layer.encoder_attn
            shape = (b, s, -1, attn.head_dim)
            self.keys_t.append(attn.k_proj(encoder_hidden).view(shape).permute(0, 2, 3, 1).contiguous())  # [B,H,hd,S]
            self.values.append(attn.v_proj(encoder_hidden).view(shape).transpose(1, 2))                    # [B,H,S,hd]
        self.states = [encoder_hidden.new_zeros(b, d) for _ in decoder.layers]
        self.position = 0

    @staticmethod
    def applies(model: nn.Module) -> bool:
        """Whether these steps reproduce ``model``'s decoder: eager attention, no layer's cross-attention pruned
        away (an :class:`~pruning_core.modeling.architectures.slicing.EmptyAttention` keeps the model's decoder)."""
        from transformers.models.marian.modeling_marian import MarianAttention

        layers = model.get_decoder().layers
        return (model.config._attn_implementation == "eager" and not model.training
                and all(isinstance(layer.self_attn, SSRU) and type(layer.encoder_attn) is MarianAttention
                        for layer in layers))

    def step(self, token: torch.Tensor) -> torch.Tensor:
        """``[b]`` each live row's last token -> ``[b, d]`` the decoder's output for it."""
        dec = self.decoder
        x = dec.embed_tokens(token) * dec.embed_scale + dec.embed_positions.weight[self.position]     # [b, d]
        self.position += 1
        for i, layer in enumerate(dec.layers):
            ssru = layer.self_attn
            forget = torch.sigmoid(ssru.forget_proj(x))
            self.states[i] = forget * self.states[i] + (1 - forget) * ssru.input_proj(x)
            x = layer.self_attn_layer_norm(x + torch.relu(self.states[i]))
            attn = layer.encoder_attn
            query = attn.q_proj(x).view(x.shape[0], 1, -1, attn.head_dim).transpose(1, 2)             # [b, H, 1, hd]
            weights = torch.softmax(torch.matmul(query, self.keys_t[i]) * attn.scaling + self.mask_bias, dim=-1)
            heads = torch.matmul(weights, self.values[i]).transpose(1, 2).reshape(x.shape[0], 1, -1)  # [b, 1, H*hd]
            x = layer.encoder_attn_layer_norm(x + attn.out_proj(heads)[:, 0])
            x = layer.final_layer_norm(x + layer.fc2(layer.activation_fn(layer.fc1(x))))
        return x

    def step_many(self, tokens: torch.Tensor) -> torch.Tensor:
        """``[b, t]`` each row's next ``t`` inputs -> ``[b, t, d]`` the decoder's output at each (the operations of
        :meth:`step`, over ``t`` positions at once); :meth:`back` can then forget the last few."""
        dec, (b, t) = self.decoder, tokens.shape
        x = dec.embed_tokens(tokens) * dec.embed_scale + dec.embed_positions.weight[self.position:self.position + t]
        self.position += t
        self._fed = (t, list(self.states), [])                  # states before, per layer every state after
        for i, layer in enumerate(dec.layers):
            ssru = layer.self_attn
            forget = torch.sigmoid(ssru.forget_proj(x))                                                   # [b, t, d]
            update = (1 - forget) * ssru.input_proj(x)
            states, state = [], self.states[i]
            for j in range(t):
                state = forget[:, j] * state + update[:, j]
                states.append(state)
            self.states[i] = state
            self._fed[2].append(torch.stack(states, dim=1))
            x = layer.self_attn_layer_norm(x + torch.relu(self._fed[2][-1]))
            attn = layer.encoder_attn
            query = attn.q_proj(x).view(b, t, -1, attn.head_dim).transpose(1, 2)                        # [b, H, t, hd]
            weights = torch.softmax(torch.matmul(query, self.keys_t[i]) * attn.scaling + self.mask_bias, dim=-1)
            heads = torch.matmul(weights, self.values[i]).transpose(1, 2).reshape(b, t, -1)              # [b, t, H*hd]
            x = layer.encoder_attn_layer_norm(x + attn.out_proj(heads))
            x = layer.final_layer_norm(x + layer.fc2(layer.activation_fn(layer.fc1(x))))
        return x

    def back(self, inputs: int) -> None:
        """Forget the last ``inputs`` of those :meth:`step_many` fed."""
        if inputs <= 0:
            return
        t, before, after = self._fed
        self.states = list(before) if inputs >= t else [c[:, t - 1 - inputs] for c in after]
        self.position -= min(inputs, t)

    def keep(self, rows: torch.Tensor) -> None:
        """Only the live rows ``rows`` go on."""
        self.keys_t = [k[rows] for k in self.keys_t]
        self.values = [v[rows] for v in self.values]
        self.states = [c[rows] for c in self.states]
        self.mask_bias = self.mask_bias[rows]

    def resume(self, filled, rows: torch.Tensor, length: int) -> None:
        """Go on after the first ``length`` decoder inputs of rows ``rows`` of a teacher-forced pass through the
        model's decoder, whose cache ``filled`` holds each SSRU's states (an ``EncoderDecoderCache``)."""
        if length > 0:
            self.states = [layer.keys[rows, 0, length - 1] for layer in filled.self_attention_cache.layers]
        self.position = length

    def join(self, other: "SSRUDecoderSteps") -> None:
        """Append ``other``'s rows (at the same position) to the batch."""
        self.keys_t = [torch.cat(p) for p in zip(self.keys_t, other.keys_t)]
        self.values = [torch.cat(p) for p in zip(self.values, other.values)]
        self.states = [torch.cat(p) for p in zip(self.states, other.states)]
        self.mask_bias = torch.cat([self.mask_bias, other.mask_bias])


AutoConfig.register(MODEL_TYPE, MarianSSRUConfig)
AutoModelForSeq2SeqLM.register(MarianSSRUConfig, MarianSSRUMTModel)


class MarianSSRUAdapter(Seq2SeqAdapter):
    """Encoder self-attention and cross-attention heads; the decoder's SSRU has none."""

    name = "marian-ssru"
    model_types = (MODEL_TYPE,)
    attention_outputs = {"encoder_self": "encoder_attentions", "cross": "cross_attentions"}
    absent_kinds = {"decoder_self": "its decoder runs an SSRU, a simple recurrent unit, instead of self-attention"}

    def find_sites(self, model: nn.Module) -> list[AttentionSite]:
        base = model.model
        sites = [_site("encoder_self", i, layer, "self_attn") for i, layer in enumerate(base.encoder.layers)]
        return sites + [_site("cross", i, layer, "encoder_attn") for i, layer in enumerate(base.decoder.layers)]

    def decoder_steps(self, model: nn.Module, encoder_hidden: torch.Tensor, encoder_mask: torch.Tensor):
        """:class:`SSRUDecoderSteps` where they reproduce the model's decoder, else None (its decoder)."""
        return SSRUDecoderSteps(model, encoder_hidden, encoder_mask) if SSRUDecoderSteps.applies(model) else None

    def flop_dims(self, config) -> FlopDims:
        dims = super().flop_dims(config)
        return FlopDims(hidden=dims.hidden, stacks=dims.stacks,
                        kind_stack={k: v for k, v in dims.kind_stack.items() if k != "decoder_self"},
                        is_encoder_decoder=True, head_kind=dims.head_kind, head_size=dims.head_size,
                        output_stack=dims.output_stack)


register(MarianSSRUAdapter())

__all__ = ["MODEL_TYPE", "NO_DECODER_SELF", "MarianSSRUAdapter", "MarianSSRUConfig", "MarianSSRUMTModel", "SSRU",
           "SSRUDecoderSteps"]
