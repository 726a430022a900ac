"""Shared widgets: page intro and notices, error display, "updating…" placeholders, metric rows, tables
and downloads. The pickers that read cached calls live in :mod:`app.sidebar.pickers`.

Anything slow in :mod:`app.model.cache` is called through :class:`app.runtime.work.Work` (progress bar, Cancel,
when it starts).
"""
from __future__ import annotations

import contextlib
import logging
from typing import Any

import streamlit as st

from app.core import uncertainty
from app.core.session import notices, state
from app.core.access import hide_upload_paths
from app.core.text import md_escape
from pruning_core.core.errors import HeadpruneError
from pruning_core.evaluation.metrics import get_metric

log = logging.getLogger("headprune.app")


def page_intro(title: str, text: str) -> None:
    """The page title, the explanation's first sentence, the rest of it in a collapsed "About this page"
    (so the page's own figure starts in the first screen at 1366 x 900), and any queued notices."""
    st.title(title)
    first, rest = split_intro(text)
    st.markdown(first)
    if rest:
        with st.expander("About this page"):
            st.markdown(rest)
    show_notices()


def split_intro(text: str) -> tuple[str, str]:
    """(the first sentence, the rest) of a Markdown paragraph; a sentence ends at '.', '!' or '?' before a
    capital letter or bold text ('Michel et al. 2019' does not end one)."""
    import re

    text = " ".join(text.split())
    found = re.search(r"(?<=[.!?])\s+(?=[A-Z*])", text)
    return (text, "") if found is None else (text[:found.start()], text[found.end():])


def show_notices() -> None:
    """Show (once) the messages queued with ``notices.add_notice``, e.g. by a link's unreadable mask."""
    for level, message in notices.pop_notices():
        getattr(st, level if level in notices.LEVELS else "info")(message)


def show_error(exc: BaseException, what: str = "") -> None:
    """A readable message instead of a traceback (the traceback goes to the server log).

    ``what`` is Markdown (callers pass values in it through :mod:`app.core.text`); the message is shown
    as plain text (it often holds a value from a link or a file).
    """
    prefix = f"{what}: " if what else ""
    if isinstance(exc, HeadpruneError):             # an upload is named by its file name, not its server path
        st.error(f"{prefix}{md_escape(hide_upload_paths(str(exc)))}", icon=":material/error:")
    else:
        log.exception("unexpected error in the dashboard", exc_info=exc)
        first = md_escape(hide_upload_paths(str(exc).splitlines()[0])) if str(exc) else ""
        st.error(f"{prefix}unexpected {type(exc).__name__}: {first} "
                 "The details are in the server log; the rest of the dashboard keeps working.",
                 icon=":material/error:")


def updating_text(what: str) -> str:
    """The caption of a value being computed: "<what>: updating…"."""
    return f":material/hourglass_top: {what}: updating…"


def updating(what: str):
    """A placeholder (``st.empty``) that says "<what>: updating…" until :func:`filling` draws the new
    value into it, so a value of the previous mask is never left on screen unmarked."""
    slot = st.empty()
    slot.caption(updating_text(what))
    return slot


@contextlib.contextmanager
def filling(slot, what: str):
    """Draw into ``slot`` (from :func:`updating`): the "updating…" line stays on top (with any progress
    bar below it) while the block computes, and goes when the block has drawn the new values."""
    with slot.container():
        note = st.empty()
        note.caption(updating_text(what))
        yield
        note.empty()


METRIC_GAP = "medium"


def metric_row(gap: str = METRIC_GAP):
    """A row of metrics that wraps onto the next line when the page is narrow (a projector at
    1024 x 768) instead of cutting values to '70.…': put ``st.metric(..., width="content")`` in it."""
    return st.container(horizontal=True, wrap=True, gap=gap)


def metric_label(name: str) -> str:
    """The metric's label from the registry: 'BLEU', 'MCC', 'F1', 'accuracy'."""
    return get_metric(name).label


