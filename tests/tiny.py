"""Tiny random models of every supported architecture, built offline (hidden 32, 2 layers, 4 heads).

Decoder-only Llama-style models use grouped-query attention: :func:`kv_heads` says how many
key/value heads each has (4 query heads share 2, or 1 for Mistral; Gemma 4, no grouping).

Adding an architecture family: one entry in ``CONFIGS`` (a tiny random config); the model class
comes from the family's adapter (``adapter_for(config).auto_class``).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import torch

from pruning_core.modeling.architectures import adapter_for, find_sites, layout_of
from pruning_core.modeling.sources.loading import LoadedModel, weights_hash_of_module

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>", "</s>", "<pad>", "<unk>"] + \
    "the a good bad movie film great awful plot acting fun dull love hate it was is not very really".split()


def make_bert_tokenizer(folder: Path):
    from transformers import BertTokenizerFast
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return BertTokenizerFast(vocab=str(folder / "vocab.txt"))


def _tf():
    import transformers
    return transformers


def _marian_ssru():
    from pruning_core.modeling.architectures import marian_ssru
    return marian_ssru


_COMMON = dict(vocab_size=len(VOCAB), max_position_embeddings=64)
_SEQ2SEQ = dict(vocab_size=len(VOCAB), d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                pad_token_id=7, bos_token_id=5, eos_token_id=6, decoder_start_token_id=5)

# Whisper: 8 mel bins, 1 s of audio (100 frames -> 50 encoder positions after the stride-2 convolution)
_WHISPER = dict(vocab_size=len(VOCAB), d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8,
                max_source_positions=50, max_target_positions=64, pad_token_id=7, bos_token_id=5, eos_token_id=6,
                decoder_start_token_id=5, suppress_tokens=None, begin_suppress_tokens=None)

_DECODER = dict(vocab_size=len(VOCAB), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=64, pad_token_id=0, bos_token_id=5, eos_token_id=6)

CONFIGS: dict[str, Callable[[], object]] = {
    "bert": lambda: _tf().BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, num_labels=2, **_COMMON),
    "roberta": lambda: _tf().RobertaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                           intermediate_size=64, num_labels=2, pad_token_id=0, bos_token_id=2,
                                           eos_token_id=3, vocab_size=len(VOCAB), max_position_embeddings=70),
    "electra": lambda: _tf().ElectraConfig(hidden_size=32, embedding_size=32, num_hidden_layers=2,
                                           num_attention_heads=4, intermediate_size=64, num_labels=2, **_COMMON),
    "distilbert": lambda: _tf().DistilBertConfig(dim=32, n_layers=2, n_heads=4, hidden_dim=64, num_labels=2,
                                                 **_COMMON),
    "bart": lambda: _tf().BartConfig(**_SEQ2SEQ, forced_eos_token_id=6),
    "marian": lambda: _tf().MarianConfig(**_SEQ2SEQ),
    # Bergamot's student layout: each decoder layer's self-attention is an SSRU (no decoder_self heads)
    "marian-ssru": lambda: _marian_ssru().MarianSSRUConfig(**_SEQ2SEQ),
    "whisper": lambda: _tf().WhisperConfig(**_WHISPER),
    "gpt2": lambda: _tf().GPT2Config(n_embd=32, n_layer=2, n_head=4, n_inner=64, vocab_size=len(VOCAB),
                                     n_positions=64, pad_token_id=0, bos_token_id=5, eos_token_id=6),
    # decoder-only LMs with grouped-query attention: 4 query heads sharing 2 key/value heads (Mistral: 1)
    "llama": lambda: _tf().LlamaConfig(num_key_value_heads=2, tie_word_embeddings=True, **_DECODER),
    "qwen2": lambda: _tf().Qwen2Config(num_key_value_heads=2, tie_word_embeddings=False, **_DECODER),
    "mistral": lambda: _tf().MistralConfig(num_key_value_heads=1, sliding_window=4, tie_word_embeddings=False,
                                         **_DECODER),
    "gemma": lambda: _tf().GemmaConfig(num_key_value_heads=4, head_dim=8, tie_word_embeddings=False, **_DECODER),
    # MPNet: one relative-position bias [buckets, heads] shared by every layer; eager attention only
    "mpnet": lambda: _tf().MPNetConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=64, num_labels=2, relative_attention_num_buckets=32,
                                       **_COMMON),
}

# Families whose transformers implementation has no sdpa attention (loading with it raises).
EAGER_ONLY = {"mpnet"}


def attn_implementations(arch: str) -> tuple[str, ...]:
    """The attention implementations the tiny ``arch`` can be built with."""
    return ("eager",) if arch in EAGER_ONLY else ("eager", "sdpa")

# Every family with a tiny config (masking and pruning parity run on all of them) ...
ALL_ARCHS = list(CONFIGS)
# ... and those whose task type has tasks (classification, translation): scoring, evaluation, the app
# (whisper's speech-recognition task has its own tests: tests/test_whisper.py, tests/test_speech.py).
ARCHS = [a for a in ALL_ARCHS if adapter_for(a).task_type in ("classification", "translation")]


def tiny_config(arch: str):
    return CONFIGS[arch]()


def kv_heads(arch: str) -> int:
    """Key/value heads per layer of the tiny ``arch`` (== its 4 query heads without grouped-query attention)."""
    return int(getattr(tiny_config(arch), "num_key_value_heads", None) or 4)


def tiny_model(arch: str, seed: int = 0, attn_implementation: str = "eager", random_bias: bool = True):
    """A tiny random ``arch``; ``random_bias=False`` keeps transformers' own initialisation (zero biases)."""
    torch.manual_seed(seed)
    config = tiny_config(arch)
    cls = getattr(_tf(), adapter_for(config).auto_class)
    model = cls.from_config(config, attn_implementation=attn_implementation)
    if random_bias:
        random_biases(model, seed)
    return model.eval()


