"""The Curves feature's long jobs, each built by one function from a :class:`app.core.session.selection.Selection`.

The Curves and Share pages and the Tour ask for the same curves and tables: each calls the function here, so one
job name and one set of arguments (the scoring size, the curve's seeds) are spelled once, and a page finds the job
another page started, running or finished, instead of starting a second one. Only what a page shows may differ:
its label and when the job starts (neither is part of the job's identity, :func:`app.runtime.board.identity`).
The shared scores job: :func:`app.model.jobs.scores`.
"""
from __future__ import annotations

from app.core import progress_text
from app.core.session.selection import Selection
from app.curves import cache
from app.model import workload
from app.runtime.work import Start, Work
from pruning_core.evaluation.kinds import FRACTIONS

CURVE_STEP = 0.1        # share of heads removed per curve step, unless a page lets the user choose
KIND_SEEDS = 3          # random orders per share in the attention-kinds comparison


def curve(sel: Selection, scorer: str, step: float = CURVE_STEP, rescore: bool = False,
          start: Start = "auto", heads: int | None = None) -> Work:
    """The pruning curve of ``scorer`` (:func:`app.curves.cache.curve`); given the model's ``heads``, its label
    carries the time estimate (a page that starts it without a button shows the estimate on the bar)."""
    label = progress_text.curve_label(scorer)
    if heads is not None:
        secs = workload.curve_seconds(sel, scorer, step, rescore, heads, cache.curve_seeds(scorer))
        label += f" ({workload.about(secs)} on 2 CPU cores)"
    return Work(f"curve_{scorer}", label, cache.curve,
                (sel, workload.score_request(sel, scorer), step, rescore),
                {"seeds": cache.curve_seeds(scorer)}, start=start)


def ablation(sel: Selection, label: str = "Single-head ablation", start: Start = "auto") -> Work:
    """The single-head ablation table (:func:`app.curves.cache.ablation`)."""
    return Work("ablation", label, cache.ablation, (sel,), start=start)


def one_per_layer(sel: Selection, scorer: str | None, label: str = "One head per layer",
                  start: Start = "auto") -> Work:
    """Each layer reduced to its best head, by ``scorer``'s scores or by search when None
    (:func:`app.curves.cache.one_per_layer`)."""
    req = workload.score_request(sel, scorer) if scorer else None
    return Work(f"one_{scorer}", label, cache.one_per_layer, (sel, req), start=start)


def kinds(sel: Selection, scorer: str, label: str, fractions: tuple[float, ...] = FRACTIONS,
          seeds: int = KIND_SEEDS, start: Start = "auto") -> Work:
    """Michel et al. §5, a share of one attention kind's heads removed at a time, by ``scorer`` and in ``seeds``
    random orders (:func:`app.curves.cache.kind_sensitivity`)."""
    return Work(f"kinds_{scorer}", label, cache.kind_sensitivity,
                (sel, workload.score_request(sel, scorer), fractions, seeds), start=start)


__all__ = ["CURVE_STEP", "KIND_SEEDS", "curve", "ablation", "one_per_layer", "kinds"]
