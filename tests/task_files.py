"""Small task files and tiny models with a matching tokenizer, shared by the task tests."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from tiny import VOCAB, tiny_loaded

WORDS = VOCAB[9:]
DOCS = ["the good movie was fun", "a bad film it was not very great", "the plot was dull and the acting awful",
        "love the movie really love it", "it is a very very good film the acting is great",
        "hate the plot"] * 4
SPOKEN = ("the movie was good", "it was a bad film")         # what listing_folder's recordings "say"


def sentence(rng: random.Random, lo: int = 1, hi: int = 14) -> str:
    """``lo`` to ``hi`` words of the tiny vocabulary."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def loaded_for(arch, tmp_path, seed=0):
    """A tiny model with a tokenizer that really knows the tiny vocabulary."""
    loaded = tiny_loaded(arch, tmp_path, seed)
    if len(loaded.tokenizer) < len(VOCAB):       # tiny.py's constructor may not read vocab.txt
        from transformers import BertTokenizerFast
        loaded.tokenizer = BertTokenizerFast.from_pretrained(str(tmp_path / f"tok-{arch}"))
    return loaded


def listing_folder(tmp_path: Path, texts=SPOKEN) -> Path:
    """A speech listing folder: ``audio/<i>.wav`` (noise, 0.75 s at 16 kHz) beside ``audio/<i>.txt``."""
    from pruning_core.tasks.data import speech

    folder = tmp_path / "audio"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i, text in enumerate(texts):
        (folder / f"{i}.wav").write_bytes(speech.encode_wav(rng.normal(0, 0.1, 12000).astype(np.float32)))
        (folder / f"{i}.txt").write_text(text)
    return folder
