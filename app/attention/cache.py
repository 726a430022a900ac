"""Cached calls of the Attention page (and the Tour's attention step): eager attention maps of the shared
model under a mask, their bertviz views, and one head's direct logit attribution. The rules of
:mod:`app.model.cache` hold."""
from __future__ import annotations

import streamlit as st

import torch

from app.attention import figures
from app.core.session.selection import Selection
from app.model.cache import context_data, load, task
from app.runtime import board
from pruning_core.analysis import attention_maps, logit_attribution
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask

__all__ = ["attention_run", "bertviz_html", "label_names", "head_attribution"]

EXAMPLES = 5            # long-context examples offered (the first of the test split, as the KV-cache mode's smallest size)


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
    return figures.head_view_html(run, which) if view == "head" else figures.model_view_html(run, which)


@st.cache_data(show_spinner=False, max_entries=64)
def head_attribution(spec: str, layer: int, head: int, text: str | None, example: tuple[str, int, int] | None
                     ) -> logit_attribution.HeadAttribution:
    """:func:`pruning_core.analysis.logit_attribution.attribute_head` of head ``(layer, head)`` at the last token of
    ``text``; of the long-context ``example`` ``(task, context, index)``, :func:`~pruning_core.analysis.
    logit_attribution.attribute_at_answer`: at the position whose greedy next token starts the answer, that token
    the target. Per (model, head, input); queued with the evaluations a user waits for."""
    loaded = load(spec)
    if example is None:
        ids = loaded.tokenizer(text, return_tensors="pt")["input_ids"]
        with board.GATE.hold(urgent=True, what="attribution"):
            return logit_attribution.attribute_head(loaded, ids, layer, head)
    task_name, context, index = example
    data = context_data(Selection(spec, task_name, EXAMPLES), context)
    prompt = torch.tensor([data.features[index]["input_ids"]])
    with board.GATE.hold(urgent=True, what="attribution"):
        return logit_attribution.attribute_at_answer(
            loaded, prompt, layer, head, data.texts[index]["answers"], int(data.specials["first_answer_token"][index]),
            max_new=int(data.specials["new_tokens"]))
