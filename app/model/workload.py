"""How much work the dashboard asks of a model: the evaluation size that keeps a click short, what
interval that size buys, how long scoring would take, and which scoring waits for a click.

Costs come from :mod:`pruning_core.bench.budget` (multiply-adds per example from the architecture and the
real example lengths); this module holds the click-sizing policy. A speech model or a language model never starts scoring by itself: its
examples are long (Whisper: 30 s of audio frames each; a language model: windows with a vocabulary
of logits per token), so the page offers a button with a time estimate instead.
"""
from __future__ import annotations

import math

from pruning_core.bench import budget
from pruning_core.modeling.sources import catalog
from pruning_core.core.errors import HeadpruneError
from pruning_core.analysis.roles import get_role, role_names
from pruning_core.analysis.roles.base import kinds_for
from pruning_core.scoring import scorer_info
from pruning_core.evaluation.significance import too_few

from app.core.progress_text import about, count_text
from app.core.session.selection import ScoreRequest, Selection
from app.model import cache

CLICK_SECONDS = 5.0              # a click should show its new metric within this
FORWARD_SHARE = 0.5              # the forward pass's share of a click (the rest: rerun, polling, drawing; docs/FIGURES.md)
CLICK_PASSES = 1                 # forward passes per click: one evaluation gives the metric and each example's loss
LARGEST_DEFAULT_EVAL_SIZE = 128  # a fast model's own evaluation size (encoders reach it)
# The smallest own size: the power of two from which a paired test can tell a change from noise (on
# significance.MIN_PAIRED = 6 or more examples). A slow model's click takes longer rather than showing
# a change no test can judge.
SMALLEST_DEFAULT_EVAL_SIZE = 8
CLICK_TASK_TYPES = ("asr", "language_model")     # scoring these starts on a click, whatever the estimate
AUTO_SCORE_SECONDS = 10.0                          # others too when their estimate is longer than this ...
PREPARED_SCORE_SECONDS = 60.0                      # ... or, on a prepared model, than this: it is scored once
                                                   # for every session and kept on disk (cache.scores)
GRADIENT_PASS = 3                                  # forward + backward ~ 3 forward passes of multiply-adds
SCORE_SECONDS = 60.0                               # a gradient-type scorer's examples: what fits in about a minute
SCORE_SIZE = 512                                   # examples a gradient-type scorer reads at least (ScoreConfig's default)


def default_eval_size(spec: str, task_name: str) -> tuple[int, str]:
    """(the evaluation size of ``spec`` on ``task_name`` when the user chose none: a click in about 5 s on 2
    cores, what one example is called); when the model or the task cannot be read, the largest size and
    "example", so a page can still draw its picker and then say what is wrong."""
    try:
        cost = cache.example_cost(spec, task_name)
    except HeadpruneError:
        return LARGEST_DEFAULT_EVAL_SIZE, cache.UNIT
    return click_eval_size(cost), cost.unit


def click_eval_size(cost: budget.ExampleCost, seconds: float = CLICK_SECONDS * FORWARD_SHARE,
                    passes: int = CLICK_PASSES, rate: float = budget.MACS_PER_SECOND) -> int:
    """The evaluation size (a power of two, :data:`SMALLEST_DEFAULT_EVAL_SIZE` to :data:`LARGEST_DEFAULT_EVAL_SIZE`)
    whose ``passes`` forward passes of examples costing ``cost`` take about ``seconds`` at ``rate``."""
    n = seconds * rate / (passes * max(cost.macs, 1))
    if n < SMALLEST_DEFAULT_EVAL_SIZE:
        return SMALLEST_DEFAULT_EVAL_SIZE
    return int(min(LARGEST_DEFAULT_EVAL_SIZE, 2 ** math.floor(math.log2(n))))


def default_selection(spec: str, task_name: str) -> Selection:
    """What a new session works on for ``spec`` and ``task_name``: the model's :func:`default_eval_size`."""
    return Selection(spec, task_name, default_eval_size(spec, task_name)[0])


