"""The dashboard's session state: every key, its default, the URL's query parameters, and the mask.

Pages never touch ``st.session_state`` or ``st.query_params`` directly: this module names every key (its
type and meaning beside it) and reads and writes the URL; the modules that own a key's logic read it through
these names. One browser tab is one session; the model cached by :mod:`app.model.cache` is shared by every
session, while everything here (the mask especially) is per session. :func:`init` runs first in each run of
``dashboard.py``: it fills the defaults (``HEADPRUNE_APP_MODEL``, ``HEADPRUNE_APP_TASK`` and
``HEADPRUNE_APP_EVAL_LIMIT`` when set) and reads the URL once. docs/DASHBOARD.md lists the public functions.

The mask (``HeadMask``, 1 = keep) of the current model lives in its undo/redo history (:class:`MaskHistory`,
under :data:`HISTORY`). A link's mask (:data:`PENDING_MASK`) is decoded when the model's head layout is first
known; one that does not fit is dropped with a notice. Choosing another model starts its history afresh.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import streamlit as st

from app.core.text import md_code, md_escape
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import KIND_LABELS, HeadLayout, HeadMask
from pruning_core.core.io.share_link import QP_LIMIT, QP_MASK, QP_MODEL, QP_SCORER, QP_TASK, decode_mask, encode_mask

# -- keys ----------------------------------------------------------------------------------------
# each key: its type and meaning (the URL query parameter it is mirrored to, if any)
MODEL = "hp_model"            # str: "default", a local folder or a hub id (model)
TASK = "hp_task"              # str: "movie-sentiment", a GLUE/WMT name, "file:PATH" (task)
SCORER = "hp_scorer"          # str: a key of pruning_core.scoring.SCORERS (scorer)
EVAL_SIZE = "hp_eval_size"    # int | None: examples evaluated, the user's choice; None: the model's own (n)
HISTORY = "hp_history"        # MaskHistory: every mask applied and the undo/redo position (mask; below)
PENDING_MASK = "hp_pending_mask"              # str | None: a mask from the URL, decoded once the layout is known
PENDING_SOURCE = "hp_pending_mask_source"     # what the history calls the pending mask
QP_READ = "hp_qp_read"        # bool: the URL's query parameters were read into this session
QP_WRITTEN = "hp_qp_written"  # dict: what was last written to the URL (to skip no-op writes)
CANCELLED = "hp_cancelled"    # set[str]: jobs the user cancelled; they do not restart by themselves
JOBS = "hp_jobs"              # JobBoard: this session's long work (app.runtime.work.job_board)
NOTICES = "hp_notices"        # list[(level, text)]: one-shot messages for the top of the next page run
RESULTS = "hp_results"        # dict: name -> (model, task, value), results no cache key finds (session_results)
TOUR_STEP = "hp_tour_step"    # str | None: the Tour page's step, by name (step, in the URL on that page only)
MAP_CLICKS = "hp_map_clicks"    # app.headmap.ui: the map selections already applied (a click counts once)
MAP_LOG = "hp_map_log"          # app.headmap.clicks: the page's click log and how many of its clicks are applied
MAP_EDITS = "hp_map_edits"      # app.headmap.clicks: what each edit button does, as last drawn
MODEL_TYPED = "hp_model_typed"  # app.sidebar.pickers: (source, text) of a model that failed to load, kept in the form
LINK_MODEL = "hp_link_model"    # str | None: a link's model, not yet known to load (app.sidebar.pickers.known_model)

QP_STEP = "step"              # the Tour page's step: only that page's links carry it
TOUR_PAGE = "tour"            # its url_path (app.core.pages)


DEFAULT_MODEL = "default"
DEFAULT_TASK = "movie-sentiment"
DEFAULT_SCORER = "gradient"
# The largest evaluation size a user may ask for. Without a choice each model evaluates its own size
# (app.model.workload.default_eval_size: half of a 5 s click for the forward pass on 2 cores).
MAX_EVAL_SIZE = 100_000

def widget_key(page: str, name: str) -> str:
    """The session-state key of a page's widget, e.g. ``widget_key("headmap", "preset_pct")``."""
    return f"hp_w_{page}_{name}"


def defaults() -> tuple[str, str]:
    """The model and task a new session starts with (the environment's, else the embedded default)."""
    return os.environ.get("HEADPRUNE_APP_MODEL") or DEFAULT_MODEL, os.environ.get("HEADPRUNE_APP_TASK") or DEFAULT_TASK


