"""Fixtures of the task tests."""
import json
import random

import pytest

from pruning_core import tasks
from task_files import DOCS, sentence


@pytest.fixture
def fresh_task_cache():
    """The task registry's cache of loaded data, cleared before and after the test."""
    tasks.clear_cache()
    yield
    tasks.clear_cache()


@pytest.fixture
def cls_file(tmp_path):
    """37 labelled sentences (``neg``/``pos``) as JSON lines."""
    rng = random.Random(0)
    rows = [{"text": sentence(rng), "label": rng.choice(["neg", "pos"])} for _ in range(37)]
    path = tmp_path / "cls.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def mt_file(tmp_path):
    """13 source/target pairs as JSON lines."""
    rng = random.Random(2)
    rows = [{"source": sentence(rng, 1, 9), "target": sentence(rng, 1, 9)} for _ in range(13)]
    path = tmp_path / "mt.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def txt_file(tmp_path):
    """A language-model text file: DOCS one a line, then a blank line."""
    path = tmp_path / "x.txt"
    path.write_text("\n".join(DOCS) + "\n\n")
    return path
