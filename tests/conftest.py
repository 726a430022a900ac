import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture
def headprune_home(tmp_path, monkeypatch):
    """An empty, private HEADPRUNE_HOME."""
    home = tmp_path / "hp-home"
    monkeypatch.setenv("HEADPRUNE_HOME", str(home))
    return home


@pytest.fixture
def workdir(tmp_path, monkeypatch, headprune_home):
    """The working directory (cwd) of a CLI test: a tiny BERT saved in ``tiny/`` and a 24-row ``tiny.csv``
    task (``--task file:tiny.csv``), with an empty HEADPRUNE_HOME."""
    from tiny import make_bert_tokenizer, random_words_csv, tiny_model
    tiny_model("bert").save_pretrained(tmp_path / "tiny")
    make_bert_tokenizer(tmp_path / "tiny")
    random_words_csv(tmp_path / "tiny.csv", rows=24, words_per_row=6)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium driven by Playwright, one per test module; skipped when not installed."""
    from browser_helpers import chromium_browser, chromium_path

    path = chromium_path()
    if path is None:
        pytest.skip("Chromium is not installed (apt-get install chromium, or `make browser`)")
    with chromium_browser(path) as b:
        yield b


# -- tiny dashboards (browser_helpers.build_tiny_app: a tiny random model saved like a real one + a CSV task) --
# Module-scoped: the dashboard's caches are keyed by the model folder, so each test module gets its own.

@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A tiny BERT with a 48-example sentiment CSV."""
    from browser_helpers import build_tiny_app
    return build_tiny_app(tmp_path_factory.mktemp("tiny-bert"), "bert")


@pytest.fixture(scope="module")
def tiny_bert_24(tmp_path_factory):
    """A tiny BERT with a 24-example sentiment CSV."""
    from browser_helpers import build_tiny_app
    return build_tiny_app(tmp_path_factory.mktemp("tiny-bert-24"), "bert", n_examples=24)


@pytest.fixture(scope="module")
def tiny_bart(tmp_path_factory):
    """A tiny BART with a 24-pair translation CSV."""
    from browser_helpers import build_tiny_app
    return build_tiny_app(tmp_path_factory.mktemp("tiny-bart"), "bart", n_examples=24)


@pytest.fixture(scope="module")
def tiny_bart_12(tmp_path_factory):
    """A tiny BART with a 12-pair translation CSV."""
    from browser_helpers import build_tiny_app
    return build_tiny_app(tmp_path_factory.mktemp("tiny-bart-12"), "bart", n_examples=12)


@pytest.fixture(scope="module")
def tiny_ssru(tmp_path_factory):
    """A tiny Marian whose decoder runs an SSRU (no decoder self-attention heads) with 8 translation pairs."""
    from browser_helpers import build_tiny_app
    return build_tiny_app(tmp_path_factory.mktemp("tiny-ssru"), "marian-ssru", n_examples=8)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A tiny random Llama (4 query heads sharing 2 key/value heads) and a 40-line ``.txt`` task."""
    from browser_helpers import build_tiny_llama
    return build_tiny_llama(tmp_path_factory.mktemp("app-llama"))
