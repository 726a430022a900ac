"""What a first visit reads at the top of the landing page: what the tool is for, and where to start."""
from __future__ import annotations

import streamlit as st

from app.core.pages import PAGES

PURPOSE = ("**headprune** **shows which attention heads a transformer needs for its task, and removes the rest**: "
           "switch heads off and watch the metric, the size and the speed change, then keep the smaller model. "
           "New here? Take the guided **Tour**, or open the **Head map** and click heads; this page picks the "
           "model and the task.")


def _page(stem: str):
    return next(p for p in PAGES if p.url_path == stem)


def show() -> None:
    """The two sentences and links to the Tour and the Head map, in one compact box (above the fold)."""
    with st.container(border=True):
        st.markdown(PURPOSE)
        tour, head_map, _ = st.columns([1, 1, 2])
        for column, stem, label in ((tour, "tour", "Start the Tour"), (head_map, "head_map", "Open the Head map")):
            page = _page(stem)
            column.page_link(page.file, label=label, icon=page.icon)