def metric_text(name: str, value: float, interval: tuple[float, float] | None = None) -> str:
    """The metric's display format (accuracy-like metrics as percentages, BLEU as points), rounded as the Head
    map rounds a value with the 95 % ``interval`` (that of the all-heads evaluation of the same examples)."""
    return uncertainty.rounded(name, value, interval)


def is_zero_text(delta: str) -> bool:
    """Whether a formatted change ('+0.0 points', '-0.0000', '+0.0 %') shows no change at its precision."""
    number = delta.split(" ")[0]
    return any(ch.isdigit() for ch in number) and not any(ch in "123456789" for ch in number)


def delta_kwargs(delta: str | None, color: str = "normal", *, within_noise: bool = False) -> dict:
    """``st.metric`` keyword arguments for a change: a change of zero at display precision gets no arrow and
    no colour (a '+0.0' is not an improvement), nor does one whose paired 95 % interval covers zero
    (``within_noise``: it says so); ``color`` ('normal' / 'inverse') otherwise."""
    if delta is None:
        return {"delta": None}
    if is_zero_text(delta):
        return {"delta": f"{delta.lstrip('+-')} (no change)", "delta_color": "off", "delta_arrow": "off"}
    if within_noise:
        return {"delta": f"{delta} (within noise)", "delta_color": "off", "delta_arrow": "off"}
    return {"delta": delta, "delta_color": color}


def count_text(n: int) -> str:
    """1234567 -> '1.23 M'."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return str(n)


def remembered(key: str, default: Any) -> dict:
    """``key`` and ``on_change`` for a widget whose choice must survive runs in which it is not drawn
    (Streamlit forgets such a widget's value, and the browser can then show one choice while the
    page draws another). The choice is kept under a second session key."""
    store = f"{key}__kept"
    st.session_state[key] = st.session_state.get(store, default)

    def keep() -> None:
        st.session_state[store] = st.session_state[key]
    return {"key": key, "on_change": keep}


def bind(key: str, value: Any) -> str:
    """Give the widget ``key`` the value held in :mod:`app.core.session.state` before it is drawn; returns ``key``.

    Widgets bound this way write back through their ``on_change`` callback (which runs before the
    page), so the state module stays the one source of truth even when a shared link or a
    loaded analysis changes a choice.
    """
    st.session_state[key] = value
    return key


# -- tables and downloads ------------------------------------------------------------------------
def table(frame, **kwargs) -> None:
    """``st.dataframe`` of a result table: numbers of a thousand and more with thousands separators
    (a perplexity of 61,925.01, not 61925.01); smaller ones as the table holds them."""
    import pandas as pd

    wide = {c: st.column_config.NumberColumn(format="localized") for c in frame.columns
            if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
            and frame[c].abs().max() >= 1000}
    st.dataframe(frame, hide_index=True, column_config={**wide, **kwargs.pop("column_config", {})}, **kwargs)


def downloads(name: str, frame, data: dict, show_table: bool | str = True) -> None:
    """A sortable table plus CSV and headprune-JSON download buttons.

    ``show_table``: True shows the table, a string shows it in a collapsed expander of that title.
    """
    import json

    if isinstance(show_table, str):
        with st.expander(show_table):
            table(frame, height=min(420, 38 + 35 * len(frame)))
    elif show_table:
        table(frame, height=min(420, 38 + 35 * len(frame)))
    row = st.container(horizontal=True, wrap=True)     # buttons as wide as their labels, wrapping when narrow
    row.download_button("Download CSV", frame.to_csv(index=False).encode(), f"headprune-{name}.csv", "text/csv",
                       key=state.widget_key("download", f"{name}_csv"), icon=":material/download:")
    row.download_button("Download JSON", json.dumps(data, indent=1).encode(), f"headprune-{name}.json",
                       "application/json", key=state.widget_key("download", f"{name}_json"),
                       icon=":material/download:")
