"""The Head map's cached calls: the live panel's latency probe, the pruned copies it times, the latency estimate,
the repaired metric and the KV-cache mode's evaluation of a policy. The rules of :mod:`app.model.cache` hold; a mask's timing is never cached (it belongs to its
moment and machine load), so :mod:`app.headmap.latency` keeps it per session and shows when and under what load it
was made. The estimate's timings are made once per model and server, and say when."""
from __future__ import annotations

import dataclasses

import streamlit as st

from app.core.session.selection import Selection
from app.model.cache import EVAL_BATCH, context_data, data, load, score_split_of, task, timing
from app.runtime import board
from pruning_core import bench
from pruning_core.bench.latency_model import LatencyModel, calibrate
from pruning_core.core.heads import HeadMask
from pruning_core.core.progress import ProgressCallback
from pruning_core.evaluation.results import EvalResult
from pruning_core.modeling import pruning
from pruning_core.modeling.kv import kv_policy

LATENCY_BATCH = 8        # the live panel's latency probe: up to 8 sequences ...
LATENCY_SEQ_LEN = 64     # ... of 64 tokens, dense vs physically pruned
PROBE_FLOP = 40e9        # ... as many sequences as keep one call within about this many FLOP (2 x parameters x tokens)
PROBE_MIN_TOKENS = 16    # ... and where one sequence of 64 is more, one as long as fits (Qwen2.5-0.5B 40), not shorter
LATENCY_WARMUP = 0       # no untimed round: a pruned copy's first call costs what its next do (a median 0.87 to 1.03
                         # times, at most 1.18: benchmarks/first_call.py), and a median of three rounds or more leaves
                         # one such call out
LATENCY_ROUNDS = 7       # interleaved rounds at least (more until the timing harness's minimum time) ...
LATENCY_BUDGET_S = 2.0   # ... or fewer (three at least) once this much time is timed: a slow model's figure in seconds
PRUNED_COPIES = 4        # pruned copies kept for timing (one per mask, shared by the sessions)
REPAIR_CALIBRATION = 128 # score-split examples the live panel's repair toggle tunes on


def latency(spec: str, mask: HeadMask, _progress: ProgressCallback | None = None):
    """Dense vs physically pruned latency of the current mask (``pruning_core.bench``), one small probe,
    measured now: the two variants the panel shows, interleaved in the same call, several rounds,
    the pruned copy from :func:`pruned_model`. Queued behind any evaluation a session waits for, and
    before each timed call it lets through evaluations that arrived meanwhile (:data:`app.runtime.board.GATE`).
    Deliberately not cached: a timing belongs to its moment and machine load, so
    :mod:`app.headmap.latency` keeps it per session and shows when and under what load it was made."""
    with board.GATE.hold(urgent=False, progress=_progress, what="latency"):
        loaded = timing(spec)       # made in the queue: the first timing copies the model once (Qwen: ~2 GB)
        batch, seq_len = probe_shape(loaded)
        return bench.benchmark(loaded, mask, batch_sizes=(batch,), seq_len=seq_len,
                               device=str(loaded.device), warmup=LATENCY_WARMUP, repeats=LATENCY_ROUNDS,
                               min_seconds=0.5, measure_memory=False,
                               max_seconds=LATENCY_BUDGET_S, progress=_progress,
                               pause=board.pausing(_progress, "latency"),   # clicks go first
                               variants=("dense", "pruned"), pruned=pruned_model(spec, mask))


