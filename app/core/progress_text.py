"""Progress as a reader says it. The library names its stages for programs and the command line's
bars (``curve:gradient``, ``score:smp``, ``prepare:fetch``); the dashboard shows "Pruning curve by
gradient importance: step 1 of 11, 0 of 72 heads removed" instead of "curve:gradient 1/11".

Pure: no Streamlit (:func:`describe` returns the progress bar's fraction and Markdown text).
"""
from __future__ import annotations

from pruning_core.core.progress import ProgressEvent

from app.core.text import md_escape

# stage (before any ":") -> (phrase, what one unit of progress is); "{}" takes the part after the ":"
STAGES: dict[str, tuple[str, str | None]] = {
    "curve": ("Pruning curve by {} importance", "step"),
    "score": ("Scoring heads by {}", "batch"),
    "evaluate": ("Evaluating", "batch"),
    "evaluate-examples": ("Evaluating", "example"),       # an evaluation one example at a time
    "decode": ("Decoding", "token"),                      # greedy decoding, token by token (at most the bound)
    "encode": ("Reading the data", None),
    "ablation": ("Removing one head at a time", "head"),
    "one-per-layer": ("Keeping one head per layer", "evaluation"),
    "kinds": ("Removing a share of one attention kind's heads", "evaluation"),
    "bench": ("Timing", "measurement"),
    "finetune": ("Fine-tuning", "step"),
    "dynamics": ("Training dynamics", "checkpoint"),
    "speech": ("Speaking the sentences (espeak-ng)", "sentence"),
    "smp": ("SMP pruner", "step"),
    "prepare": ("Preparing", "step"),
}


def stage_text(stage: str) -> tuple[str, str | None]:
    """``stage`` as a phrase and the unit it counts: ``"curve:gradient"`` -> ("Pruning curve by
    gradient importance", "step"); a stage not listed in :data:`STAGES` reads as its words."""
    head, _, rest = stage.partition(":")
    phrase, unit = STAGES.get(head, (None, None))
    if phrase is None:
        return stage.replace(":", " ").replace("_", " ").capitalize(), None
    if "{}" in phrase:
        return phrase.format(rest.replace("_", " ") or "score"), unit
    return (f"{phrase} ({rest.replace('_', ' ')})" if rest else phrase), unit


def curve_label(scorer: str) -> str:
    """The label of a pruning-curve job: the same words as its progress, so they are shown once."""
    return stage_text(f"curve:{scorer}")[0]


def about(seconds: float) -> str:
    """An estimate in words: "about 40 s", "about 3 min" (on 2 CPU cores, as every estimate here)."""
    return f"about {seconds:.0f} s" if seconds < 90 else f"about {seconds / 60:.0f} min"


def count_text(n: int, unit: str) -> str:
    """'8 utterances', '16 windows', '1 example': a number of examples named as the model's examples are."""
    return f"{n} {unit}{'s' if n != 1 else ''}"


def describe(event: ProgressEvent | None, label: str) -> tuple[float | None, str]:
    """The progress bar's fraction (None when the total is unknown) and text for ``event`` of the job
    shown as ``label`` (Markdown, kept as given); the stage's phrase is left out when the label starts with it."""
    if event is None:
        return None, label
    phrase, unit = stage_text(event.stage)
    if event.total:
        count = f"{unit + ' ' if unit else ''}{event.done} of {event.total}"
    else:
        count = f"{event.done} done" if event.done else ""
    detail = ", ".join(part for part in (count, event.message) if part)
    what = "" if label.lower().startswith(phrase.lower()) else f" · {md_escape(phrase)}"
    return event.fraction, f"{label}{what}" + (f": {md_escape(detail)}" if detail else "")
