"""How many examples the dashboard asks of a model: the evaluation size that keeps a click short, what interval
that size buys, and how many examples a scorer reads.

Costs come from :mod:`pruning_core.bench.budget` (multiply-adds per example from the architecture and the real
example lengths); this module holds the click-sizing policy. How long each job then takes, and whether it waits for
a click, is said by the factory that builds it, beside the job (:mod:`app.model.jobs`, :mod:`app.curves.jobs`).
"""
from __future__ import annotations

import math

from pruning_core.bench import budget
from pruning_core.core.errors import HeadpruneError
from pruning_core.scoring import scorer_info
from pruning_core.evaluation.significance import too_few

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
