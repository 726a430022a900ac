"""The jobs every feature shares, each built by one factory from a :class:`app.core.session.selection.Selection`,
with its label, its time estimate and when it starts.

The Head map, the Curves, Share and Model & data pages and the Tour ask for the same scores, evaluations, examples
and baselines: each calls the factory here, so one job name and one set of arguments are spelled once, and a page
finds the job another page started instead of starting a second one. Each :class:`app.runtime.work.Work` carries
its label and time estimate, sized here beside its factory from the click-sizing policy (:mod:`app.model.workload`),
so no page sizes a job. A speech or language model's scoring and roles never start by themselves: their examples
are long, so the page offers a button with the estimate. A feature's own jobs live in its ``jobs.py``.
"""
from __future__ import annotations

from pruning_core.analysis.roles import get_role, role_names
from pruning_core.analysis.roles.base import kinds_for
from pruning_core.bench import budget
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.sources import catalog
from pruning_core.scoring import scorer_info

from app.core.progress_text import about, count_text
from app.core.session.selection import ScoreRequest, Selection
from app.model import cache, workload
from app.runtime.work import Start, Work

EVAL_JOB, DENSE_JOB = "eval", "eval_dense"    # one job name each: a page finds the evaluation another started
CLICK_TASK_TYPES = ("asr", "language_model")     # scoring these starts on a click, whatever the estimate
AUTO_SCORE_SECONDS = 10.0                          # others too when their estimate is longer than this ...
PREPARED_SCORE_SECONDS = 60.0                      # ... or, on a prepared model, than this: it is scored once
                                                   # for every session and kept on disk (cache.scores)


def scores(sel: Selection, scorer: str, heads: int, start: Start | None = None) -> Work:
    """Every head's importance by ``scorer`` (``heads``: how many, for the time estimate); by default it waits
    for a click when :func:`waits_for_click` says so."""
    req = workload.score_request(sel, scorer)
    if start is None:
        start = "button" if waits_for_click(req, heads) else "auto"
    return Work(f"score_{scorer}", scoring_label(req, heads), cache.scores, (req,), start=start,
                estimate_s=scoring_seconds(req, heads))


def evaluation(sel: Selection, mask: HeadMask, what: str = "the current mask") -> Work:
    """The evaluation of ``mask`` (:func:`app.model.cache.evaluate`): the Head map's click, the Curves and Share
    pages and the Tour all ask for it under :data:`EVAL_JOB`; only ``what`` the label calls it differs."""
    return Work(EVAL_JOB, evaluation_label(sel, what), cache.evaluate, (sel, mask),
                estimate_s=eval_seconds(sel))


def dense_evaluation(sel: Selection, what: str = "all heads") -> Work:
    """The same with every head kept, under :data:`DENSE_JOB`."""
    return Work(DENSE_JOB, evaluation_label(sel, what), cache.evaluate, (sel, None),
                estimate_s=eval_seconds(sel))


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
                (sel, mask, predictions) if predictions else (sel, mask), estimate_s=eval_seconds(sel))


def roles(sel: Selection, sized: bool = True) -> Work:
    """Every head's role report of ``sel``'s model on its task (:func:`app.model.cache.roles`); it starts by itself
    only when it is cheap, else on a click. ``sized=False``: the same job without its estimate, to look for the
    report without sizing the work (:meth:`app.runtime.work.Work.ready`)."""
    if not sized:
        return Work("roles", "Finding head roles", cache.roles, (sel.without_size(),))
    return Work("roles", roles_label(sel), cache.roles, (sel.without_size(),),
                start="button" if roles_wait_for_click(sel) else "auto", estimate_s=roles_seconds(sel))


# -- what each shared job costs, said before it starts ---------------------------------------------
EVAL_ESTIMATE_SECONDS = 5.0      # an evaluation label gives its time estimate from this long up


def evaluation_label(sel: Selection, what: str) -> str:
    """A progress label for one evaluation: "Evaluating this mask on 8 utterances (about 23 s on 2 CPU cores)";
    the count and estimate only from :data:`EVAL_ESTIMATE_SECONDS` up (a click on the default is no wait)."""
    secs = eval_seconds(sel)
    if secs < EVAL_ESTIMATE_SECONDS or sel.eval_size is None:
        return f"Evaluating {what}"
    unit = cache.example_unit(sel.model, sel.task)
    return f"Evaluating {what} on {count_text(sel.eval_size, unit)} ({about(secs)} on 2 CPU cores)"


