"""The Curves feature's long jobs, each built by one function from a :class:`app.core.session.selection.Selection`.

The Curves and Share pages and the Tour ask for the same curves and tables: each calls the function here, so one
job name and one set of arguments (the scoring size, the curve's seeds) are spelled once, and a page finds the job
another page started, running or finished, instead of starting a second one. Each carries its label and time
estimate, sized here beside its factory; only when it starts differs between pages (not part of the job's identity,
:func:`app.runtime.board.identity`). The shared scores job: :func:`app.model.jobs.scores`.
"""
from __future__ import annotations

from app.core import progress_text
from app.core.progress_text import about
from app.core.session.selection import Selection
from app.curves import cache
from app.model import cache as model_cache, jobs as model_jobs, workload
from app.runtime.work import Start, Work
from pruning_core.evaluation.kinds import FRACTIONS

CURVE_STEP = 0.1        # share of heads removed per curve step, unless a page lets the user choose
KIND_SEEDS = 3          # random orders per share in the attention-kinds comparison


def _heads(sel: Selection) -> int:
    return model_cache.architecture(sel.model).total_heads


def _examples(sel: Selection) -> str:
    """'128 examples', '8 utterances': the evaluation size named as the model's examples are."""
    return progress_text.count_text(sel.eval_size, model_cache.example_unit(sel.model, sel.task))


def curve(sel: Selection, scorer: str, step: float = CURVE_STEP, rescore: bool = False,
          start: Start = "auto") -> Work:
    """The pruning curve of ``scorer`` (:func:`app.curves.cache.curve`); its label carries the time estimate, so a
    page that starts it without a button shows the estimate on the bar."""
    seeds = cache.curve_seeds(scorer)
    secs = curve_seconds(sel, scorer, step, rescore, _heads(sel), seeds)
    return Work(f"curve_{scorer}", f"{progress_text.curve_label(scorer)} ({about(secs)} on 2 CPU cores)", cache.curve,
                (sel, workload.score_request(sel, scorer), step, rescore), {"seeds": seeds}, start=start,
                estimate_s=secs)


def ablation(sel: Selection, start: Start = "auto") -> Work:
    """The single-head ablation table (:func:`app.curves.cache.ablation`)."""
    heads = _heads(sel)
    secs = ablation_seconds(sel, heads)
    return Work("ablation", f"Single-head ablation ({heads + 1} evaluations of {_examples(sel)}, "
                            f"{about(secs)} on 2 CPU cores)", cache.ablation, (sel,), start=start, estimate_s=secs)


def one_per_layer(sel: Selection, scorer: str | None, start: Start = "auto") -> Work:
    """Each layer reduced to its best head, by ``scorer``'s scores or by search when None
    (:func:`app.curves.cache.one_per_layer`)."""
    req = workload.score_request(sel, scorer) if scorer else None
    layout = model_cache.architecture(sel.model).layout
    layers = sum(1 for rows in layout.kinds.values() for n in rows if n > 0)
    secs = one_per_layer_seconds(sel, layout.total_heads, layers, scorer)
    return Work(f"one_{scorer}", f"One head per layer ({about(secs)} on 2 CPU cores)", cache.one_per_layer,
                (sel, req), start=start, estimate_s=secs)


def kinds(sel: Selection, scorer: str, fractions: tuple[float, ...] = FRACTIONS, seeds: int = KIND_SEEDS,
          start: Start = "auto") -> Work:
    """Michel et al. §5, a share of one attention kind's heads removed at a time, by ``scorer`` and in ``seeds``
    random orders (:func:`app.curves.cache.kind_sensitivity`)."""
    layout = model_cache.architecture(sel.model).layout
    present = sum(1 for rows in layout.kinds.values() if sum(rows) > 0)
    runs = kinds_evaluations(present, len(fractions), seeds)
    secs = kinds_seconds(sel, scorer, layout.total_heads, present, len(fractions), seeds)
    return Work(f"kinds_{scorer}", f"Attention kinds ({runs} evaluations of {_examples(sel)}, "
                                   f"{about(secs)} on 2 CPU cores)", cache.kind_sensitivity,
                (sel, workload.score_request(sel, scorer), fractions, seeds), start=start, estimate_s=secs)


# -- what each costs, said before it starts ----------------------------------------------------------
def curve_seconds(sel: Selection, scorer: str, step: float, rescore: bool, heads: int, seeds: int = 1) -> float:
    """Estimated seconds of one pruning curve: its scoring (again at every point with ``rescore``) and one
    evaluation of ``sel.eval_size`` examples per point, for each of ``seeds``."""
    from pruning_core.evaluation.experiments import removal_schedule

    points = len(removal_schedule(heads, step))
    scoring = model_jobs.scoring_seconds(workload.score_request(sel, scorer), heads)
    return seeds * (scoring * (points if rescore else 1) + points * model_jobs.eval_seconds(sel))


def ablation_seconds(sel: Selection, heads: int) -> float:
    """Estimated seconds of the single-head ablation table: one evaluation with all heads and one per head."""
    return (heads + 1) * model_jobs.eval_seconds(sel)


def kinds_evaluations(kinds: int, fractions: int, seeds: int) -> int:
    """Evaluations of the attention-kinds comparison: per kind and share, one least important first and one
    per random seed, plus the one with all heads (the count its progress reaches)."""
    return kinds * fractions * (1 + seeds) + 1


def kinds_seconds(sel: Selection, scorer: str, heads: int, kinds: int, fractions: int, seeds: int) -> float:
    """Estimated seconds of the attention-kinds comparison: the scoring and :func:`kinds_evaluations`."""
    scoring = model_jobs.scoring_seconds(workload.score_request(sel, scorer), heads)
    return scoring + kinds_evaluations(kinds, fractions, seeds) * model_jobs.eval_seconds(sel)


def one_per_layer_seconds(sel: Selection, heads: int, layers: int, scorer: str | None) -> float:
    """Estimated seconds of "one head per layer": by search, one evaluation per head; by a scorer's scores,
    the scoring and one evaluation per layer; plus the evaluations with all heads and with every layer cut."""
    one = model_jobs.eval_seconds(sel)
    if scorer is None:
        return (heads + 2) * one
    return model_jobs.scoring_seconds(workload.score_request(sel, scorer), heads) + (layers + 2) * one


__all__ = ["CURVE_STEP", "KIND_SEEDS", "curve", "ablation", "one_per_layer", "kinds", "curve_seconds",
           "ablation_seconds", "kinds_evaluations", "kinds_seconds", "one_per_layer_seconds"]