def _defaults() -> dict:
    return {
        MODEL: defaults()[0],
        TASK: defaults()[1],
        SCORER: DEFAULT_SCORER,
        EVAL_SIZE: _int_or(os.environ.get("HEADPRUNE_APP_EVAL_LIMIT"), None),
        HISTORY: None,
        PENDING_MASK: None,
        QP_READ: False,
        QP_WRITTEN: {},
        CANCELLED: set(),
        NOTICES: [],
        TOUR_STEP: None,
        MAP_CLICKS: {},
        MAP_LOG: {},
        MAP_EDITS: {},
    }


def _int_or(text: str | None, default: int | None) -> int | None:
    try:
        return int(text) if text else default
    except ValueError:
        return default


# -- init and URL --------------------------------------------------------------------------------
def init() -> None:
    """Give every key its default, and read the URL's query parameters once per session.

    Cheap and idempotent; the accessors below call it too, so a page run on its own (AppTest,
    or a page opened before the shell ran) still finds every key.
    """
    if st.session_state.get(QP_READ):
        return
    for key, value in _defaults().items():
        if key not in st.session_state:
            st.session_state[key] = value
    if not st.session_state[QP_READ]:
        st.session_state[QP_READ] = True
        _read_query_params()


def _read_query_params() -> None:
    qp = st.query_params
    if qp.get(QP_MODEL):
        st.session_state[MODEL] = st.session_state[LINK_MODEL] = qp[QP_MODEL]
    if qp.get(QP_TASK):
        st.session_state[TASK] = qp[QP_TASK]
    if qp.get(QP_SCORER):
        st.session_state[SCORER] = qp[QP_SCORER]
    if qp.get(QP_LIMIT):
        try:
            set_eval_size(int(qp[QP_LIMIT]))
        except (ValueError, HeadpruneError):
            _notice("warning", f"Ignored the link's evaluation size {md_code(qp[QP_LIMIT])}: not a positive number.")
    if qp.get(QP_MASK):
        st.session_state[PENDING_MASK] = qp[QP_MASK]
    if qp.get(QP_STEP):
        st.session_state[TOUR_STEP] = qp[QP_STEP]


def share_params(mask: HeadMask | None = None, page: str | None = None) -> dict[str, str]:
    """The query parameters that reproduce this session's view (model, task, scorer, size, mask; on
    ``page`` "tour" also the tour's step)."""
    params = {QP_MODEL: model_spec(), QP_TASK: task_spec(), QP_SCORER: scorer_name()}
    if eval_size() is not None:              # else the model's own size, which the link need not carry
        params[QP_LIMIT] = str(eval_size())
    if mask is None:
        hist = st.session_state.get(HISTORY)
        mask = hist.current if hist is not None and hist.model == model_spec() else None
        if mask is None and st.session_state.get(PENDING_MASK):
            params[QP_MASK] = st.session_state[PENDING_MASK]
    if mask is not None and not mask.is_full():
        params[QP_MASK] = encode_mask(mask)
    if page == TOUR_PAGE and tour_step():
        params[QP_STEP] = tour_step()
    return params


def push_query_params(page: str | None = None) -> None:
    """Mirror the shareable choices of ``page`` (its url_path) into the URL (call at the end of every run)."""
    params = share_params(page=page)
    if params != st.session_state.get(QP_WRITTEN) or dict(st.query_params) != params:
        st.query_params.from_dict(params)
        st.session_state[QP_WRITTEN] = params


# -- choices -------------------------------------------------------------------------------------
def model_spec() -> str:
    init()
    return st.session_state[MODEL]


def set_model_spec(spec: str) -> None:
    """Choose another model; its mask history starts afresh (a mask fits only one layout)."""
    spec = spec.strip()
    if spec != st.session_state[MODEL]:
        st.session_state[MODEL] = spec
        st.session_state[HISTORY] = None
        st.session_state[PENDING_MASK] = None
        st.session_state[EVAL_SIZE] = None          # the new model's own evaluation size


def task_spec() -> str:
    init()
    return st.session_state[TASK]


def set_task_spec(name: str) -> None:
    st.session_state[TASK] = name.strip()


def scorer_name() -> str:
    init()
    return st.session_state[SCORER]


