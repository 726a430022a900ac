"""GGUF export (llama.cpp's format) of a Llama-family model, pruned or not, with its BPE tokenizer.

GGUF holds one head count per model, so the pruned shape must be a stock one
(:func:`pruning_core.modeling.pruning.stock_shape`; ``headprune mask --uniform``); other shapes are refused
with the ONNX export as the way out. Names and metadata follow the ``gguf`` package's ``TensorNameMap``;
``head_dim`` is written explicitly (a pruned model's ``hidden_size / heads`` is no longer its head size).
Llama's ``q_proj`` / ``k_proj`` rows are permuted within each head (:func:`permute_qk`: llama.cpp rotates
interleaved pairs, transformers the two halves); Qwen2 needs none; Mistral is written as ``llama`` and
refused with a sliding window shorter than its context. Weights float32 or float16 (1-D tensors float32);
the byte-level BPE tokenizer as ``gpt2`` tokens and merges, special tokens as control tokens.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pruning_core.core.errors import HeadpruneError
from pruning_core.core.io.storage import atomic_path

# config.model_type -> (GGUF architecture, whether q/k rows are permuted for llama.cpp's rotary layout)
GGUF_ARCHS = {"llama": ("llama", True), "mistral": ("llama", True), "qwen2": ("qwen2", False)}

__all__ = ["GGUF_ARCHS", "GgufExport", "export_gguf", "permute_qk"]


@dataclass(frozen=True)
class GgufExport:
    path: Path
    arch: str              # the GGUF architecture written
    tensors: int
    vocab_size: int
    seconds: float


def permute_qk(weight: np.ndarray, heads: int) -> np.ndarray:
    """Rows of a q or k projection (``[heads * head_dim, ...]``) from transformers' half-split rotary layout
    to llama.cpp's interleaved one: within each head, rows ``(0, d/2, 1, d/2+1, ...)``. The inverse of
    transformers' ``LlamaTensorProcessor._reverse_permute_weights``."""
    return (weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def _rope_theta(config) -> float:
    params = getattr(config, "rope_parameters", None) or {}
    kind = params.get("rope_type", "default")
    if kind != "default":
        raise HeadpruneError(f"GGUF export writes plain rotary embeddings; this model uses rope_type {kind!r}. "
                             "Use `headprune export --format onnx` instead.")
    return float(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def export_gguf(loaded, out: str | Path, *, dtype: str = "float32") -> GgufExport:
    """Write ``loaded`` (a Llama-family model, pruned to a stock shape or not) and its tokenizer as GGUF."""
    import gguf

    from pruning_core.modeling.pruning import stock_shape
    started = time.perf_counter()
    model, config = loaded.model, loaded.model.config
    if config.model_type not in GGUF_ARCHS:
        raise HeadpruneError(f"GGUF export covers {', '.join(GGUF_ARCHS)} models; {loaded.model_id!r} is "
                             f"{config.model_type}. Use `headprune export --format onnx` instead.")
    if dtype not in ("float32", "float16"):
        raise HeadpruneError(f"GGUF export writes float32 or float16 weights; got {dtype!r}.")
    shape = stock_shape(model)
    if shape.reason:
        raise HeadpruneError(f"GGUF has one head count for every layer, and this model's shape has none: "
                             f"{shape.reason}. Prune with a uniform mask (`headprune mask SCORES --uniform --remove F`), "
                             "or use `headprune export --format onnx`.")
    window = getattr(config, "sliding_window", None)
    sliding = "sliding_attention" in (getattr(config, "layer_types", None) or []) or (
        window and getattr(config, "layer_types", None) is None and window < int(config.max_position_embeddings))
    if sliding:
        raise HeadpruneError(f"{loaded.model_id!r} attends within a sliding window of {window} tokens, which GGUF's "
                             f"{GGUF_ARCHS[config.model_type][0]} architecture does not hold (llama.cpp would attend to "
                             "every token). Use `headprune export --format onnx` instead.")
    arch, permute = GGUF_ARCHS[config.model_type]
    sites = loaded.sites
    heads, kv_heads, head_dim = sites[0].num_heads, sites[0].num_kv_heads, sites[0].head_dim
    n_layers = int(config.num_hidden_layers)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], n_layers)
    state = {k: v.detach().to(torch.float32).cpu().numpy() for k, v in model.state_dict().items()}
    tied = bool(getattr(config, "tie_word_embeddings", False))
    with atomic_path(out) as tmp:
        writer = gguf.GGUFWriter(str(tmp), arch)
        title = str(getattr(config, "_name_or_path", "") or loaded.model_id)
        writer.add_name(title)
        writer.add_context_length(int(config.max_position_embeddings))
        writer.add_embedding_length(int(config.hidden_size))
        writer.add_block_count(n_layers)
        writer.add_feed_forward_length(int(config.intermediate_size))
        writer.add_head_count(heads)
        writer.add_head_count_kv(kv_heads)
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
        writer.add_rope_dimension_count(head_dim)
        writer.add_rope_freq_base(_rope_theta(config))
        writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))
        writer.add_vocab_size(int(config.vocab_size))
        writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if dtype == "float16" else gguf.LlamaFileType.ALL_F32)
        vocab = _add_tokenizer(writer, loaded.tokenizer, int(config.vocab_size), config)
        count = 0
        for name, array in state.items():
            if tied and name == "lm_head.weight":
                continue                                   # llama.cpp reuses token_embd when output is absent
            target = names.get_name(name, try_suffixes=(".weight", ".bias"))
            if target is None:
                if name.endswith("rotary_emb.inv_freq"):
                    continue
                raise HeadpruneError(f"GGUF export has no name for tensor {name!r} of {loaded.model_id!r}; "
                                     "use `headprune export --format onnx` instead.")
            if permute and name.endswith(("q_proj.weight", "q_proj.bias")):
                array = permute_qk(array, heads)
            elif permute and name.endswith(("k_proj.weight", "k_proj.bias")):
                array = permute_qk(array, kv_heads)
            if dtype == "float16" and array.ndim >= 2:
                array = array.astype(np.float16)
            writer.add_tensor(target, np.ascontiguousarray(array))
            count += 1
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return GgufExport(Path(out), arch, count, vocab, time.perf_counter() - started)


