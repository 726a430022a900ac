"""Head map: click heads to remove or restore them, or (a decoder LM's KV cache) switch them between full and
streaming; the metric, size and speed follow."""
import streamlit as st

from app.model import jobs
from app.sidebar import pickers
from app.headmap import kv_mode, panel
from app.core import ui
from app.core.session import state

HEADS_INTRO = """
Each square is one attention head (rows are layers, 0 at the top; columns are heads): **click a head**
to remove or restore it, or use a preset. **Filled squares are kept** and coloured by the chosen
importance score (brighter = more important); **grey crossed squares are removed**. The live panel (beside the map; on a narrow screen below it, with heads kept, metric and loss in a strip
above the map) re-evaluates the model with exactly these heads switched off, and times the
physically smaller model against the full one."""

intro = st.container()          # the title on top, its text known once the map's mode is
arch = pickers.load_architecture(state.model_spec())
kv = arch is not None and kv_mode.mode_picker(arch) == kv_mode.KV  # a decoder LM's key/value heads: full or streaming
with intro:
    ui.page_intro("Head map", kv_mode.INTRO if kv else HEADS_INTRO)
if arch is None:
    st.stop()
if kv:
    kv_mode.show(state.model_spec(), arch, state.task_spec())
    st.stop()
c1, c2, _ = st.columns([2, 1, 2])
with c1:
    scorer = pickers.scorer_picker("headmap")
with c2:
    sel = pickers.eval_size_picker("headmap")
state.current_mask(arch.layout)       # decodes a link's mask: a notice if it does not fit this model ...
ui.show_notices()                     # ... shown here

result = jobs.scores(sel, scorer, arch.layout.total_heads).show()   # slow ones wait for a click
ranking = result.ranking_scores if result is not None else None
panel.show(sel, arch, ranking, scorer)     # a fragment: a click reruns only the map and panel
