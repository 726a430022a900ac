"""Dynamics: how head importance and pruning tolerance evolve during fine-tuning (Michel et al. §6)."""
import pandas as pd
import streamlit as st

from app.curves import dynamics
from app.core import ui
from app.core.session import state
from app.core.text import md_code, md_escape
from pruning_core.analysis.dynamics import summary_rows
from pruning_core.core.errors import HeadpruneError

ui.page_intro("Training dynamics", """
Michel et al. (2019, §6) watched importance while a model trains: the heads that matter are **important
early**, while the ability to lose many heads with little damage (**pruning tolerance**) develops later.
Here the raw pre-trained MiniLM-L6 is fine-tuned as `headprune prepare` does; at several steps the
gradient importance I_h (head h's importance: how much the loss would change if the head were
removed, from one backward pass) is computed on training examples and a short pruning curve (heads removed
by *that* checkpoint's I_h) is measured on validation examples. Nothing is trained here: the page
reads a file made by `headprune dynamics --out FILE` or `python benchmarks/dynamics.py`.""")

upload = st.file_uploader("Show another dynamics file (headprune.dynamics/1 JSON)", type=["json"],
                          key=state.widget_key("dynamics", "upload"))
source = upload.name if upload is not None else dynamics.DEFAULT_RESULT.name
try:
    result = dynamics.read_dynamics(upload.getvalue() if upload is not None else dynamics.DEFAULT_RESULT.read_bytes(),
                                    f"File {source!r}")
except FileNotFoundError:
    st.info(f"No dynamics run yet ({dynamics.DEFAULT_RESULT.name} is missing). Run `python benchmarks/dynamics.py` "
            "(about 10 minutes on 2 CPU cores), or upload a file made by `headprune dynamics --out FILE`.")
    st.stop()
except HeadpruneError as exc:
    ui.show_error(exc, f"Reading {md_code(source)}")
    st.stop()
if not result.checkpoints:
    st.info(f"{md_code(source)} holds no checkpoints.")
    st.stop()

st.caption(f"From {md_code(source)} · {md_escape(result.provenance.get('task'))} · {md_escape(result.metric_name)} "
           f"on {result.n_eval_examples} {md_escape(result.provenance.get('split'))} examples · I_h on "
           f"{result.n_score_examples} training examples · {result.total_steps} steps in all · "
           f"{md_escape(result.provenance.get('created', ''))}")
left, right = st.columns(2)
left.markdown("**Pruning curve at each checkpoint** (light = early, dark = late)")
left.plotly_chart(dynamics.curves_by_step_figure(result), key="dyn-curves")
right.markdown("**Rank correlation of I_h** with the final checkpoint's and the previous one's")
right.plotly_chart(dynamics.rank_correlation_figure(result), key="dyn-rho")
st.markdown("**Change from the unpruned model** at each step and share of heads removed (tolerance)")
st.plotly_chart(dynamics.drop_heatmap_figure(result), key="dyn-heat")
ui.downloads("dynamics", pd.DataFrame(summary_rows(result)), result.to_json())
