"""Whether the Hugging Face hub can be reached, answered within about two seconds.

Without it, loading a hub id with no network makes ``huggingface_hub`` retry for over a minute
before it fails; with it, :func:`pruning_core.modeling.sources.loading.load_model` reads only the local Hugging Face
cache and a mistyped or uncached id fails at once. ``huggingface_hub``'s own offline setting
(``HF_HUB_OFFLINE=1``) answers "no" without a probe; otherwise one TCP connection is tried to the
host its requests go to (the HTTPS proxy when one is set, else its endpoint, ``HF_ENDPOINT``), and
the answer is kept for a minute.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from urllib.parse import urlsplit

PROBE_SECONDS = 2.0          # the longest the probe (name lookup and connection) may take
REMEMBER_SECONDS = 60.0      # how long an answer is reused

_answer: tuple[float, bool] | None = None          # (when, reachable)
_lock = threading.Lock()


def target() -> tuple[str, int]:
    """The host and port a hub request would connect to first: the HTTPS proxy if set, else the endpoint."""
    from huggingface_hub import constants
    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    url = urlsplit(proxy or constants.ENDPOINT)
    return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)


def _probe(host: str, port: int) -> bool:
    """One connection attempt, bounded by :data:`PROBE_SECONDS` including the name lookup (run aside)."""
    result: list[bool] = []

    def attempt() -> None:
        try:
            socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
            result.append(True)
        except OSError:
            result.append(False)

    worker = threading.Thread(target=attempt, daemon=True, name="hub-probe")
    worker.start()
    worker.join(PROBE_SECONDS)
    return bool(result and result[0])


def reachable() -> bool:
    """Whether hub requests can be tried (False when ``HF_HUB_OFFLINE`` is set or the probe fails)."""
    from huggingface_hub import constants
    global _answer
    if constants.HF_HUB_OFFLINE:
        return False
    with _lock:
        if _answer is None or time.monotonic() - _answer[0] > REMEMBER_SECONDS:
            _answer = (time.monotonic(), _probe(*target()))
        return _answer[1]


def forget() -> None:
    """Probe again on the next call (tests; a network that came back)."""
    global _answer
    with _lock:
        _answer = None
