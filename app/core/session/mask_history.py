"""A session's masks in the order they were applied, for undo/redo (held by :mod:`app.core.session.state` under
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

    A new change after some undos drops the undone tail (as in any editor). ``edits`` counts every
    change of the current mask (push, undo, redo, jump) and never repeats: the map names each figure
    it draws by it, so a click on a figure already replaced is still told apart from a click on the new one.
    """

    model: str                       # the model spec the masks belong to
    entries: list[HistoryEntry] = field(default_factory=list)
    index: int = 0
    edits: int = 0

    @property
    def current(self) -> HeadMask:
        return self.entries[self.index].mask

    def push(self, mask: HeadMask, label: str) -> None:
        if mask == self.current:
            return
        del self.entries[self.index + 1:]
        self.entries.append(HistoryEntry(mask, label))
        self.index = len(self.entries) - 1
        self.edits += 1

    def move(self, index: int) -> None:
        """Make entry ``index`` current (undo, redo, a point of the history); later entries stay."""
        if 0 <= index < len(self.entries) and index != self.index:
            self.index = index
            self.edits += 1
