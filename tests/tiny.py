"""Tiny random models of every supported architecture, built offline (hidden 32, 2 layers, 4 heads)."""
from __future__ import annotations

from pathlib import Path

import torch

from pruning_core.architectures import find_sites, layout_of
from pruning_core.models import LoadedModel, weights_hash_of_module

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>", "</s>", "<pad>", "<unk>"] + \
    "the a good bad movie film great awful plot acting fun dull love hate it was is not very really".split()


def make_bert_tokenizer(folder: Path):
    from transformers import BertTokenizerFast
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return BertTokenizerFast(vocab=str(folder / "vocab.txt"))


def tiny_config(arch: str):
    import transformers as tf
    common = dict(vocab_size=len(VOCAB), max_position_embeddings=64)
    if arch == "bert":
        return tf.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                             num_labels=2, **common)
    if arch == "roberta":
        return tf.RobertaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                num_labels=2, pad_token_id=0, bos_token_id=2, eos_token_id=3, vocab_size=len(VOCAB),
                                max_position_embeddings=70)
    if arch == "electra":
        return tf.ElectraConfig(hidden_size=32, embedding_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, num_labels=2, **common)
    if arch == "distilbert":
        return tf.DistilBertConfig(dim=32, n_layers=2, n_heads=4, hidden_dim=64, num_labels=2, **common)
    seq = dict(vocab_size=len(VOCAB), d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
               pad_token_id=7, bos_token_id=5, eos_token_id=6, decoder_start_token_id=5)
    if arch == "bart":
        return tf.BartConfig(**seq, forced_eos_token_id=6)
    if arch == "marian":
        return tf.MarianConfig(**seq)
    raise ValueError(arch)


def tiny_model(arch: str, seed: int = 0, attn_implementation: str = "eager"):
    import transformers as tf
    torch.manual_seed(seed)
    config = tiny_config(arch)
    cls = tf.AutoModelForSeq2SeqLM if arch in ("bart", "marian") else tf.AutoModelForSequenceClassification
    model = cls.from_config(config, attn_implementation=attn_implementation)
    return model.eval()


def tiny_loaded(arch: str, tmp: Path, seed: int = 0) -> LoadedModel:
    model = tiny_model(arch, seed)
    tok = make_bert_tokenizer(tmp / f"tok-{arch}")
    sites = find_sites(model)
    task_type = "translation" if arch in ("bart", "marian") else "classification"
    return LoadedModel(model=model, tokenizer=tok, model_id=f"tiny-{arch}", source="memory", task_type=task_type,
                       arch=arch, weights_sha256=weights_hash_of_module(model), sites=sites, layout=layout_of(sites))


def tiny_inputs(arch: str, batch: int = 3, length: int = 7, seed: int = 1) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(9, len(VOCAB), (batch, length), generator=g)
    attn = torch.ones(batch, length, dtype=torch.long)
    attn[0, -2:] = 0   # one padded example
    inputs = {"input_ids": ids, "attention_mask": attn}
    if arch in ("bart", "marian"):
        inputs["decoder_input_ids"] = torch.randint(9, len(VOCAB), (batch, 5), generator=g)
    return inputs


def logits_of(model, inputs) -> torch.Tensor:
    with torch.no_grad():
        return model(**inputs).logits


ARCHS = ["bert", "roberta", "electra", "distilbert", "bart", "marian"]
