"""A byte-level tokenizer (every text encodes, no download) and tiny grouped-query decoders with room for
long contexts, for the long-context task, KV-policy and CLI tests."""
from __future__ import annotations

from pathlib import Path

import torch

from pruning_core.modeling.architectures import adapter_for, find_sites, layout_of
from pruning_core.modeling.sources.loading import LoadedModel, weights_hash_of_module
from pruning_core.tasks.data.wordlists import Words

SPECIALS = ["<pad>", "<s>", "</s>"]
_SYLLABLES = ("ba", "ko", "mi", "tu", "re", "sa", "no", "li", "pe", "go")
# made-up word lists of the wonderwords shape (the real ones need a download): 1000 nouns, 100 adjectives, 100 verbs
WORDS = Words(nouns=tuple(a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES),
              adjectives=tuple(a + b + "y" for a in _SYLLABLES for b in _SYLLABLES),
              verbs=tuple(a + b + "t" for a in _SYLLABLES for b in _SYLLABLES))


def byte_tokenizer():
    """A byte-level BPE without merges: one token per UTF-8 byte, plus <pad> 0, <s> 1, </s> 2."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {t: i for i, t in enumerate(SPECIALS + sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")


def long_config(arch: str = "llama", positions: int = 4096):
    import transformers
    cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config}[arch]
    return cls(vocab_size=259, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=positions, pad_token_id=0, bos_token_id=1,
               eos_token_id=2, tie_word_embeddings=False)


def long_loaded(arch: str = "llama", seed: int = 0, positions: int = 4096) -> LoadedModel:
    import transformers
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(long_config(arch, positions),
                                                          attn_implementation="eager").eval()
    sites = find_sites(model)
    return LoadedModel(model=model, tokenizer=byte_tokenizer(), model_id=f"tiny-long-{arch}", source="memory",
                       task_type=adapter_for(model).task_type, arch=arch,
                       weights_sha256=weights_hash_of_module(model), sites=sites, layout=layout_of(sites))


def save_long_model(folder: Path, arch: str = "llama", seed: int = 0) -> Path:
    """A tiny long-context model folder (weights, config, tokenizer) for CLI tests."""
    lm = long_loaded(arch, seed)
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return folder
