"""Decoded tokens of recent evaluations, kept as drafts for the next: a click on the head map changes a few words of a
few outputs, so the output under the nearest mask already evaluated (fewest heads apart; the all-heads output at
first) is checked in one pass instead of decoded again (:func:`pruning_core.modeling.inference.greedy.draft_greedy_decode`).

Keyed by model (its identity and weights), data and decoding options; a few masks per key, the least recently used
dropped first. Drafts only save work: any draft gives greedy decoding's tokens. Thread-safe (sessions share one store).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from pruning_core.core.heads import HeadId, HeadMask


def draft_key(loaded, data, options: dict) -> tuple:
    """What decides an evaluation's decoded tokens besides the mask: the model, the encoded data and the options."""
    return (id(loaded.model), loaded.weights_sha256, data.task.name, data.split, data.n_examples, data.fingerprint,
            tuple(sorted((k, v) for k, v in options.items() if isinstance(v, (bool, int, float, str)))))


def _removed(mask: HeadMask | None) -> frozenset[HeadId]:
    return frozenset() if mask is None else frozenset(mask.removed())


class DraftStore:
    """Per key, the decoded tokens (one list per example) under up to ``masks`` masks."""

    def __init__(self, masks: int = 16, keys: int = 8) -> None:
        if masks < 1 or keys < 1:
            raise ValueError(f"DraftStore keeps at least one mask of one key, got masks={masks}, keys={keys}.")
        self.masks, self.keys = masks, keys
        self._entries: OrderedDict[Hashable, OrderedDict[frozenset, tuple[tuple[int, ...], ...]]] = OrderedDict()
        self._lock = threading.Lock()

    def draft(self, key: Hashable, mask: HeadMask | None) -> list[list[int]] | None:
        """Per example the tokens decoded under the stored mask nearest ``mask`` (ties: the latest), or None."""
        removed = _removed(mask)
        with self._lock:
            outputs = self._entries.get(key)
            if not outputs:
                return None
            self._entries.move_to_end(key)
            nearest = min(reversed(outputs), key=lambda other: len(other ^ removed))
            return [list(row) for row in outputs[nearest]]

    def put(self, key: Hashable, mask: HeadMask | None, tokens: list[list[int]]) -> None:
        """Keep ``tokens`` (per example) as decoded under ``mask``."""
        removed = _removed(mask)
        with self._lock:
            outputs = self._entries.setdefault(key, OrderedDict())
            self._entries.move_to_end(key)
            outputs.pop(removed, None)
            outputs[removed] = tuple(tuple(row) for row in tokens)
            while len(outputs) > self.masks:
                outputs.popitem(last=False)
            while len(self._entries) > self.keys:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._entries.values())
