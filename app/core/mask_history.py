"""A session's masks in the order they were applied, for undo/redo (held by :mod:`app.core.state` under
``hp_history``; pure Python, no Streamlit)."""
from __future__ import annotations

from dataclasses import dataclass, field

from pruning_core.core.heads import HeadMask

__all__ = ["HistoryEntry", "MaskHistory"]


@dataclass(frozen=True)
class HistoryEntry:
    mask: HeadMask
    label: str                       # what the change was, e.g. "toggle encoder_self L3 H5"


@dataclass
class MaskHistory:
    """Masks in the order they were applied; ``index`` points at the current one.

    A new change after some undos drops the undone tail (as in any editor).
    """

    model: str                       # the model spec the masks belong to
    entries: list[HistoryEntry] = field(default_factory=list)
    index: int = 0

    @property
    def current(self) -> HeadMask:
        return self.entries[self.index].mask

    def push(self, mask: HeadMask, label: str) -> None:
        if mask == self.current:
            return
        del self.entries[self.index + 1:]
        self.entries.append(HistoryEntry(mask, label))
        self.index = len(self.entries) - 1