def set_scorer(name: str) -> None:
    st.session_state[SCORER] = name


def eval_size() -> int | None:
    """The evaluation size the user chose, or None for the model's own (:func:`app.sidebar.pickers.selection`
    resolves it)."""
    init()
    return st.session_state[EVAL_SIZE]


def set_eval_size(n: int) -> None:
    if not 1 <= int(n) <= MAX_EVAL_SIZE:
        raise HeadpruneError(f"The evaluation size must be between 1 and {MAX_EVAL_SIZE} examples, got {n}.")
    st.session_state[EVAL_SIZE] = int(n)


# -- loading a link or an analysis ---------------------------------------------------------------
def restore(*, model: str | None = None, task: str | None = None, scorer: str | None = None,
            mask: HeadMask | Mapping | str | None = None, eval_size: int | None = None,
            source: str = "mask from the link") -> None:
    """Set several choices at once (a loaded analysis or link). ``mask`` may be a HeadMask, a
    ``headprune.mask/1`` kinds dict, or the URL text form; it is checked against the model's
    layout when the model is next loaded. ``source`` names the mask in the history."""
    if model is not None:
        set_model_spec(model)
        st.session_state[HISTORY] = None
    if task is not None:
        set_task_spec(task)
    if scorer is not None:
        set_scorer(scorer)
    if eval_size is not None:
        set_eval_size(eval_size)
    if mask is not None:
        if isinstance(mask, Mapping):
            mask = HeadMask.from_lists(mask)
        if isinstance(mask, HeadMask):
            mask = encode_mask(mask)
        st.session_state[HISTORY] = None
        st.session_state[PENDING_MASK] = mask
        st.session_state[PENDING_SOURCE] = source


# -- the tour ------------------------------------------------------------------------------------
def tour_step() -> str | None:
    """The Tour page's step (its name, from a link or the last one shown); None before any."""
    init()
    return st.session_state[TOUR_STEP]


def set_tour_step(name: str) -> None:
    st.session_state[TOUR_STEP] = name


def take_link_model() -> str | None:
    """The model a link opened this session with, once (None afterwards, or when no link named one)."""
    init()
    return st.session_state.pop(LINK_MODEL, None)


def model_typed() -> tuple[str, str] | None:
    """The model source and text last typed that did not load (the form shows them again to be fixed); None
    once a model loaded."""
    return st.session_state.get(MODEL_TYPED)


def set_model_typed(typed: tuple[str, str] | None) -> None:
    st.session_state[MODEL_TYPED] = typed


# -- the mask and its history --------------------------------------------------------------------
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
    hist: MaskHistory | None = st.session_state.get(HISTORY)
    if hist is not None and hist.model == model_spec() and hist.current.layout == layout:
        return hist
    start, label = HeadMask.full(layout), "all heads kept"
    pending = st.session_state.get(PENDING_MASK)
    if pending:
        st.session_state[PENDING_MASK] = None
        source, st.session_state[PENDING_SOURCE] = st.session_state.get(PENDING_SOURCE), None
        try:
            start, label = decode_mask(pending, layout), source or "mask from the link"
        except HeadpruneError as exc:
            _notice("error", f"{md_escape(exc)} Starting with all heads kept instead.")
    hist = MaskHistory(model_spec(), [HistoryEntry(HeadMask.full(layout), "all heads kept")])
    if start != hist.current:
        hist.push(start, label)
    st.session_state[HISTORY] = hist
    return hist


def _held() -> MaskHistory | None:
    return st.session_state.get(HISTORY)


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


def _notice(level: str, text: str) -> None:
    """Queue a one-shot message (:mod:`app.core.session.notices` shows them; it imports this module, so not
    the other way)."""
    st.session_state.setdefault(NOTICES, []).append((level, text))


__all__ = [
    "widget_key", "init", "share_params", "push_query_params", "model_spec", "set_model_spec", "task_spec",
    "set_task_spec", "scorer_name", "set_scorer", "eval_size", "set_eval_size", "restore", "defaults",
    "tour_step", "set_tour_step", "take_link_model", "model_typed", "set_model_typed", "QP_STEP", "TOUR_PAGE",
    "HistoryEntry", "MaskHistory", "current_mask", "set_mask", "toggle_head", "reset_mask", "can_undo", "can_redo",
    "undo", "redo", "jump_to", "history", "edits", "history_index",
]
