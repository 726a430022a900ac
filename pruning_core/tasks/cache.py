"""The in-memory cache of encoded splits (least recently used dropped), keyed by tokenizer identity."""
from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pruning_core.tasks.batching import EncodedData

CACHE_SIZE = 8                  # EncodedData kept in memory (least recently used dropped)

_CACHE: "OrderedDict[Hashable, EncodedData]" = OrderedDict()
_CACHE_LOCK = threading.Lock()
_VOCAB_HASH: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def tokenizer_key(tokenizer) -> tuple:
    """Identify a tokenizer by name, size and a hash of its vocabulary (memoised per object)."""
    try:
        digest = _VOCAB_HASH.get(tokenizer)
    except TypeError:
        digest = None
    if digest is None:
        vocab = sorted(tokenizer.get_vocab().items())
        digest = hashlib.sha256(json.dumps(vocab, ensure_ascii=False).encode()).hexdigest()[:16]
        try:
            _VOCAB_HASH[tokenizer] = digest
        except TypeError:
            pass
    return type(tokenizer).__name__, getattr(tokenizer, "name_or_path", ""), len(tokenizer), digest


def lookup(key: Hashable) -> "EncodedData | None":
    """The cached data for ``key`` (now the most recently used), or None."""
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
        return hit


def store(key: Hashable, data: "EncodedData") -> None:
    """Cache ``data`` under ``key``, dropping the least recently used beyond ``CACHE_SIZE``."""
    with _CACHE_LOCK:
        _CACHE[key] = data
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)


def clear_cache() -> None:
    """Forget every cached EncodedData."""
    with _CACHE_LOCK:
        _CACHE.clear()
