"""The scores job every feature shares, built from a :class:`app.core.session.selection.Selection`.

The Head map, the Curves and Share pages and the Tour ask for the same scores: each calls :func:`scores`, so one
job name and one set of arguments are spelled once, and a page finds the job another page started instead of
starting a second one. The evaluation of a mask is built beside its cached call, :func:`app.model.cache.evaluation`;
a feature's own long jobs live in its ``jobs.py`` (:mod:`app.curves.jobs`).
"""
from __future__ import annotations

from app.core.session.selection import Selection
from app.model import cache, workload
from app.runtime.work import Start, Work


def scores(sel: Selection, scorer: str, heads: int, start: Start | None = None) -> Work:
    """Every head's importance by ``scorer`` (``heads``: how many, for the time estimate); by default it waits
    for a click when :func:`app.model.workload.waits_for_click` says so."""
    req = workload.score_request(sel, scorer)
    if start is None:
        start = "button" if workload.waits_for_click(req, heads) else "auto"
    return Work(f"score_{scorer}", workload.scoring_label(req, heads), cache.scores, (req,), start=start)


__all__ = ["scores"]
