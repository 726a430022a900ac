"""The jobs every feature shares, each built by one factory from a :class:`app.core.session.selection.Selection`.

The Head map, the Curves, Share and Model & data pages and the Tour ask for the same scores, evaluations, examples
and baselines: each calls the factory here, so one job name and one set of arguments are spelled once, and a page
finds the job another page started instead of starting a second one. Each :class:`app.runtime.work.Work` carries
its label and time estimate (:mod:`app.model.workload`), so no page sizes a job. A feature's own long jobs live in
its ``jobs.py`` (:mod:`app.curves.jobs`, :mod:`app.attention.jobs`).
"""
from __future__ import annotations

from pruning_core.core.heads import HeadMask

from app.core.session.selection import Selection
from app.model import cache, workload
from app.runtime.work import Start, Work

EVAL_JOB, DENSE_JOB = "eval", "eval_dense"    # one job name each: a page finds the evaluation another started


def scores(sel: Selection, scorer: str, heads: int, start: Start | None = None) -> Work:
    """Every head's importance by ``scorer`` (``heads``: how many, for the time estimate); by default it waits
    for a click when :func:`app.model.workload.waits_for_click` says so."""
    req = workload.score_request(sel, scorer)
    if start is None:
        start = "button" if workload.waits_for_click(req, heads) else "auto"
    return Work(f"score_{scorer}", workload.scoring_label(req, heads), cache.scores, (req,), start=start,
                estimate_s=workload.scoring_seconds(req, heads))


def evaluation(sel: Selection, mask: HeadMask, what: str = "the current mask") -> Work:
    """The evaluation of ``mask`` (:func:`app.model.cache.evaluate`): the Head map's click, the Curves and Share
    pages and the Tour all ask for it under :data:`EVAL_JOB`; only ``what`` the label calls it differs."""
    return Work(EVAL_JOB, workload.evaluation_label(sel, what), cache.evaluate, (sel, mask),
                estimate_s=workload.eval_seconds(sel))


def dense_evaluation(sel: Selection, what: str = "all heads") -> Work:
    """The same with every head kept, under :data:`DENSE_JOB`."""
    return Work(DENSE_JOB, workload.evaluation_label(sel, what), cache.evaluate, (sel, None),
                estimate_s=workload.eval_seconds(sel))


def examples(task_name: str, rows: int) -> Work:
    """The first ``rows`` raw examples of ``task_name``'s evaluation split (:func:`app.model.cache.examples`);
    the job's name holds ``rows``, so two pages asking for different numbers keep both."""
    return Work(f"examples_{task_name}_{rows}", "Reading the task's data", cache.examples, (task_name, rows),
                progress=False)


def unigram(sel: Selection) -> Work:
    """A language model's unigram perplexity on the evaluated tokens (:func:`app.model.cache.unigram_baseline`)."""
    return Work("unigram", "Counting the training tokens (unigram baseline)", cache.unigram_baseline, (sel,),
                progress=False)


def example_outputs(sel: Selection, mask: HeadMask | None, predictions: bool = False) -> Work:
    """Each evaluated example's loss (and with ``predictions`` its prediction) under ``mask``, None for all heads
    (:func:`app.model.cache.example_outputs`): one job per mask and kind of output."""
    which = "dense" if mask is None else "mask"
    label = ("Each example with all heads" if mask is None else "Each example under this mask") if predictions \
        else "Per-example losses"
    return Work(f"{'examples' if predictions else 'losses'}_{which}", label, cache.example_outputs,
                (sel, mask, predictions) if predictions else (sel, mask), estimate_s=workload.eval_seconds(sel))


def roles(sel: Selection, sized: bool = True) -> Work:
    """Every head's role report of ``sel``'s model on its task (:func:`app.model.cache.roles`); it starts by itself
    only when it is cheap, else on a click. ``sized=False``: the same job without its estimate, to look for the
    report without sizing the work (:meth:`app.runtime.work.Work.ready`)."""
    if not sized:
        return Work("roles", "Finding head roles", cache.roles, (sel.without_size(),))
    return Work("roles", workload.roles_label(sel), cache.roles, (sel.without_size(),),
                start="button" if workload.roles_wait_for_click(sel) else "auto", estimate_s=workload.roles_seconds(sel))


__all__ = ["EVAL_JOB", "DENSE_JOB", "scores", "evaluation", "dense_evaluation", "examples", "unigram",
           "example_outputs", "roles"]
