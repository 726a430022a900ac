"""Cached calls of the Attention page (and the Tour's attention step): eager attention maps of the shared
model under a mask, and their bertviz views. The rules of :mod:`app.model.cache` hold."""
from __future__ import annotations

import streamlit as st

from app.attention import figures as attention
from app.model.cache import load, task
from pruning_core.analysis import attention_maps
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask

__all__ = ["attention_run", "bertviz_html", "label_names"]


def label_names(task_name: str) -> tuple[str, ...] | None:
    """The task's class names (None when the task has none or cannot be loaded)."""
    try:
        names = getattr(task(task_name), "label_names", None)
    except HeadpruneError:
        return None
    return tuple(names) if names else None


@st.cache_data(show_spinner=False, max_entries=64)
def attention_run(spec: str, text: str, text_b: str | None, mask: HeadMask | None,
                  labels: tuple[str, ...] | None) -> attention_maps.AttentionRun:
    """:func:`pruning_core.analysis.attention_maps.run_attention` on the shared model, per (model, text, mask)."""
    return attention_maps.run_attention(load(spec), text, mask, text_b=text_b, label_names=labels)


@st.cache_data(show_spinner=False, max_entries=64)
def bertviz_html(spec: str, text: str, text_b: str | None, mask: HeadMask | None, labels: tuple[str, ...] | None,
                 view: str, which: str) -> str:
    """The bertviz ``view`` ("head" | "model") of the ``which`` ("dense" | "pruned") model, as offline HTML."""
    run = attention_run(spec, text, text_b, mask, labels)
    return attention.head_view_html(run, which) if view == "head" else attention.model_view_html(run, which)
