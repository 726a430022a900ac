"""The *signal* model of the SMP tests: a tiny BERT where, in every layer, a random half of the heads
("strong") attend sharply and write strongly to the output, and the other half attend almost uniformly and
write weakly; and sentences and a CSV task over the tiny vocabulary."""
from __future__ import annotations

import random
from pathlib import Path

import torch

from pruning_core.modeling.architectures import find_sites, layout_of
from pruning_core.modeling.sources.loading import LoadedModel, weights_hash_of_module
from pruning_core.scoring.smp.train import keep_count
from tiny import VOCAB, make_bert_tokenizer

WORDS = VOCAB[9:]


def signal_loaded(tmp: Path, layers: int = 2, heads: int = 4, seed: int = 0) -> tuple[LoadedModel, dict]:
    """A tiny frozen BERT with strong and weak heads (see the module docstring) and which are strong."""
    import transformers as tf
    torch.manual_seed(seed)
    config = tf.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=layers, num_attention_heads=heads,
                           intermediate_size=64, max_position_embeddings=64, num_labels=2)
    model = tf.AutoModelForSequenceClassification.from_config(config, attn_implementation="eager").eval()
    rng = random.Random(seed)
    strong: dict[int, set[int]] = {}
    sites = find_sites(model)
    with torch.no_grad():
        for s in sites:
            strong[s.layer] = set(rng.sample(range(heads), keep_count(heads)))
            d = s.head_dim
            for h in range(heads):
                cols = slice(h * d, (h + 1) * d)
                s.q.weight[cols] *= 40.0 if h in strong[s.layer] else 0.0
                s.out.weight[:, cols] *= 20.0 if h in strong[s.layer] else 0.2
    model.requires_grad_(False)
    tok = make_bert_tokenizer(tmp / "tok")
    sites = find_sites(model)
    loaded = LoadedModel(model=model, tokenizer=tok, model_id=f"signal-{layers}x{heads}", source="memory",
                         task_type="classification", arch="bert", weights_sha256=weights_hash_of_module(model),
                         sites=sites, layout=layout_of(sites))
    return loaded, strong


def sentences(seed: int, n: int) -> list[str]:
    """``n`` sentences of 4 to 14 words of the tiny vocabulary."""
    r = random.Random(seed)
    return [" ".join(r.choice(WORDS) for _ in range(r.randint(4, 14))) for _ in range(n)]


def write_csv(path: Path, n: int = 24) -> Path:
    """A ``text,label`` CSV of ``n`` sentences with alternating labels."""
    rows = ["text,label"] + [f"{t},{i % 2}" for i, t in enumerate(sentences(9, n))]
    path.write_text("\n".join(rows) + "\n")
    return path
