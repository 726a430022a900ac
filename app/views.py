"""Cached calls and session glue for the Attention, Speed and Share pages.

The same pattern as :mod:`app.cache` (kept in its own module because another engineer owns that
file; the two can be merged): ``st.cache_data`` keyed by model spec, text, mask and settings;
arguments named ``_progress`` take the progress callback that :func:`app.ui.run_job` supplies.
The shared model comes from :func:`app.cache.load` and is only read.
"""
from __future__ import annotations

import streamlit as st

from pruning_core.errors import HeadpruneError
from pruning_core.heads import HeadMask
from pruning_core.progress import ProgressCallback

from . import attention, cache, share, state, ui

# Speed sweep settings: few repeats, so a sweep of the default on 2 CPU cores takes ~20-40 s.
SWEEP_WARMUP = 1
SWEEP_REPEATS = 5
SWEEP_MIN_SECONDS = 0.5


# -- Attention page --------------------------------------------------------------------------------
def label_names(task_name: str) -> tuple[str, ...] | None:
    """The task's class names (None when the task has none or cannot be loaded)."""
    try:
        names = getattr(cache.task(task_name), "label_names", None)
    except HeadpruneError:
        return None
    return tuple(names) if names else None


@st.cache_data(show_spinner=False, max_entries=64)
def attention_run(spec: str, text: str, text_b: str | None, mask: HeadMask | None,
                  labels: tuple[str, ...] | None) -> attention.AttentionRun:
    """:func:`app.attention.run_attention` on the shared model, cached per (model, text, mask)."""
    return attention.run_attention(cache.load(spec), text, mask, text_b=text_b, label_names=labels)


@st.cache_data(show_spinner=False, max_entries=64)
def bertviz_html(spec: str, text: str, text_b: str | None, mask: HeadMask | None, labels: tuple[str, ...] | None,
                 view: str, which: str) -> str:
    """The bertviz ``view`` ("head" | "model") of the ``which`` ("dense" | "pruned") model, as offline HTML."""
    run = attention_run(spec, text, text_b, mask, labels)
    return attention.head_view_html(run, which) if view == "head" else attention.model_view_html(run, which)


def show_predictions(run: attention.AttentionRun) -> None:
    """The dense and the pruned model's answer side by side, a warning when they differ, and notes."""
    mask = run.mask
    left, right = st.columns(2)
    for col, name, pred in ((left, "all heads", run.dense_prediction),
                            (right, f"pruned ({mask.n_kept}/{mask.n_total} heads kept)", run.pruned_prediction)):
        top = max((p for _, p in pred.probabilities), default=None)
        col.metric(f"Prediction, {name}", pred.label or "(empty translation)",
                   f"p = {top:.3f}" if top is not None else None, delta_color="off")
    if run.dense_prediction.label != run.pruned_prediction.label:
        st.warning("The mask changes the model's answer for this sentence.")
    notes = [f"The input was cut to its first {attention.MAX_TOKENS} tokens."] if run.truncated else []
    st.caption(" ".join([*notes, *run.notes, f"Computed in {run.seconds:.2f} s."]))


# -- Speed page ------------------------------------------------------------------------------------
def devices() -> list[str]:
    import torch
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


@st.cache_data(show_spinner=False, max_entries=32)
def speed_sweep(spec: str, mask: HeadMask, batch_sizes: tuple[int, ...], seq_len: int, device: str,
                _progress: ProgressCallback | None = None):
    """``pruning_core.bench.benchmark``: dense vs masked vs pruned at each batch size, with the ceiling."""
    from pruning_core import bench

    loaded = cache.load(spec)
    max_pos = getattr(loaded.model.config, "max_position_embeddings", None)
    if max_pos is not None and seq_len > max_pos:
        raise HeadpruneError(f"{seq_len} tokens is more than this model's {max_pos} positions; choose a shorter "
                             "sequence length.")
    return bench.benchmark(loaded, mask, batch_sizes=batch_sizes, seq_len=seq_len, device=device,
                           warmup=SWEEP_WARMUP, repeats=SWEEP_REPEATS, min_seconds=SWEEP_MIN_SECONDS,
                           progress=_progress)


# -- Share page ------------------------------------------------------------------------------------
def gather_analysis(spec: str, task_name: str, scorer: str, limit: int, mask: HeadMask, *,
                    curve_scorers: list[str], with_ablation: bool, with_one_per_layer: bool) -> share.Analysis:
    """The session's analysis, from the same cached calls the other pages make (instant when they
    ran already; otherwise computed here with a progress bar). Missing parts are left out."""
    loaded = cache.load(spec)
    score_limit = cache.score_limit(scorer, limit)
    scores = {}
    for name in dict.fromkeys([scorer, *curve_scorers]):
        result = ui.run_job(f"score_{name}", f"Scoring heads ({name})", cache.scores, spec, task_name, name,
                            cache.score_limit(name, limit))
        if result is not None:
            scores[name] = result
    curves = {}
    for name in curve_scorers:
        result = ui.run_job(f"curve_{name}", f"Pruning curve ({name})", cache.curve, spec, task_name, name, limit,
                            cache.score_limit(name, limit), 0.1, False)
        if result is not None:
            curves[name] = result
    evaluation = ui.run_job("eval", "Evaluating the current mask", cache.evaluate, spec, task_name, limit, mask)
    dense = ui.run_job("eval_dense", "Evaluating all heads", cache.evaluate, spec, task_name, limit, None)
    ablation = ui.run_job("ablation", "Single-head ablation", cache.ablation, spec, task_name, limit) \
        if with_ablation else None
    one = ui.run_job(f"one_{scorer}", "One head per layer", cache.one_per_layer, spec, task_name, limit, scorer,
                     score_limit) if with_one_per_layer else None
    bench = state.get_result("bench")
    if (bench is None or bench.mask != mask) and not mask.is_full():
        bench = ui.run_job("latency", "Timing dense vs pruned", cache.latency, spec, mask)
    elif bench is not None and bench.mask != mask:
        bench = None
    return share.Analysis(
        model_id=spec, layout=loaded.layout, mask=mask, task=task_name, scorer=scorer,
        weights_sha256=loaded.weights_sha256, eval_limit=limit, scores=scores, curves=curves,
        evaluation=evaluation, dense_evaluation=dense, ablation=ablation, one_per_layer=one, bench=bench,
        provenance=share.analysis_provenance(loaded, task_name, {"eval_limit": limit, "scorer": scorer,
                                                                  "curve_step": 0.1, "curve_rescore": False}))


def restore_analysis(analysis: share.Analysis) -> None:
    """Make ``analysis`` the session's state (model, task, scorer, size, mask); a button callback.

    The model named in the file is loaded and checked first: a file for a model of another shape,
    or one that cannot be loaded here, leaves the session as it was and says why.
    """
    target = analysis.model_id or state.model_spec()
    try:
        arch = cache.architecture(target)
        warnings = analysis.check_model(arch)
    except HeadpruneError as exc:
        state.add_notice("error", f"The analysis was not restored: {exc}")
        return
    state.restore(model=target, task=analysis.task, scorer=analysis.scorer, mask=analysis.mask,
                  limit=analysis.eval_limit)
    state.set_result("analysis", analysis)
    for text in warnings:
        state.add_notice("warning", text)
    state.add_notice("success", f"Restored: model `{target}`, task `{state.task_spec()}`, scorer "
                                f"`{state.scorer_name()}`, {analysis.mask.n_kept}/{analysis.mask.n_total} heads kept.")