def probe_shape(loaded) -> tuple[int, int]:
    """The latency probe's (batch, tokens): 64 tokens, in as many sequences (8 at most) as keep a call within
    :data:`PROBE_FLOP` (the default and Bergamot 8, SmolLM2 2); a model for which one such sequence is more reads
    one shorter sequence (Qwen2.5-0.5B 1 x 40; :data:`PROBE_MIN_TOKENS` at least): three rounds of dense and pruned
    calls then fit the measured latency's few seconds on a slower CPU too. A speech model reads all its audio
    frames (Whisper: 30 s), so one utterance is the probe."""
    seq_len = min(LATENCY_SEQ_LEN, bench.text_positions(loaded.model.config) or LATENCY_SEQ_LEN)
    if bench.audio_frames(loaded.model.config):
        return 1, seq_len
    per_token = 2 * pruning.parameter_count(loaded.model)
    batch = int(PROBE_FLOP // (per_token * seq_len))
    if batch >= 1:
        return min(LATENCY_BATCH, batch), seq_len
    return 1, min(seq_len, max(PROBE_MIN_TOKENS, int(PROBE_FLOP // per_token)))


@st.cache_resource(show_spinner=False, max_entries=8)
def latency_model(spec: str, _progress: ProgressCallback | None = None) -> LatencyModel:
    """``spec``'s latency estimate on this server (:mod:`pruning_core.bench.latency_model`): the probe timed once,
    dense and without each kind's heads, shared by every session (the panel says when it was timed). Idle work:
    clicks and the masks' own timings go first, before each of its timed calls (it serves later clicks, so the
    first click's latency never waits for it)."""
    with board.GATE.hold(urgent=False, idle=True, progress=_progress, what="latency estimate"):
        loaded = timing(spec)
        batch, seq_len = probe_shape(loaded)
        return calibrate(loaded, batch_size=batch, seq_len=seq_len, max_seconds=LATENCY_BUDGET_S, progress=_progress,
                         pause=board.pausing(_progress, "latency estimate", idle=True))


@st.cache_resource(show_spinner=False, max_entries=PRUNED_COPIES)
def pruned_model(spec: str, mask: HeadMask):
    """The physically pruned copy of ``spec``'s timing model under ``mask`` (``pruning.prune_heads`` of
    :func:`app.model.cache.timing`: a new model, the shared one untouched), made once per mask and shared
    read-only by every session's timing; at most :data:`PRUNED_COPIES` are kept, each costing only its sliced
    attention projections (the rest are the timing model's own tensors: ``share_weights``)."""
    return pruning.prune_heads(timing(spec).model, mask, share_weights=True).eval()


@st.cache_data(show_spinner=False, max_entries=64)
def repaired_evaluation(sel: Selection, mask: HeadMask, _progress: ProgressCallback | None = None) -> EvalResult:
    """``mask``'s metric after least-squares repair (``pruning_core.compress``) tuned on the first
    :data:`REPAIR_CALIBRATION` score-split examples. Background work: clicks go first, also between layers."""
    from pruning_core.compress import evaluate_repaired  # the path `curve --repair` and the benchmarks take
    with board.GATE.hold(urgent=False, progress=_progress, what="repair"):
        loaded, found = load(sel.model), task(sel.task)
        calibration = found.encode(loaded, score_split_of(sel.task), REPAIR_CALIBRATION)
        fixed, _ = evaluate_repaired(loaded, found, data(sel), mask, calibration,
                                     bias_compensation=True, batch_size=EVAL_BATCH,
                                     progress=board.yielding(_progress, "repair"))
        return fixed


@st.cache_data(show_spinner=False, max_entries=64)
def kv_evaluation(sel: Selection, context: int, policy: kv_policy.KVPolicy,
                  _progress: ProgressCallback | None = None) -> EvalResult:
    """Exact-match accuracy of the long-context task ``sel.task`` at ``context`` tokens under ``policy`` (every head
    kept), as ``headprune evaluate --context --kv-policy`` computes it: the task's own evaluation inside
    :func:`pruning_core.modeling.kv.kv_policy.applied`. Long work: the clicks of other sessions go first, also between
    its examples."""
    with board.GATE.hold(urgent=False, progress=_progress, what="long-context evaluation"):
        loaded = load(sel.model)
        with kv_policy.applied(loaded, policy):
            return task(sel.task).evaluate(loaded, context_data(sel, context), None, batch_size=1,
                                           progress=board.yielding(_per_example(_progress), "long-context evaluation"))


def _per_example(progress: ProgressCallback | None) -> ProgressCallback | None:
    """``progress`` with the evaluation's batches of one counted as examples."""
    if progress is None:
        return None
    return lambda e: progress(dataclasses.replace(e, stage="evaluate-examples") if e.stage == "evaluate" else e)
