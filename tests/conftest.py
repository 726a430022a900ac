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


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium driven by Playwright, one per test module; skipped when not installed."""
    from browser_helpers import chromium_browser, chromium_path

    path = chromium_path()
    if path is None:
        pytest.skip("Chromium is not installed (apt-get install chromium, or `make browser`)")
    with chromium_browser(path) as b:
        yield b
