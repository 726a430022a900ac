"""This session's mask (``HeadMask``, 1 = keep) and its undo/redo history, for the current model.

The history (:class:`MaskHistory`, the masks in the order they were applied) is held under
:data:`app.core.session.state.HISTORY`. A mask from a link (:data:`app.core.session.state.PENDING_MASK`, put
there by the URL reader or ``state.restore``) is decoded when the model's head layout is first known; one that
does not fit is dropped with a notice.
Choosing another model starts its history afresh (``state.set_model_spec``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

from app.core.session import notices, state
from app.core.text import md_escape
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import KIND_LABELS, HeadLayout, HeadMask
from pruning_core.core.io.share_link import decode_mask


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


def _history(layout: HeadLayout) -> MaskHistory:
    """This session's history for the current model, started afresh when it does not fit ``layout``."""
    hist: MaskHistory | None = st.session_state.get(state.HISTORY)
    if hist is not None and hist.model == state.model_spec() and hist.current.layout == layout:
        return hist
    start, label = HeadMask.full(layout), "all heads kept"
    pending = st.session_state.get(state.PENDING_MASK)
    if pending:
        st.session_state[state.PENDING_MASK] = None
        source, st.session_state[state.PENDING_SOURCE] = st.session_state.get(state.PENDING_SOURCE), None
        try:
            start, label = decode_mask(pending, layout), source or "mask from the link"
        except HeadpruneError as exc:
            notices.add_notice("error", f"{md_escape(exc)} Starting with all heads kept instead.")
    hist = MaskHistory(state.model_spec(), [HistoryEntry(HeadMask.full(layout), "all heads kept")])
    if start != hist.current:
        hist.push(start, label)
    st.session_state[state.HISTORY] = hist
    return hist


def _held() -> MaskHistory | None:
    return st.session_state.get(state.HISTORY)


def current_mask(layout: HeadLayout) -> HeadMask:
    """The mask in use (1 = keep) for the current model, whose head layout is ``layout``."""
    return _history(layout).current


def set_mask(mask: HeadMask, label: str) -> None:
    """Make ``mask`` current, recording ``label`` in the history (undoable)."""
    _history(mask.layout).push(mask, label)


def toggle_head(layout: HeadLayout, kind: str, layer: int, head: int) -> HeadMask:
    """Flip one head between kept and removed; returns the new mask."""
    hist = _history(layout)
    new = hist.current.toggled(kind, layer, head)
    now = "kept" if new.kinds[kind][layer][head] else "removed"
    hist.push(new, f"{KIND_LABELS[kind]} L{layer} H{head} {now}")
    return new


def reset_mask(layout: HeadLayout) -> None:
    set_mask(HeadMask.full(layout), "reset: all heads kept")


def can_undo() -> bool:
    hist = _held()
    return hist is not None and hist.index > 0


def can_redo() -> bool:
    hist = _held()
    return hist is not None and hist.index < len(hist.entries) - 1


def undo() -> None:
    if can_undo():
        _held().move(_held().index - 1)


def redo() -> None:
    if can_redo():
        _held().move(_held().index + 1)


def jump_to(index: int) -> None:
    """Make history entry ``index`` current (later entries stay, for redo)."""
    hist = _held()
    if hist is not None:
        hist.move(index)


def history() -> list[HistoryEntry]:
    hist = _held()
    return list(hist.entries) if hist is not None else []


def edits() -> int:
    """How many times this session's current mask has changed (never repeats; 0 without a history)."""
    hist = _held()
    return hist.edits if hist is not None else 0


def history_index() -> int:
    hist = _held()
    return hist.index if hist is not None else 0


__all__ = ["HistoryEntry", "MaskHistory", "current_mask", "set_mask", "toggle_head", "reset_mask", "can_undo",
           "can_redo", "undo", "redo", "jump_to", "history", "edits", "history_index"]
