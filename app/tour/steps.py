"""The guided tour for a class: its steps as data, its three models, and the masks each step prepares.

A step is one entry of :data:`STEPS`: a title, one paragraph, the one thing to click, the page that
click opens and the tour models it runs on. What a step computes and draws is
:mod:`app.tour.ui` (one function pair per step name); its state (model, task, mask, step) travels in
an ordinary dashboard link (:mod:`pruning_core.core.io.share_link`, plus ``step``), so a teacher projects a
step and students open the same one. Steps are named, not numbered, so a link stays valid when a step
is added. Pure: no Streamlit, no session state.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from pruning_core.modeling import presets
from pruning_core.modeling.sources import catalog
from pruning_core.evaluation import kinds
from pruning_core.evaluation.experiments import AblationResult, OnePerLayerResult
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.evaluation.metrics import get_metric
from pruning_core.evaluation.results import ScoreResult
from pruning_core.analysis.roles import InductionCheck
from pruning_core.core.io.share_link import build_link

from app.core.text import md_escape
from app.share.links import link_base

SCORER = "gradient"          # the importance every step ranks heads by (one backward pass, no search)
PRUNED_SHARE = 0.5           # the curve, attention and speed steps remove this share of the heads (the
                             # translation step: of the cross-attention heads), least important first
CURVE_STEP = 0.1             # the pruning curve's step, the Curves page's default (so its cache entry is shared)
CURVE_SCORERS = ("gradient", "random")
SENTENCE = "The plot was dull, but the acting was really great."     # the Attention page's own default
LM_MODEL = "smollm2"
MT_MODEL = "bergamot-en-pt"
REPEATED = ("Quiet violet engines hum beneath seven paper lanterns near the harbour. "
            "Quiet violet engines hum beneath seven paper lanterns near the harbour.")   # the induction step's sentence


@dataclass(frozen=True)
class TourModel:
    key: str            # "default" | "smollm2" | "translation": the tour's name for it
    label: str          # what the model picker shows
    spec: str           # the model spec the session switches to
    task: str           # the task it is evaluated on


LM = TourModel("smollm2", "SmolLM2-135M, a language model", LM_MODEL, catalog.get(LM_MODEL).task)
TRANSLATION = TourModel("translation", "Bergamot tiny, English→Portuguese translation", MT_MODEL,
                        catalog.get(MT_MODEL).task)       # encoder self- and cross-attention, no decoder self-attention


def tour_models(default_spec: str, default_task: str) -> tuple[TourModel, ...]:
    """The tour's models: the session default (the embedded MiniLM-L6 on movie-sentiment unless the
    server was started on another), SmolLM2 and the Bergamot translation student, each on its prepared
    task. A server started on SmolLM2 or on the translation model lists it once, as its default, with
    MiniLM-L6 first."""
    others = (LM, TRANSLATION)
    if default_spec in {m.spec for m in others}:
        return (TourModel("default", "MiniLM-L6, movie sentiment", catalog.DEFAULT, catalog.get(catalog.DEFAULT).task),
                *(replace(m, label=f"{m.label} (this server's default)") if m.spec == default_spec else m
                  for m in others))
    first = ("MiniLM-L6, movie sentiment (the default)" if default_spec == catalog.DEFAULT
             else f"{default_spec} (this server's default)")
    return (TourModel("default", first, default_spec, default_task), *others)


@dataclass(frozen=True)
class TourStep:
    name: str                  # the step in a link (``step=``)
    title: str
    paragraph: str             # Markdown: what the class looks at, and why
    click: str                 # Markdown: the one thing to click
    page: str                  # url_path of the page the click opens (app.core.pages)
    models: tuple[str, ...] = ("default", "smollm2", "translation")     # TourModel keys the step runs on
    task_types: tuple[str, ...] = ()                      # the model task types it needs (() = any)
    not_on: str = ""           # Markdown: why it does not run on the other models (or on another task type)
    also: tuple[str, ...] = ()  # url_paths of further pages the click names, each linked after the first


STEPS: tuple[TourStep, ...] = (
    TourStep(
        "one-head", "One head removed",             # completed from the data (one_head_title) once computed
        "Remove any single attention head and measure the model again: for most heads the metric moves by "
        "less than its own uncertainty (Michel, Levy & Neubig 2019, *Are Sixteen Heads Really Better than "
        "One?*). Each cell below is the change of the metric when that head alone is removed; cells marked "
        "n.s. are not significant. The prepared mask removes the head whose removal costs the most.",
        "Open the **Head map** and click any other head: the metric in the live panel barely moves.",
        "head_map", models=("default", "translation"),
        not_on="SmolLM2 has 270 heads: removing each in turn is 270 evaluations, about 8 minutes on 2 CPU cores. "
               "The next step ranks them by importance instead."),
    TourStep(
        "one-per-layer", "One head per layer",
        "Michel et al. went further: reduce a layer to a single head, its most important one. The table shows "
        "each layer reduced alone (the other layers keep every head), beside the model with every layer "
        "reduced at once, the prepared mask. Heads are ranked by gradient importance (one backward pass), "
        "not found by search.",
        "Open the **Head map** and restore one removed head in any row: see how much of the loss it wins back.",
        "head_map"),
    TourStep(
        "curve", "The pruning curve against random",
        "Remove heads a tenth at a time, least important first, and measure after each step: the pruning "
        "curve. Removing them in random order (three seeds: the shaded band) is the baseline an importance "
        "score has to beat. The star is the prepared mask: half of the heads removed by gradient importance.",
        "Open the **Curves** page (the tour computed its curves) and hover over both lines at 50 %: how far apart "
        "are they?",
        "curves"),
    TourStep(
        "translation", "Which attention does translation need most?",
        "A translation model has two kinds of attention: **encoder self-attention**, the English words reading "
        "each other, and **cross-attention**, each Portuguese word being written reading the English sentence. "
        "Michel et al. (§5) removed a share of ONE kind's heads at a time and found cross-attention the most "
        "sensitive. Here too: removed at random (dashed), a few cross-attention heads break the translation; "
        "removed least important first (solid), half of them go at little cost, because gradient importance "
        "finds the few heads that link each Portuguese word to its English words. This tiny distilled student "
        "(Mozilla's Bergamot) is scored by BLEU on Bible verses: low in absolute terms, the drops are what "
        "matter. Its decoder has no self-attention (a recurrence instead), so the right-hand panel borrows that "
        "kind from Whisper-base, a speech model scored by word error rate. The prepared mask: half of the "
        "cross-attention heads removed, least important first, every encoder head kept.",
        "Open the **Head map**, remove a few more cross-attention heads (or restore some) and watch BLEU in the "
        "live panel: each click shows the new loss in about 1.2 s, then translates the 128 evaluation verses "
        "again: the new BLEU in about 2 s, with a few verses translated under it. Every verse, with all heads and "
        "with this mask: the **Per example** page.",
        "head_map", models=("translation",), also=("examples",),
        not_on="The tour's other models have one kind of attention each (MiniLM-L6 encoder self-attention, "
               "SmolLM2 decoder self-attention): there is no other kind to compare. Pick the translation model "
               "above."),
    TourStep(
        "attention", "What the removed heads attended to",
        "Every head's attention on one sentence, the heads the prepared mask keeps on the left and the half "
        "it removes on the right (each square: rows are the tokens that read, columns the tokens read from). "
        "Do the removed heads look different from the kept ones: do more of them look only at the first "
        "token, or spread their attention evenly over the sentence?",
        "Open the **Attention** page, tab **bertviz: head view**, and switch between *all heads* and *pruned*.",
        "attention", models=("default", "smollm2"),
        not_on="The translation model has two kinds of attention over two sentences (the English source and its "
               "Portuguese translation), and this step draws one kind on one sentence. The **Attention** page "
               "shows its maps."),
    TourStep(
        "induction", "An induction head found and removed",
        "Feed a language model a sequence of random tokens twice: it cannot guess the first copy, but from the "
        "second copy's second token on it can copy, and its loss drops sharply. **Induction heads** do the "
        "copying (Olsson et al. 2022): reading a token, they attend to the token that followed its earlier "
        "occurrence. The tour finds them (score: that attention, over 10 repeated random sequences; above the "
        "threshold = an induction head), prepares the mask that removes only them, and measures the loss on "
        "both copies of 20 other random sequences with all heads and without them.",
        "Open the **Attention** page, paste the repeated sentence shown above as its sentence, and choose "
        "*the full model* and *kept | removed*: the removed heads on the right draw a stripe beside the "
        "diagonal in the second half.",
        "attention", task_types=("language_model",),
        not_on="The default MiniLM-L6 is an encoder classifier: every token sees the whole sentence at once and "
               "it never predicts a next token, so there is no second copy to predict and no causal "
               "self-attention for an induction head. The translation model's decoder has no self-attention at "
               "all (an SSRU recurrence instead). Pick SmolLM2 above."),
    TourStep(
        "speed", "The speed a pruned model gains",
        "Masking a head gives the pruned model's answers but saves no time: the head is still computed. "
        "Cutting it out of the weights makes the model smaller. The parameters and the FLOP ceiling below are "
        "arithmetic (the ceiling is the most any implementation can gain: the feed-forward blocks do not "
        "shrink); the latency is measured on this server when you press the button, dense and pruned timed "
        "in the same call, round by round, with the machine's load beside it.",
        "Press **Time dense vs pruned**; then open the **Speed** page for a sweep over batch sizes.",
        "speed"),
)


def runs_on(current: TourStep, models: tuple[TourModel, ...]) -> str:
    """The sentence that names the models ``current`` runs on, by their picker labels."""
    names = [f"**{md_escape(m.label)}**" for m in models if m.key in current.models]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"This step runs on {listed}."


def step(name: str | None) -> TourStep:
    """The step called ``name``; the first step when ``name`` is None or unknown (an old link)."""
    return next((s for s in STEPS if s.name == name), STEPS[0])


def neighbours(current: TourStep) -> tuple[TourStep | None, TourStep | None]:
    """(previous step, next step), None at either end."""
    i = STEPS.index(current)
    return (STEPS[i - 1] if i > 0 else None), (STEPS[i + 1] if i + 1 < len(STEPS) else None)


def step_link(current_url: str | None, params: Mapping[str, str]) -> str:
    """The link that opens the Tour page on a step's state: ``params`` are the session's share
    parameters (model, task, scorer, size, mask and ``step``), as the address bar shows them."""
    return build_link(link_base(current_url, "tour"), params)


# -- the mask each step prepares -------------------------------------------------------------------
def costliest_head(table: AblationResult) -> tuple[str, int, int]:
    """The head whose removal alone hurts the metric most (ties: the larger loss increase)."""
    metric = get_metric(table.metric_name)
    worst = min(table.rows, key=lambda r: (metric.sort_key(r.metric), -r.delta_loss))
    return worst.kind, worst.layer, worst.head


def one_head_title(table: AblationResult, base: str, worst: str) -> str:
    """Step 1's title told by its table: how many heads change the metric significantly on their own (Holm-corrected)
    and what the costliest one does (``base`` and ``worst``: the metric with all heads and without that head, as the
    caption shows them). A model where many heads matter is not told that one head changes little."""
    label = get_metric(table.metric_name).label
    significant = sum(bool(r.significant) for r in table.rows)
    if significant == 0:
        return f"One head removed: none of the {len(table.rows)} changes {label} significantly"
    return (f"One head removed: {significant} of {len(table.rows)} change {label} significantly, "
            f"the costliest takes it from {base} to {worst}")


def one_head_removed(table: AblationResult, layout: HeadLayout) -> HeadMask:
    """Every head kept but :func:`costliest_head`."""
    return HeadMask.from_removed(layout, [costliest_head(table)])


def best_head_per_layer(result: OnePerLayerResult, layout: HeadLayout) -> HeadMask:
    """Every layer reduced to the head ``result`` kept in it (all layers at once)."""
    kept = {(r.kind, r.layer): r.kept_head for r in result.rows}
    return HeadMask.from_removed(layout, [(k, l, h) for k, l, h in layout.heads() if kept.get((k, l), h) != h])


def half_removed(scores: ScoreResult) -> HeadMask:
    """:data:`PRUNED_SHARE` of the heads removed, lowest importance first (over all layers)."""
    return presets.remove_least_important(scores.ranking_scores, PRUNED_SHARE)


def half_cross_removed(scores: ScoreResult) -> HeadMask:
    """:data:`PRUNED_SHARE` of the cross-attention heads removed, lowest importance first, every other head
    kept: the heads the Attention kinds comparison removes at that share."""
    ranking = scores.ranking_scores
    return HeadMask.from_removed(ranking.layout, kinds.least_important_of_kind(ranking, "cross", PRUNED_SHARE))


# -- the induction step's tables -------------------------------------------------------------------
def induction_heads_rows(check: InductionCheck) -> list[dict]:
    """One row per detected induction head, highest score first."""
    return [{"Layer": layer, "Head": head, "Induction score": round(float(check.scores[layer, head]), 3)}
            for _, layer, head in check.heads]


def copy_loss_rows(check: InductionCheck) -> list[dict]:
    """The loss on each copy (nats per token) and the drop, with all heads and with the induction heads removed."""
    return [{"Heads": name, "Loss, first copy (nats)": round(c.mean_first, 2),
             "Loss, second copy (nats)": round(c.mean_second, 2), "Drop (nats)": round(c.drop, 2)}
            for name, c in (("all heads", check.all_heads),
                            (f"{len(check.heads)} induction heads removed", check.removed))]
