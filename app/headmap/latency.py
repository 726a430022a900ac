"""The Head map's latency panel: dense vs physically pruned, timed interleaved in one call, judged by
``pruning_core.bench.speed_verdict``.

Measurements are kept per session and per mask (never shared between sessions, never cached for
the server), and every figure shown says when and under what load it was measured. A full mask
is never timed or compared: it is the dense model.
"""
from __future__ import annotations

import json

import streamlit as st

from pruning_core.bench import FULL_MASK_TEXT, MASKED_TEXT, speed_verdict
from pruning_core.core.heads import HeadMask

from app.headmap import cache as cache_headmap
from app.core import session_results, state, ui
from app.speed import figures as speed
from app.runtime.work import PENDING, Work, job_board

RESULT = "latency"          # session_results name: {mask key: BenchResult} of this session
KEEP = 16                   # measurements remembered per session
AGAIN_BUTTON = "Measure again"
# what masked latency is: the masked model runs every head and zeroes some, so it costs what dense costs
MASKED_SENTENCE = f"The masked model (heads zeroed, not cut out) does the {MASKED_TEXT}: masking saves no time."


def mask_key(mask: HeadMask) -> str:
    """The key of ``mask``'s measurement in this session's store."""
    return json.dumps(mask.to_json(), sort_keys=True)


def full_mask_note() -> None:
    """What the panel says instead of a latency when every head is kept."""
    st.caption(f"**{FULL_MASK_TEXT[0].upper()}{FULL_MASK_TEXT[1:]}.** Nothing is timed: remove heads to compare "
               "the physically pruned copy with the full model.")


def latency_panel(spec: str, mask: HeadMask, wait: bool = True):
    """Time dense vs pruned for ``mask`` (once per session and mask, or again on request) and show it;
    returns the timing's :class:`app.runtime.work.Work` while it runs and ``wait`` is False, else None."""
    if mask.is_full():
        full_mask_note()
        return None
    stored = measurement(spec, mask, measure=False)
    again = stored is not None and st.button(AGAIN_BUTTON, key=state.widget_key("headmap", "remeasure"),
                                             icon=":material/timer:")
    result = measurement(spec, mask, again=again, wait=wait)
    if result is PENDING:
        return _timing(spec, mask)
    if result is not None:
        show_latency(result)
    return None


def drop_stale_timing(spec: str, mask: HeadMask) -> None:
    """Stop a timing of another mask that is still running (the user has clicked on since): the new mask's
    evaluation then gets the CPU queue at once instead of waiting for a figure nobody will see."""
    board, timing = job_board(), _timing(spec, mask)
    running = board.get(timing.job)
    if running is not None and running.running and not timing.started():
        board.cancel(timing.job)
        board.forget(timing.job)


def _timing(spec: str, mask: HeadMask) -> Work:
    return Work("latency", "Timing dense vs pruned, interleaved", cache_headmap.latency, (spec, mask), start="each_time")


def measurement(spec: str, mask: HeadMask, *, measure: bool = True, again: bool = False, wait: bool = True):
    """This session's latency measurement of ``mask`` (a ``BenchResult``); when there is none (or
    ``again``, or a timing of it not shown yet) and ``measure``, time it now with a progress bar. None if
    absent, failed or cancelled; :data:`app.runtime.work.PENDING` while it runs and ``wait`` is False."""
    store: dict = dict(session_results.get_result(RESULT) or {})
    timing = _timing(spec, mask)
    result = None if again or timing.started() else store.get(mask_key(mask))     # started: not handed out yet
    if result is None and measure and not mask.is_full():
        result = timing.show(wait)
        if result is not None and result is not PENDING:
            store.pop(mask_key(mask), None)
            store[mask_key(mask)] = result
            session_results.set_result(RESULT, dict(list(store.items())[-KEEP:]))
    return result


def show_latency(result, again_button: str = AGAIN_BUTTON) -> None:
    """Median latency with its IQR, the verdict on the speed-up, and when / under what load it was measured;
    ``again_button``: the label of the button beside it that times again (named in the load warning)."""
    size = result.batch_sizes[0]
    dense, pruned = result.row("dense", size).latency, result.row("pruned", size).latency
    verdict = speed_verdict(result, size)
    m1 = m2 = ui.metric_row()
    m1.metric("latency (pruned)", f"{1e3 * pruned.median:.1f} ms",
              f"IQR {1e3 * pruned.q1:.1f}-{1e3 * pruned.q3:.1f} ms", delta_color="off", delta_arrow="off",
              width="content")
    m2.metric("pruned vs dense", verdict.short, verdict.spread, delta_color="normal" if verdict.is_gain else "off",
              delta_arrow="off", width="content")
    st.caption(f"Pruned: {verdict.text}. Dense {1e3 * dense.median:.1f} ms (IQR {1e3 * dense.q1:.1f}-"
               f"{1e3 * dense.q3:.1f}), timed in the same call, interleaved round by round: median of {pruned.n} "
               f"rounds, batch {size} x {result.seq_len} tokens on {result.device} ({result.torch_threads} "
               f"threads); {speed.measured_text(result)}. {MASKED_SENTENCE}")
    if result.busy:
        st.warning("Other processes competed for the CPUs while timing: the latencies are inflated and noisy. "
                   f"Press **{again_button}** on a quieter machine.", icon=":material/speed:")
