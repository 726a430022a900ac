"""Speed: dense vs masked vs physically pruned, over batch sizes, beside the FLOP ceiling."""
import streamlit as st

from app.speed import cache, figures
from app.sidebar import pickers
from app.core import ui
from app.core.text import measured_text
from app.core.session import session_results, state
from app.runtime.work import Work
from pruning_core.bench import MASKED_TEXT

ui.page_intro("Speed", """
Masking a head (multiplying its output by 0) gives the pruned model's answers but **saves no
time**: the head is still computed. Only **physically pruning** it, cutting its rows out of the
query/key/value weights and its columns out of the output projection, makes the model smaller
and faster. This page times the three side by side, round by round so that machine noise hits
them alike, for several batch sizes. The dashed **FLOP ceiling** is the most any implementation
can gain from removing these heads: only the attention shrinks, the feed-forward blocks do not.
Small batches are dominated by fixed overheads, so the gain grows with the batch.""")

spec = state.model_spec()
arch = pickers.load_architecture(spec)
if arch is None:
    st.stop()
mask = state.current_mask(arch.layout)
st.markdown(f"Current mask: **{mask.n_kept} of {mask.n_total} heads kept** (change it on the Head map).")

c = st.columns([3, 1, 1, 1])
sizes = c[0].multiselect("Batch sizes", figures.BATCH_CHOICES,                  # kept across page visits
                         **ui.remembered(state.widget_key("speed", "batches"), [1, 4, 16]))
seq_len = c[1].selectbox("Tokens per sequence", figures.SEQ_LEN_CHOICES,
                         **ui.remembered(state.widget_key("speed", "seq"), figures.SEQ_LEN_CHOICES[2]))
device = c[2].radio("Device", cache.devices(), horizontal=True,
                    **ui.remembered(state.widget_key("speed", "device"), cache.devices()[0]))
run_now = c[3].button("Run the sweep", type="primary", disabled=not sizes or mask.is_full(),
                      key=state.widget_key("speed", "run"))
if mask.is_full():
    st.info("All heads are kept, so there is nothing to compare: remove some heads on the Head map first.")
    st.stop()
settings = (tuple(sorted(sizes)), int(seq_len), device)
sweep = Work("sweep", "Timing dense, masked and pruned", cache.speed_sweep, (spec, mask, *settings),
             start="each_time")
if run_now or sweep.running():        # a sweep started before a visit to another page goes on
    result = sweep.show()
    if result is not None:
        session_results.set_result("bench", result)
result = session_results.get_result("bench")
if result is None:
    st.info("Choose batch sizes and press **Run the sweep** (about half a minute for the default on 2 CPU cores).")
    st.stop()
if result.mask != mask or (result.batch_sizes, result.seq_len, result.device.split(":")[0]) != settings:
    st.warning(f"These numbers are for an earlier mask or settings ({result.mask.n_kept}/{result.mask.n_total} "
               f"heads, batches {list(result.batch_sizes)}, {result.seq_len} tokens, {result.device}). "
               "Press Run the sweep to measure the current ones.")

st.plotly_chart(figures.speed_figure(result), config={"displaylogo": False},
                alt="Throughput of dense, masked and pruned models and the pruned model's speed-up per batch size, "
                    "medians with IQR error bars, with the FLOP ceiling")
st.markdown("**The pruned model, per batch size** (dense and pruned timed in the same call, interleaved):\n"
            + "\n".join(f"- {line}" for line in figures.verdict_lines(result))
            + f"\n\nThe masked model is the {MASKED_TEXT}: its latency is shown, never as a speed-up.")
st.markdown(figures.ceiling_text(result))
if result.busy:
    st.warning("Other processes competed for the CPUs during this sweep: the latencies are inflated and noisy. "
               "Run the sweep again on a quieter machine.", icon=":material/speed:")
st.caption(f"{result.device}, {result.torch_threads} threads, attention `{result.attn_implementation}`, "
           f"synthetic inputs of {result.seq_len} tokens; median of at least {cache.SWEEP_REPEATS} rounds, error "
           f"bars and ranges are interquartile; {measured_text(result)}; "
           f"{figures.memory_text(result)}.")
ui.downloads("speed", figures.speed_table(result), result.to_json())
