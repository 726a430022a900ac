"""The Share page's session glue: gather this session's analysis from the cached calls (with
progress bars), and restore a loaded analysis into the session. The pure parts are
:mod:`app.share.analysis` (the bundle) and :mod:`app.share.links` (link, zip).
"""
from __future__ import annotations

from dataclasses import dataclass

from pruning_core.core.errors import FormatError, HeadpruneError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.sources import catalog

from app.model import cache, jobs
from app.curves import jobs as curve_jobs
from app.headmap import latency
from app.core.session import notices, session_results, state
from app.core.access import task_label
from app.core.session.selection import Selection
from app.core.text import md_code, md_escape
from app.share.analysis import Analysis, analysis_provenance
from app.runtime.work import job_board


def gather_analysis(sel: Selection, scorer: str, mask: HeadMask, *, curve_scorers: list[str], with_ablation: bool,
                    with_one_per_layer: bool) -> Analysis:
    """The session's analysis, from the same jobs the other pages start (:mod:`app.curves.jobs`: instant
    when they ran already; otherwise computed here with a progress bar). Missing parts are left out."""
    loaded = cache.load(sel.model)
    scores = {}
    for name in dict.fromkeys([scorer, *curve_scorers]):      # slow models: scoring waits for a click here too
        result = jobs.scores(sel, name, loaded.layout.total_heads).show()
        if result is not None:
            scores[name] = result
    curves = computed_curves(loaded, sel.task)         # whatever this session computed, with its own settings
    for name in (n for n in curve_scorers if n not in curves):
        result = curve_jobs.curve(sel, name).show()
        if result is not None:
            curves[name] = result
    evaluation = jobs.evaluation(sel, mask).show()
    dense = jobs.dense_evaluation(sel).show()
    ablation = curve_jobs.ablation(sel).show() if with_ablation else None
    one = curve_jobs.one_per_layer(sel, scorer).show() if with_one_per_layer else None
    bench = session_results.get_result("bench")          # the Speed page's sweep, else the Head map's probe
    if bench is None or bench.mask != mask:
        bench = latency.measurement(sel.model, mask)
    return Analysis(
        model_id=sel.model, layout=loaded.layout, mask=mask, task=sel.task, scorer=scorer,
        weights_sha256=loaded.weights_sha256, eval_size=sel.eval_size, scores=scores, curves=curves,
        evaluation=evaluation, dense_evaluation=dense, ablation=ablation, one_per_layer=one, bench=bench,
        provenance=analysis_provenance(
            loaded, sel.task, {"eval_limit": sel.eval_size, "scorer": scorer,
                               "score_split": _score_split(scores.get(scorer)),
                               "score_seed": 0, "curve_step": curve_jobs.CURVE_STEP, "curve_rescore": False,
                               "curve_seeds": {name: list(curve.seeds) or [0] for name, curve in curves.items()}},
            split=cache.split_of(sel.task), n_examples=(evaluation or dense).n_examples
            if (evaluation or dense) is not None else sel.eval_size))


def computed_curves(loaded, task_name: str) -> dict:
    """The pruning curves this session's jobs computed for this model and task (the Curves page's,
    at whatever step it chose), by scorer."""
    out = {}
    for job, result in job_board().results("curve_").items():
        prov = getattr(result, "provenance", {}) or {}
        if prov.get("weights_sha256") == loaded.weights_sha256 and prov.get("task") == task_name:
            out[job.removeprefix("curve_")] = result
    return out


def _score_split(result) -> str | None:
    """The split ``result`` (a ScoreResult, or None when scoring did not finish) was computed on, as its own
    provenance records it; None when it read no data (random scores) or is missing."""
    return None if result is None else result.provenance.get("split")


@dataclass(frozen=True)
class RestoreTarget:
    """What restoring an analysis switches the session to: a model and a task that go together."""

    model: str
    task: str
    task_from: str                    # where the task comes from, for the preview ("from the file", ...)
    warnings: tuple[str, ...] = ()


def check_restorable(analysis: Analysis) -> RestoreTarget:
    """The model and task restoring ``analysis`` switches to: the file's model (else the session's) and the file's
    task, else the one that goes with that model (the session's when the model is the session's, a prepared
    model's own, else the session's if that model can do it). The model is loaded and the task checked against
    it now, not after Restore.

    Raises:
        HeadpruneError: the model cannot be loaded here (not prepared, unknown), the mask does not fit it, or no
            task that this model can do is known; the message says what to do.
    """
    model = analysis.model_id or state.model_spec()
    warnings = analysis.check_model(cache.architecture(model))
    if analysis.task:
        task, task_from = analysis.task, "from the file"
    elif model == state.model_spec():
        task, task_from = state.task_spec(), "the session's; the file names none"
    elif model in catalog.names():
        task, task_from = catalog.get(model).task, f"the one {model} is prepared for; the file names none"
    else:
        task, task_from = state.task_spec(), "the session's; the file names none"
    try:
        cache.task(task).check_model(cache.load(model))
    except HeadpruneError as exc:
        why = "names" if analysis.task else "names no task, and"
        raise FormatError(f"This file {why} task {task!r}, which model {model!r} cannot be evaluated on: {exc} "
                          f"Choose model {model!r} and one of its tasks on the Model & data page, then restore "
                          "the file again.") from None
    return RestoreTarget(model, task, task_from, tuple(warnings))


def restore_analysis(analysis: Analysis, file_name: str | None = None) -> None:
    """Make ``analysis`` the session's state (model, task, scorer, size, mask); a button callback.

    The model and task are those of :func:`check_restorable`, checked again: a file that cannot be restored
    leaves the session as it was and says why.
    """
    try:
        target = check_restorable(analysis)
    except HeadpruneError as exc:
        notices.add_notice("error", f"The analysis was not restored: {md_escape(exc)}")
        return
    state.restore(model=target.model, task=target.task, scorer=analysis.scorer, mask=analysis.mask,
                  eval_size=analysis.eval_size,
                  source=f"mask restored from {file_name}" if file_name else "mask restored from a file")
    session_results.set_result("analysis", analysis)
    for text in target.warnings:
        notices.add_notice("warning", md_escape(text))
    task = task_label(state.task_spec())
    notices.add_notice("success", f"Restored: model {md_code(target.model)}, task {md_code(task)}, scorer "
                                  f"{md_code(state.scorer_name())}, {analysis.mask.n_kept}/{analysis.mask.n_total} heads kept.")


def check_selection(sel: Selection) -> None:
    """Raise unless the session's model can be evaluated on its task (the Share page offers nothing for a
    state no page can compute)."""
    cache.task(sel.task).check_model(cache.load(sel.model))