def _add_tokenizer(writer, tokenizer, vocab_size: int, config) -> int:
    """Tokens, merges, token types and special ids of a byte-level BPE ``tokenizer.json``; the vocabulary
    is padded to the model's ``vocab_size`` with unused tokens. Returns the number of tokens written."""
    import gguf
    backend = getattr(tokenizer, "backend_tokenizer", None)
    spec = json.loads(backend.to_str()) if backend is not None else {}
    model = spec.get("model") or {}
    if model.get("type") != "BPE":
        raise HeadpruneError(f"GGUF export carries a BPE tokenizer (tokenizer.json); this model's is "
                             f"{model.get('type') or type(tokenizer).__name__}. Use `headprune export --format onnx`.")
    by_id = {i: t for t, i in model["vocab"].items()}
    added = {int(a["id"]): a for a in spec.get("added_tokens") or []}
    by_id.update({i: a["content"] for i, a in added.items()})
    size = max(vocab_size, max(by_id) + 1)
    tokens, types = [], []
    for i in range(size):
        if i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if added.get(i, {}).get("special") else gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    for attr, add in (("bos_token_id", writer.add_bos_token_id), ("eos_token_id", writer.add_eos_token_id),
                      ("pad_token_id", writer.add_pad_token_id)):
        value = getattr(tokenizer, attr, None)
        value = getattr(config, attr, None) if value is None else value
        if isinstance(value, int):
            add(value)
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, str):
        writer.add_chat_template(template)
    return size
