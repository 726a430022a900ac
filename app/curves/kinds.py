"""The Curves page's "Attention kinds" tab: Michel et al. §5, which kind of attention the task needs most."""
from __future__ import annotations

import streamlit as st

from app.core import state, ui
from app.core.selection import Selection
from app.core.text import md_code
from app.curves import figures, tables
from app.jobs import factories
from pruning_core.core.heads import KIND_LABELS
from pruning_core.evaluation.kinds import FRACTIONS, missing_note

SEEDS = factories.KIND_SEEDS


def show(sel: Selection, arch) -> None:
    """Run (on its button) and draw the kind sensitivity of the session's model and task."""
    present = [k for k, rows in arch.layout.kinds.items() if sum(rows) > 0]
    missing = [k for k in KIND_LABELS if k not in present]
    if len(present) < 2:
        st.info(f"This model has only {KIND_LABELS[present[0]]} heads: there is no other kind to compare. "
                "Choose a translation or speech model (Model & data) to see which kind a task needs most.")
        return
    scorer = state.scorer_name()
    runs = len(present) * len(FRACTIONS) * (1 + SEEDS) + 1
    st.caption(f"Remove 10, 25 and 50 % of ONE kind's heads, the least important first by {md_code(scorer)} and in "
               f"{SEEDS} random orders, the other kinds untouched (Michel et al. 2019, §5): {runs} evaluations of "
               f"{sel.eval_size} examples. " + missing_note(missing))
    result = factories.kinds(sel, scorer, f"Attention kinds: {runs} evaluations of {sel.eval_size} examples",
                             FRACTIONS, SEEDS, start="button").show()
    if result is None:
        return
    st.plotly_chart(figures.kinds_figure(result), key="kinds_figure",
                    alt="Metric against the share of one attention kind's heads removed, one colour per kind")
    worst = result.most_sensitive("importance")
    st.caption(f"Most sensitive here: **{KIND_LABELS[worst]}** (largest mean worsening over the three shares, "
               f"least important first). Error bars: 95 % intervals over the {result.n_examples} examples; dashed: "
               f"the mean of {SEEDS} random orders, shaded their range.")
    ui.downloads("kinds", tables.kinds_frame(result), result.to_json())
