"""A hub id with no network fails within a couple of seconds (no minute of retries), saying what to do."""
from __future__ import annotations

import socket
import time

import pytest
from huggingface_hub import constants

from pruning_core.core.runtime import hub_probe
from pruning_core.core.errors import ModelLoadError
from pruning_core.modeling.sources.loading import load_model


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """The hub 'online' by its settings, but its endpoint refuses connections (a closed local port)."""
    with socket.socket() as s:                  # a port nothing listens on: connections are refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    hub_probe.forget()
    yield
    hub_probe.forget()


def test_a_mistyped_hub_id_fails_fast_and_says_what_to_do(no_network):
    import transformers
    transformers.AutoConfig, transformers.AutoTokenizer           # imported before the clock starts
    start = time.monotonic()
    with pytest.raises(ModelLoadError) as info:
        load_model("bert-base/uncasedd")
    assert time.monotonic() - start < 5.0
    message = str(info.value)
    assert "bert-base/uncasedd" in message and "cannot be reached" in message and "spelling" in message


def test_the_offline_setting_answers_without_a_probe(monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub_probe, "_probe", lambda host, port: pytest.fail("probed although offline"))
    assert hub_probe.reachable() is False


def test_an_open_endpoint_is_reachable(monkeypatch):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        monkeypatch.delenv("HTTPS_PROXY", raising=False)
        monkeypatch.delenv("https_proxy", raising=False)
        hub_probe.forget()
        assert hub_probe.reachable() is True
    hub_probe.forget()