def eval_seconds(sel: Selection) -> float:
    """Estimated seconds of one evaluation of ``sel`` (0 when the model or task cannot be read)."""
    try:
        return cache.example_cost(sel.model, sel.task).seconds(sel.eval_size)
    except HeadpruneError:
        return 0.0


def scoring_seconds(req: ScoreRequest, heads: int) -> float:
    """Estimated seconds to score every head (``heads`` of them) as ``req`` asks; 0 when the model or task cannot
    be read (the scoring job then fails and shows why, on the page that asked)."""
    try:
        cost = cache.example_cost(req.sel.model, req.sel.task)
    except HeadpruneError:
        return 0.0
    info = scorer_info(req.scorer)
    if info.cost == "per_head":
        return cost.seconds(req.score_size, passes=heads + 1)
    return 0.0 if info.seeded else cost.seconds(req.score_size, passes=workload.GRADIENT_PASS)


def waits_for_click(req: ScoreRequest, heads: int) -> bool:
    """Whether the scoring ``req`` asks for starts only on a click (never by opening a page). Scores kept on disk
    never wait; a prepared model's short scoring starts by itself (once, then kept)."""
    if cache.slow_scorer(req.scorer):
        return True
    if scorer_info(req.scorer).seeded:
        return False                                   # random: no forward pass at all
    if cache.scores_kept(req):
        return False
    if cache.load(req.sel.model).task_type in CLICK_TASK_TYPES:
        return True
    longest = PREPARED_SCORE_SECONDS if req.sel.model in catalog.names() else AUTO_SCORE_SECONDS
    return scoring_seconds(req, heads) > longest


def scoring_label(req: ScoreRequest, heads: int) -> str:
    """The scoring job's label, with its time estimate when it waits for a click."""
    label = f"Scoring heads ({req.scorer})"
    if cache.scores_kept(req):
        return label
    secs = scoring_seconds(req, heads)
    if not waits_for_click(req, heads):
        return label if secs <= AUTO_SCORE_SECONDS else f"{label}, {about(secs)}, once for every session"
    return f"{label}, {about(secs)} on 2 CPU cores"


# -- head roles ------------------------------------------------------------------------------------
# compute_roles' default probes: (sequences, tokens each); the needle prompt is its 256-token haystack
# plus the needle and question, then a few greedy steps
ROLE_PROBES = {"text": (24, 48), "repeated": (10, 101), "needle": (6, 290)}
# seconds per second of multiply-adds of each probe: plain passes run 1.5x their estimate on quiet cores (as
# evaluations do), the needle's greedy steps with their maps about 6x (docs/FIGURES.md, head roles on SmolLM2)
ROLE_OVERHEAD = {"text": 1.5, "repeated": 1.5, "needle": 6.0}
ROLE_FIXED_S = 2.0       # rare-word token counts over 2,000 sentences, scoring every head in Python


def roles_seconds(sel: Selection) -> float:
    """Estimated seconds to find every head's roles (:func:`app.model.cache.roles`) on 2 quiet CPU cores."""
    loaded = cache.load(sel.model)
    probes = {r.probe for r in map(get_role, role_names()) if kinds_for(r, loaded.task_type, loaded.layout.kinds)}
    return ROLE_FIXED_S + sum(ROLE_OVERHEAD[p] * budget.example_cost(loaded, loaded.task_type, ROLE_PROBES[p][1])
                              .seconds(ROLE_PROBES[p][0]) for p in probes)


def roles_wait_for_click(sel: Selection) -> bool:
    """Whether finding head roles starts only on a click: a speech or language model, or over :data:`AUTO_SCORE_SECONDS`."""
    return cache.load(sel.model).task_type in CLICK_TASK_TYPES or roles_seconds(sel) > AUTO_SCORE_SECONDS


def roles_label(sel: Selection) -> str:
    """The roles job's label, with its time estimate when it waits for a click."""
    label = f"Finding head roles ({len(role_names())} roles)"
    if not roles_wait_for_click(sel):
        return label
    secs = roles_seconds(sel)
    return f"{label}, about {f'{secs:.0f} s' if secs < 90 else f'{secs / 60:.0f} min'} on 2 CPU cores"


__all__ = ["EVAL_JOB", "DENSE_JOB", "scores", "evaluation", "dense_evaluation", "examples", "unigram",
           "example_outputs", "roles", "eval_seconds", "evaluation_label", "scoring_seconds", "waits_for_click",
           "scoring_label", "roles_seconds", "roles_wait_for_click", "roles_label"]
