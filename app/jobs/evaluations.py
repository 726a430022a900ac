"""The two evaluations pages share, described once as :class:`app.jobs.work.Work`.

The Head map's click, the Curves and Share pages and the Tour all ask for "the current mask's metric" and
"the metric with all heads". Under one job name each (:data:`EVAL_JOB`, :data:`DENSE_JOB`), a page finds the
evaluation another page started, running or finished, instead of starting it again; only the label a page
shows differs.
"""
from __future__ import annotations

from pruning_core.core.heads import HeadMask

from app.jobs import cache
from app.jobs.work import Work

EVAL_JOB, DENSE_JOB = "eval", "eval_dense"


def of_mask(spec: str, task_name: str, limit: int | None, mask: HeadMask,
            label: str = "Evaluating the current mask") -> Work:
    """The metric, loss and per-example results of ``mask`` (:func:`app.jobs.cache.evaluate`)."""
    return Work(EVAL_JOB, label, cache.evaluate, (spec, task_name, limit, mask))


def of_all_heads(spec: str, task_name: str, limit: int | None, label: str = "Evaluating all heads") -> Work:
    """The same with every head kept."""
    return Work(DENSE_JOB, label, cache.evaluate, (spec, task_name, limit, None))


__all__ = ["EVAL_JOB", "DENSE_JOB", "of_mask", "of_all_heads"]
