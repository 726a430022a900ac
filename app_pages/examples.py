"""Per example: which answers the current mask changes, confusion matrices, accuracy / F1 / MCC."""
import streamlit as st

from app.model import cache, jobs
from app.sidebar import pickers
from app.attention import cache as cache_attention
from app.core import ui
from app.core.session import state
from app.headmap import examples

ui.page_intro("Per example", """
What the current mask (from the Head map) does **example by example**: the examples whose answer
changes when these heads are removed, with the gold answer and both predictions; for a classifier,
confusion matrices of the full model against the masked one and of the gold labels against the
masked model, and accuracy, F1 and MCC with 95 % intervals; and the examples whose loss grew most.""")

spec, task_name = state.model_spec(), state.task_spec()
arch = pickers.load_architecture(spec)
if arch is None:
    st.stop()
sel = pickers.eval_size_picker("examples", narrow=True)
mask = state.current_mask(arch.layout)
ui.show_notices()
if mask.is_full():
    st.info("All heads are kept, so every answer is the full model's: remove heads on the Head map first.")
    st.stop()

# fixed widths so a table of long texts fits the page (a cut cell shows whole on hover) instead
# of scrolling sideways; losses keep 3 decimals
COLUMNS = {"#": st.column_config.NumberColumn(width=40), "text": st.column_config.TextColumn(width=340),
           "gold": st.column_config.TextColumn(width=80),
           "all heads": st.column_config.TextColumn(width=110), "this mask": st.column_config.TextColumn(width=110),
           **{c: st.column_config.NumberColumn(width=100, format="%.3f")
              for c in ("loss, all heads", "loss, this mask", "change")}}
dense = jobs.example_outputs(sel, None, predictions=True).show()
pruned = jobs.example_outputs(sel, mask, predictions=True).show()
if dense is None or pruned is None:
    st.stop()
inputs, references = cache.example_inputs(sel), cache.references(sel)
names = cache_attention.label_names(task_name)
ev = cache.evaluate(sel, mask)
classes = examples.is_classes(list(dense.predictions), references)

changed = examples.changed_frame(inputs, references, dense, pruned, names)
st.subheader(f"Answers changed by the mask: {len(changed)} of {len(dense.losses)} examples")
st.caption(f"Mask: {mask.n_kept} of {mask.n_total} heads kept. The first {len(dense.losses)} examples of the "
           f"evaluation split; loss per example (per target token for texts).")
if classes:
    st.dataframe(changed, hide_index=True, height=min(420, 38 + 35 * max(1, len(changed))), width="stretch",
                 column_config=COLUMNS)
elif any(isinstance(p, str) for p in dense.predictions):        # texts: every line whole, wrapped, not cut
    st.table(changed.set_index("#"))
else:
    st.info("This task's predictions are not answers (a language model's prediction of each window is its loss), "
            "so no answer can change; the loss change per window is below.")

if classes:
    st.subheader("Accuracy, F1 and MCC")
    st.dataframe(examples.metric_frame(list(ev.extra), dense, pruned, references), hide_index=True)
    st.caption("Each value with its 95 % interval in brackets (Wilson for accuracy, bootstrap over examples for F1 "
               "and MCC); the change with its paired 95 % interval (exact McNemar test for accuracy, paired "
               "bootstrap over examples otherwise). F1 is for class 1 and only for two classes.")
    left, right = st.columns(2)
    with left:
        st.markdown("**All heads (rows) → this mask (columns)**")
        st.dataframe(examples.confusion_frame(list(dense.predictions), list(pruned.predictions), names,
                                          "all heads", "this mask"))
    with right:
        st.markdown("**Gold (rows) → this mask (columns)**")
        st.dataframe(examples.confusion_frame(list(references), list(pruned.predictions), names, "gold", "this mask"))
else:
    st.caption("Confusion matrices, F1 and MCC need class labels; this task's answers are texts or losses. "
               "Its metric and interval are on the Head map.")

st.subheader("Largest loss increases")
st.dataframe(examples.loss_frame(inputs, dense, pruned), hide_index=True, width="stretch", column_config=COLUMNS)
