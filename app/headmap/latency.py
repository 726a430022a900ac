"""The Head map's latency panel: dense vs physically pruned, timed interleaved in one call, judged by
``pruning_core.bench.speed_verdict``.

Measurements are kept per session and per mask (never shared between sessions, never cached for
the server), and every figure shown says when and under what load it was measured. While a mask is
timed, an estimate from the model's timings made once on this server (:mod:`pruning_core.bench.latency_model`)
is shown, marked as one, until the measurement replaces it. A full mask is never timed or compared: it is the
dense model.
"""
from __future__ import annotations

import datetime as _dt
import json

import streamlit as st

from pruning_core.bench import FULL_MASK_TEXT, MASKED_TEXT, speed_verdict
from pruning_core.core.heads import HeadMask

from app.headmap import cache
from app.core import ui
from app.core.text import measured_text
from app.core.session import session_results, state
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


def latency_panel(spec: str, mask: HeadMask, wait: bool = True, note=None) -> list[Work]:
    """Time dense vs pruned for ``mask`` (once per session and mask, or again on request) and show it, with the
    estimate meanwhile; returns the work still running when ``wait`` is False (the timing, the estimate's
    calibration). The calibration starts with the first mask that removes a head, after its metric (this is called
    then): opening the page starts none, so the first click never queues behind one. ``note``: the panel's "updating" line (an ``st.empty``), cleared once a figure is drawn."""
    if mask.is_full():                  # nothing to estimate: no calibration a first click would queue behind
        _clear(note)
        full_mask_note()
        return []
    calibration = _calibration(spec)
    calibration.begin()                 # once per model and server, after a click's metric: behind it, not before
    stored = measurement(spec, mask, measure=False)
    again = stored is not None and _again_button()
    result = measurement(spec, mask, again=again, wait=wait)
    if result is PENDING:
        model = calibration.ready()
        if model is None:
            return [_timing(spec, mask), calibration]
        _clear(note)
        show_estimate(model, mask)
        return [_timing(spec, mask)]
    _clear(note)
    if result is not None:
        show_latency(result)
        if stored is None:              # measured in this run: the button its text names comes with it
            _again_button()
    return []


def early_latency(spec: str, mask: HeadMask) -> bool:
    """While the metric is computed, ``mask``'s latency as far as it is known without new work: its timing if this
    server has one, else the estimate once the model is calibrated; True when something was drawn."""
    if mask.is_full():
        return False
    stored = measurement(spec, mask, measure=False)
    if stored is not None:
        show_latency(stored)
        return True
    model = _calibration(spec).ready()
    if model is None:
        return False
    show_estimate(model, mask, status="timed after the metric")
    return True


def _again_button() -> bool:
    return st.button(AGAIN_BUTTON, key=state.widget_key("headmap", "remeasure"), icon=":material/timer:")


def _clear(note) -> None:
    if note is not None:
        note.empty()


def _calibration(spec: str) -> Work:
    return Work("latency_model", "Timing this model once for latency estimates", cache.latency_model,
                (spec,))


def show_estimate(model, mask: HeadMask, now: float | None = None, status: str = "measuring this mask…") -> None:
    """The estimated latency of ``mask``'s pruned model, marked as an estimate, until the mask itself is timed;
    ``status``: where that timing is."""
    pruned = model.estimate(mask)
    m1 = m2 = ui.metric_row()
    m1.metric("latency (pruned), estimate", f"≈ {1e3 * pruned:.1f} ms", status, delta_color="off",
              delta_arrow="off", width="content")
    m2.metric("pruned vs dense, estimate", f"≈ {model.speedup(mask):.2f}x", delta_color="off", width="content")
    st.caption(f"**Estimate** until this mask's own timing replaces it: dense {1e3 * model.dense_s:.1f} ms less each "
               f"removed head's share of what its kind cost, from {estimate_source(model, now)}. "
               f"{MASKED_SENTENCE}")


def estimate_source(model, now: float | None = None) -> str:
    """Where an estimate comes from: 'this model timed on this server at 12:01:05 UTC (3 min ago), dense and
    without each kind's heads (batch 8 x 64 tokens, load 1.20)'."""
    age = max(0, int((now if now is not None else _dt.datetime.now(_dt.timezone.utc).timestamp()) - model.measured_at))
    ago = f"{age} s ago" if age < 120 else f"{age // 60} min ago" if age < 7200 else f"{age // 3600} h ago"
    stamp = _dt.datetime.fromtimestamp(model.measured_at, _dt.timezone.utc)
    load = "" if model.load is None else f", load {model.load:.2f}"
    return (f"this model timed on this server at {stamp:%H:%M:%S} UTC ({ago}), dense and without each kind's heads "
            f"(batch {model.batch_size} x {model.seq_len} tokens{load})")


def drop_stale_timing(spec: str, mask: HeadMask) -> None:
    """Stop a timing of another mask that is still running (the user has clicked on since): the new mask's
    evaluation then gets the CPU queue at once instead of waiting for a figure nobody will see."""
    board, timing = job_board(), _timing(spec, mask)
    running = board.get(timing.job)
    if running is not None and running.running and not timing.started():
        board.cancel(timing.job)
        board.forget(timing.job)


def _timing(spec: str, mask: HeadMask) -> Work:
    return Work("latency", "Timing dense vs pruned, interleaved", cache.latency, (spec, mask), start="each_time")


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
               f"threads); {measured_text(result)}. {MASKED_SENTENCE}")
    if result.busy:
        st.warning("Other processes competed for the CPUs while timing: the latencies are inflated and noisy. "
                   f"Press **{again_button}** on a quieter machine.", icon=":material/speed:")