def interval_note(n: int, unit: str = "example") -> str:
    """What ``n`` examples buy: the widest 95 % interval of an accuracy on them (p = 0.5), and how to narrow it;
    below :data:`pruning_core.evaluation.significance.MIN_PAIRED`, that no change can be told from noise."""
    if few := too_few(n, unit):
        return few[0].upper() + few[1:] + "."
    half = 100 * 1.96 * 0.5 / math.sqrt(n)
    return (f"{n} {unit}{'s' if n != 1 else ''}: an accuracy is known to within ±{half:.0f} points at worst "
            "(95 %); perplexity and error rates show their own interval. Four times as many halve it, "
            "and take four times as long.")


def score_request(sel: Selection, scorer: str) -> ScoreRequest:
    """The scores ``scorer`` gives on ``sel``, with how many examples it reads: one that evaluates once per head
    reads the evaluated examples, the others at least :data:`SCORE_SIZE`, cut for a costly model to what scores
    in about :data:`SCORE_SECONDS` on 2 cores (Whisper-base: a few dozen utterances, not 200), never below the
    evaluation size or :data:`SMALLEST_DEFAULT_EVAL_SIZE`."""
    info = scorer_info(scorer)
    if info.cost == "per_head":
        return ScoreRequest.of(sel, scorer, sel.eval_size)
    wanted = max(SCORE_SIZE, sel.eval_size)
    try:
        per_example = 0.0 if info.seeded else cache.example_cost(sel.model, sel.task).seconds(1, passes=GRADIENT_PASS)
    except HeadpruneError:
        per_example = 0.0
    fits = int(SCORE_SECONDS // per_example) if per_example > 0 else wanted
    return ScoreRequest.of(sel, scorer, max(min(wanted, fits), min(sel.eval_size, wanted), SMALLEST_DEFAULT_EVAL_SIZE))


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
    return 0.0 if info.seeded else cost.seconds(req.score_size, passes=GRADIENT_PASS)


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


# -- the Curves page's jobs: what each costs, said before it starts ------------------------------------

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


def curve_seconds(sel: Selection, scorer: str, step: float, rescore: bool, heads: int, seeds: int = 1) -> float:
    """Estimated seconds of one pruning curve: its scoring (again at every point with ``rescore``) and one
    evaluation of ``sel.eval_size`` examples per point, for each of ``seeds``."""
    from pruning_core.evaluation.experiments import removal_schedule

    points = len(removal_schedule(heads, step))
    scoring = scoring_seconds(score_request(sel, scorer), heads)
    return seeds * (scoring * (points if rescore else 1) + points * eval_seconds(sel))


def ablation_seconds(sel: Selection, heads: int) -> float:
    """Estimated seconds of the single-head ablation table: one evaluation with all heads and one per head."""
    return (heads + 1) * eval_seconds(sel)


def kinds_evaluations(kinds: int, fractions: int, seeds: int) -> int:
    """Evaluations of the attention-kinds comparison: per kind and share, one least important first and one
    per random seed, plus the one with all heads (the count its progress reaches)."""
    return kinds * fractions * (1 + seeds) + 1


def kinds_seconds(sel: Selection, scorer: str, heads: int, kinds: int, fractions: int, seeds: int) -> float:
    """Estimated seconds of the attention-kinds comparison: the scoring and :func:`kinds_evaluations`."""
    scoring = scoring_seconds(score_request(sel, scorer), heads)
    return scoring + kinds_evaluations(kinds, fractions, seeds) * eval_seconds(sel)


def one_per_layer_seconds(sel: Selection, heads: int, layers: int, scorer: str | None) -> float:
    """Estimated seconds of "one head per layer": by search, one evaluation per head; by a scorer's scores,
    the scoring and one evaluation per layer; plus the evaluations with all heads and with every layer cut."""
    one = eval_seconds(sel)
    if scorer is None:
        return (heads + 2) * one
    return scoring_seconds(score_request(sel, scorer), heads) + (layers + 2) * one
