"""A tiny model and a task for each family the new scorers must cover (tests/test_scorer_methods.py).

Classification (bert, distilbert, mpnet) and translation (bart, marian) use the in-memory FakeTask;
language models (gpt2, llama with grouped-query attention) a LanguageModelTask on short sentences;
speech (whisper) the asr task on two random-noise clips with transcripts.
"""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from fake_task import FakeTask
from tiny import tiny_loaded

FAMILIES = ["bert", "distilbert", "mpnet", "bart", "marian", "gpt2", "llama", "whisper"]
WORDS = "the a good bad movie film great awful plot acting fun dull love hate it was is not very really".split()


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def speech_folder(tmp: Path, texts=("the movie was good", "it was a bad film", "great plot")) -> Path:
    from pruning_core.tasks.data import speech
    folder = tmp / "audio"
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    for i, text in enumerate(texts):
        (folder / f"{i}.wav").write_bytes(speech.encode_wav(rng.normal(0, 0.1, 12000).astype(np.float32)))
        (folder / f"{i}.txt").write_text(text)
    return folder


def case(arch: str, tmp: Path, seed: int = 0):
    """``(loaded, task, split)`` for a tiny model of ``arch`` and a task of its type."""
    lm = tiny_loaded(arch, tmp, seed=seed)
    if lm.task_type == "classification":
        return lm, FakeTask(n=8), "validation"
    if lm.task_type == "translation":
        return lm, FakeTask(seq2seq=True, n=8), "validation"
    if lm.task_type == "language_model":
        from pruning_core.tasks.language_model import LanguageModelTask, text_loader
        task = LanguageModelTask("lm", text_loader(lambda split: sentences(6, 4)), splits=("test",),
                                 default_split="test")
        return lm, task, "test"
    from pruning_core.tasks.registry import get_task
    return lm, get_task(f"speech:{speech_folder(tmp)}"), "test"