def random_biases(model, seed: int = 0) -> None:
    """Give every bias random values (N(0, 0.1^2)): transformers initialises them to zero, and a zero bias
    sliced at the wrong rows (Qwen2's q/k/v, BERT's, GPT-2's fused c_attn) would still compare equal."""
    g = torch.Generator().manual_seed(1000 + seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)


def tiny_loaded(arch: str, tmp: Path, seed: int = 0, attn_implementation: str = "eager") -> LoadedModel:
    model = tiny_model(arch, seed, attn_implementation)
    tok = make_bert_tokenizer(tmp / f"tok-{arch}")
    sites = find_sites(model)
    return LoadedModel(model=model, tokenizer=tok, model_id=f"tiny-{arch}", source="memory",
                       task_type=adapter_for(model).task_type, arch=arch,
                       weights_sha256=weights_hash_of_module(model), sites=sites, layout=layout_of(sites))


def talkative_whisper(tmp: Path, begin_suppress: Sequence[int] = (13,)) -> LoadedModel:
    """A tiny Whisper whose transcripts differ between utterances: its linear weights (not the output head) drawn
    wide (std 0.5), and a generation config with suppressed ids 8 and 11, ``begin_suppress`` at the first step and
    no-timestamps id 25 (the ids above it play the timestamps)."""
    lm = tiny_loaded("whisper", tmp)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, module in lm.model.named_modules():
            if isinstance(module, torch.nn.Linear) and name != "proj_out":
                module.weight.normal_(0.0, 0.5, generator=gen)
    config = lm.model.generation_config
    config.suppress_tokens, config.begin_suppress_tokens, config.no_timestamps_token_id = [8, 11], list(begin_suppress), 25
    return lm

def talking_whisper(tmp_path: Path, mask=None, new: int = 12) -> LoadedModel:
    """:func:`tiny.talkative_whisper` whose transcripts also end at different steps under ``mask`` (the prompt
    becomes start + no timestamps): as end-of-text the id whose first appearance differs most between the
    utterances' transcripts (:func:`whisper_features`)."""
    lm = talkative_whisper(tmp_path, begin_suppress=(13, 6))
    config = lm.model.generation_config
    config.eos_token_id = lm.model.config.eos_token_id = 7          # the pad id: never produced
    from pruning_core.modeling.inference.greedy import greedy_decode
    from pruning_core.modeling.masking import apply_mask
    from pruning_core.tasks.speech import greedy_rules

    with torch.inference_mode(), apply_mask(lm, mask):
        encoded = lm.model.get_encoder()(whisper_features()).last_hidden_state
        paths = greedy_decode(lm.model, None, None, max_new_tokens=new, encoder_hidden=encoded,
                              rules=greedy_rules(lm.model))
    eos = max(sorted({t for row in paths for t in row}),
              key=lambda t: len({row.index(t) if t in row else new for row in paths}))
    config.eos_token_id = lm.model.config.eos_token_id = eos
    return lm


def whisper_features() -> torch.Tensor:
    """``[8, mels, frames]`` log-mel features of 8 loud noises."""
    return 3 * torch.randn(8, 8, 100, generator=torch.Generator().manual_seed(3))


