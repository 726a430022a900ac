"""Model & data: choose the model and the task; see the architecture and the unpruned metric."""
import streamlit as st

from app.model import cache, jobs
from app.sidebar import pickers
from app.core import ui, uncertainty, welcome
from app.core.session import state
from app.core.access import task_label
from app.core.text import md_code, md_escape, data_set_names
from app.runtime.work import Work
from pruning_core.core.heads import KIND_LABELS
from pruning_core.modeling.sources import catalog

welcome.show()                      # the landing page: what the tool is for, where to start
ui.page_intro("Model & data", """
Pick the model whose attention heads you want to study and the task it should still do well.
Below you see how the model is built (its **attention kinds**: encoder self-attention; for
translation models also decoder self-attention and encoder-decoder *cross* attention), how many
heads each layer has, how much of the model the attention projections are, and the metric the
model reaches **with all its heads** on the evaluation subset, the baseline for everything else.""")

left, right = st.columns(2, gap="large")
with left:
    pickers.model_picker()
    if cache.not_prepared(state.model_spec()):
        entry = catalog.get(state.model_spec())
        st.warning(f"The prepared model {md_code(entry.name)} ({md_escape(entry.title)}) is not prepared on this "
                   f"machine yet. Preparing it {md_escape(entry.cost)}; the command line is "
                   f"{md_code(entry.command())}.")
        if Work(f"prepare_{entry.name}", f"Preparing {md_code(entry.name)}", cache.prepare_model, (entry.name,),
                start="button").show() is not None:
            st.rerun()
with right:
    pickers.task_picker()

spec, task_name = state.model_spec(), state.task_spec()
arch = pickers.load_architecture(spec)
if arch is None:
    st.stop()
st.subheader(f"Architecture of {md_code(arch.model_id)}")
a = [ui.metric_row()] * 4            # one row that wraps on a narrow screen
a[0].metric("model type", arch.model_type, help=f"a {arch.task_type} model (headprune adapter `{arch.arch}`)")
a[1].metric("attention heads", arch.total_heads)
a[2].metric("parameters", ui.count_text(arch.parameters))
a[3].metric("in attention (q, k, v, out)", f"{100 * arch.attention_share:.1f} %",
            help=f"{ui.count_text(arch.attention_parameters)} parameters in the attention projections")
st.dataframe([{"attention kind": arch.kind_labels[k], "layers": len(rows),
               "heads per layer": ", ".join(map(str, sorted(set(rows)))), "heads": sum(rows)}
              for k, rows in arch.layout.kinds.items()], hide_index=True)
for kind, why in arch.absent_kinds.items():
    st.caption(f"No {KIND_LABELS[kind]} heads: {why}.")
if arch.pruned_heads:
    st.info("This model was already pruned by headprune; removed heads are gone from its weights.")

st.subheader(f"Task {md_code(task_label(task_name))}")
sel = pickers.eval_size_picker("model", narrow=True)
examples = jobs.examples(task_name, 5).show()
if examples is not None:
    about = cache.task_summary(task_name)
    labels = ", ".join(f"{i} = {n}" for i, n in enumerate(about["label_names"] or []))
    st.caption(f"{md_escape(about['description'] or about['task_type'])} · metric: "
               f"{md_escape(ui.metric_label(about['metric_name']))}"
               + (f" · labels: {md_escape(labels)}" if labels else "") + f" · first rows of the {md_code(about['split'])} split:")
    st.dataframe(data_set_names(examples), hide_index=True)      # no server paths
    dense = jobs.dense_evaluation(sel, "the model with all heads").show()
    if dense is not None:
        base = uncertainty.shown(dense, cache.example_unit(sel.model, sel.task))
        st.metric(f"{ui.metric_label(dense.metric_name)} with all heads",
                  uncertainty.unitless(dense.metric_name, base.value),
                  help=f"{base.interval}; mean loss {uncertainty.loss_text(dense.loss)}; {dense.seconds:.2f} s")
        st.caption(f"{md_escape(base.interval)} (the first examples of the {md_code(cache.split_of(task_name))} "
                   "split). Go on to the **Head map** to remove heads.")
        baseline = jobs.unigram(sel).show() \
            if about["task_type"] == "language_model" else None
        if baseline is not None:
            st.caption(uncertainty.unigram_reference(dense, baseline))
