"""SMP compare: prune before fine-tuning (SMP) against the full model, random pruning, and pruning after."""
from pathlib import Path

import pandas as pd
import streamlit as st

from app.core import ui
from app.core.session import state
from app.core.text import md_code, md_escape
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.io.codec import read_document
from pruning_core.evaluation.metrics import get_metric
from pruning_core.scoring.smp.compare import CompareResult, summary_rows

ui.page_intro("SMP compare", """
**Single-Shot Meta-Pruning** (Zhang et al. 2020) decides which heads a *pre-trained* model does not
need before any fine-tuning, from unlabeled text alone: a small learned network reads each head's
attention map, the top half of every layer is kept, the rest is removed physically, and only the
smaller model is fine-tuned. The table compares, with identical fine-tuning settings: **(a)** the full
model, **(b)** SMP, **(c)** random halves (several seeds), **(d)** fine-tune first, then remove half by
the gradient importance I_h (each head's estimated effect on the loss) without retraining, and **(e)** (d) fine-tuned again. The claim to check:
(b) is close to (a), beats (c), and is cheaper to fine-tune than (a). Produce a file with
`headprune smp compare --out FILE` (about 40 minutes on 2 CPU cores).""")

DEFAULT = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "smp_compare.json"
upload = st.file_uploader("Show another comparison file (headprune.smp_compare/1 JSON)", type=["json"],
                          key=state.widget_key("smp", "upload"))
source = upload.name if upload is not None else str(DEFAULT.relative_to(DEFAULT.parents[2]))
try:
    result = read_document(upload.getvalue() if upload is not None else DEFAULT.read_bytes(), CompareResult.from_json,
                           f"File {source!r}")
except FileNotFoundError:
    st.info(f"No comparison yet ({DEFAULT.name} is missing). Run `python benchmarks/smp_compare.py`, "
            "or upload a file made by `headprune smp compare --out FILE`.")
    st.stop()
except HeadpruneError as exc:
    ui.show_error(exc, f"Reading {md_code(source)}")
    st.stop()

rows = pd.DataFrame(summary_rows(result)).set_index("short")
st.caption(f"From {md_code(source)} · {md_escape(result.config.get('task'))} · {md_escape(rows['metric_name'].iloc[0])} "
           f"on the {md_escape(result.config.get('eval_split'))} split · {md_escape(result.provenance.get('created', ''))}")
c = st.columns(3)
c[0].markdown(f"**{md_escape(rows['metric_name'].iloc[0].capitalize())} minus (a)**, points (mean of the seeds for (c))")
c[0].bar_chart(rows["delta_vs_full_points"], horizontal=True, height=260, x_label="points", y_label="")
c[1].markdown("**Fine-tuning CPU time** (s)")
c[1].bar_chart(rows["finetune_cpu_seconds"].dropna(), horizontal=True, height=260, x_label="seconds", y_label="")
c[2].markdown("**Fine-tuning peak memory** (MiB, whole process)")
c[2].bar_chart(rows["finetune_peak_memory_mib"].dropna(), horizontal=True, height=260, x_label="MiB", y_label="")
metric = get_metric(rows["metric_name"].iloc[0])
# the columns a reader compares, formatted, so the table fits a 1366 px window; every column is
# in the expander and the downloads below
st.dataframe(pd.DataFrame({
    "condition": rows.index,
    "heads": [f"{k}/{t}" for k, t in zip(rows["heads_kept"], rows["heads_total"])],
    metric.label: [metric.fmt.format(metric.scale * m) + (f" ± {metric.scale * sd:.1f}" if sd else "")
                   for m, sd in zip(rows["metric"], rows["metric_sd"].fillna(0))],
    "vs (a)": [metric.delta_fmt.format(d) if pd.notna(d) else "" for d in rows["delta_vs_full_points"]],
    "CPU s": [f"{v:,.0f}" if pd.notna(v) else "–" for v in rows["finetune_cpu_seconds"]],
    "peak MiB": [f"{v:,.0f}" if pd.notna(v) else "–" for v in rows["finetune_peak_memory_mib"]],
}), hide_index=True, width="stretch")
ui.downloads("smp_compare", rows.reset_index(), result.to_json(), show_table="Every column of this table")
with st.expander("Every run (each random seed separately) and the settings"):
    st.dataframe(pd.DataFrame(result.rows()), hide_index=True)
    st.json(result.config, expanded=False)