def tiny_inputs(arch: str, batch: int = 3, length: int = 7, seed: int = 1) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(9, len(VOCAB), (batch, length), generator=g)
    attn = torch.ones(batch, length, dtype=torch.long)
    attn[0, -2:] = 0   # one padded example
    inputs = {"input_ids": ids, "attention_mask": attn}
    config = tiny_config(arch)
    if getattr(config, "num_mel_bins", None):       # speech: log-mel frames [B, mels, 2 * encoder positions]
        frames = 2 * config.max_source_positions
        inputs = {"input_features": torch.randn(batch, config.num_mel_bins, frames, generator=g)}
    if getattr(tiny_config(arch), "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = torch.randint(9, len(VOCAB), (batch, 5), generator=g)
    return inputs


def logits_of(model, inputs) -> torch.Tensor:
    with torch.no_grad():
        return model(**inputs).logits


def tokenizer_for(folder: Path):
    """A BERT tokenizer over :data:`VOCAB` saved in ``folder / "tok"``."""
    tok = make_bert_tokenizer(folder / "tok")
    if len(tok) < len(VOCAB):                    # the constructor may not read vocab.txt
        from transformers import BertTokenizerFast
        tok = BertTokenizerFast.from_pretrained(str(folder / "tok"))
    return tok


def synthetic_sentiment(n: int = 96, seed: int = 0, max_filler: int = 10) -> list[dict]:
    """Label 1 iff the sentence holds 'good' or 'great'; 2 to ``max_filler`` filler words."""
    import random

    rng = random.Random(seed)
    filler = "the a movie film plot acting it was is very really".split()
    rows = []
    for _ in range(n):
        words = [rng.choice(filler) for _ in range(rng.randint(2, max_filler))]
        label = rng.randint(0, 1)
        words.insert(rng.randrange(len(words) + 1), rng.choice(["good", "great"] if label else ["bad", "awful"]))
        rows.append({"text": " ".join(words), "label": label})
    return rows


def synthetic_task(rows: list[dict] | None = None):
    """A classification task (``neg``/``pos``) over ``rows`` (default: 24 of :func:`synthetic_sentiment`)."""
    from pruning_core.tasks.classification import ClassificationTask

    rows = rows or synthetic_sentiment(24)
    return ClassificationTask("synthetic", lambda split, limit: rows, splits=("train", "validation"),
                              default_split="validation", label_names=["neg", "pos"])


def assert_generate_parity(lm: LoadedModel, inputs: dict, mask, new_tokens: int) -> None:
    """Greedy ``generate`` under ``mask`` and on the pruned copy: same tokens, same scores (NaN = -inf rows
    compare as 0), and no hook left on the model."""
    from pruning_core.modeling.masking import apply_mask, installed_hook_count
    from pruning_core.modeling.pruning import prune_heads

    kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, num_beams=1,
              output_scores=True, return_dict_in_generate=True, pad_token_id=0)
    with torch.no_grad():
        with apply_mask(lm, mask):
            masked = lm.model.generate(**inputs, **kw)
        pruned = prune_heads(lm.model, mask).generate(**inputs, **kw)
    assert torch.equal(masked.sequences, pruned.sequences)
    for a, b in zip(masked.scores, pruned.scores):
        assert torch.allclose(a.nan_to_num(0.0, 0.0, 0.0), b.nan_to_num(0.0, 0.0, 0.0), atol=1e-4)
    assert installed_hook_count(lm.model) == 0



def masked_and_pruned(lm: LoadedModel, mask, prompts: list[str]) -> dict:
    """One padded batch of ``prompts`` through ``lm`` dense, under ``mask`` and pruned by it (no hook left):
    ``inputs``, ``real`` ([B, T] bool, the unpadded positions), ``dense``/``masked``/``pruned`` logits
    ([B, T, vocab]) and ``model``, the pruned copy."""
    from pruning_core.modeling.masking import apply_mask, installed_hook_count
    from pruning_core.modeling.pruning import prune_heads

    enc = lm.tokenizer(prompts, return_tensors="pt", padding=True)
    inputs = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
    pruned = prune_heads(lm.model, mask)
    with torch.no_grad():
        with apply_mask(lm, mask):
            masked = lm.model(**inputs).logits
        out = {"pruned": pruned(**inputs).logits, "masked": masked, "dense": lm.model(**inputs).logits}
    assert installed_hook_count(lm.model) == 0
    return {**out, "inputs": inputs, "real": inputs["attention_mask"].bool(), "model": pruned}


WORDS = "good bad movie film great awful plot acting fun dull love hate".split()


def random_words_csv(path: Path, rows: int, words_per_row: int, vocab: Sequence[str] = WORDS, seed: int = 0) -> Path:
    """A ``text,label`` CSV of ``rows`` rows of random words from ``vocab`` (labels alternate 0, 1): a task
    file for ``--task file:PATH`` in CLI tests."""
    import random
    rng = random.Random(seed)
    lines = ["text,label"] + [" ".join(rng.choice(vocab) for _ in range(words_per_row)) + f",{i % 2}"
                              for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def prepared_folder(name: str, how: str = "") -> Path:
    """The folder of the prepared model ``name``, or a skip naming the command that prepares it."""
    from pruning_core.modeling.sources import catalog
    entry = catalog.get(name)
    if not entry.is_prepared():
        pytest.skip(f"{name} is not prepared: run `headprune prepare --model {name}`{f' ({how})' if how else ''}")
    return entry.folder()


def llama_6_on_2(seed: int = 0):
    """A tiny Llama, 2 layers of 6 query heads (head_dim 8) sharing 2 key/value heads: groups of 3."""
    import transformers
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=30, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
                                      tie_word_embeddings=False, pad_token_id=0, bos_token_id=5, eos_token_id=6)
    return transformers.LlamaForCausalLM(config).eval()
