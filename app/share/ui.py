"""The Share page's session glue: gather this session's analysis from the cached calls (with
progress bars), and restore a loaded analysis into the session. The pure parts are
:mod:`app.share.analysis` (the bundle) and :mod:`app.share.links` (link, zip).
"""
from __future__ import annotations

from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask

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


def check_restorable(analysis: Analysis) -> list[str]:
    """Check ``analysis`` against the model it would be restored on (the file's model, else the
    session's); returns warnings. Raises HeadpruneError naming the mismatch (wrong shape, other
    weights) or why that model cannot be loaded here."""
    return analysis.check_model(cache.architecture(analysis.model_id or state.model_spec()))


def restore_analysis(analysis: Analysis, file_name: str | None = None) -> None:
    """Make ``analysis`` the session's state (model, task, scorer, size, mask); a button callback.

    The model named in the file is loaded and checked first: a file for a model of another shape,
    or one that cannot be loaded here, leaves the session as it was and says why.
    """
    target = analysis.model_id or state.model_spec()
    try:
        warnings = check_restorable(analysis)
    except HeadpruneError as exc:
        notices.add_notice("error", f"The analysis was not restored: {md_escape(exc)}")
        return
    state.restore(model=target, task=analysis.task, scorer=analysis.scorer, mask=analysis.mask,
                  eval_size=analysis.eval_size,
                  source=f"mask restored from {file_name}" if file_name else "mask restored from a file")
    session_results.set_result("analysis", analysis)
    for text in warnings:
        notices.add_notice("warning", md_escape(text))
    task = task_label(state.task_spec())
    notices.add_notice("success", f"Restored: model {md_code(target)}, task {md_code(task)}, scorer "
                                  f"{md_code(state.scorer_name())}, {analysis.mask.n_kept}/{analysis.mask.n_total} heads kept.")
