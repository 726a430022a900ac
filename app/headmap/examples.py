"""Tables of the per-example view (LIT-style): which examples a mask changes, confusion matrices of
the full model against the masked one and against the gold labels, accuracy / F1 / MCC with their
intervals, and the examples whose loss moved most.

Pure: no Streamlit; takes ``pruning_core.tasks.per_example.ExampleOutputs`` and the evaluated examples
(dicts as read from the task). Values from a file stay plain cell text (dataframes render no
Markdown).
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from pruning_core.evaluation.metrics import get_metric, metric_names
from pruning_core.evaluation.results import EvalResult
from pruning_core.evaluation.significance import compare, evidence

from app.core.uncertainty import change, shown

TEXT_CHARS = 160        # a long text is cut to this many characters in a table cell
SKIP_FIELDS = ("label", "target", "document", "window", "ref", "id", "audio")   # answers, ids, file paths


def clean_text(text: str) -> str:
    """A text as a reader expects it: the backtick some corpora write for an apostrophe ("hasn`t") as one."""
    return text.replace("`", "'")


def example_text(example: dict) -> str:
    """The example's input text(s) (a pair joined by ' ‖ '; ids such as a verse's "43:1:2" left out), cut to
    :data:`TEXT_CHARS`."""
    text = clean_text(" ‖ ".join(str(v) for k, v in example.items() if k not in SKIP_FIELDS and isinstance(v, str)))
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS - 1] + "…"


def sample_rows(dense, pruned) -> list[dict]:
    """The few outputs an evaluation keeps (``EvalResult.extra["samples"]``: translation, speech) of all heads
    (``dense``) and of the mask (``pruned``), one dict per example: "source" (a translation's; "" for audio),
    "gold", "all heads", "this mask" and "changed". Empty when the task keeps none."""
    rows = []
    for a, b in zip(dense.extra.get("samples", ()), pruned.extra.get("samples", ())):
        rows.append({"source": clean_text(str(a.get("source", ""))), "gold": clean_text(str(a["reference"])),
                     "all heads": clean_text(str(a["hypothesis"])), "this mask": clean_text(str(b["hypothesis"])),
                     "changed": a["hypothesis"] != b["hypothesis"]})
    return rows


def is_classes(predictions: Sequence, references: Sequence | None) -> bool:
    """Whether predictions and references are class ids (a confusion matrix and F1 / MCC make sense)."""
    return (bool(predictions) and references is not None and len(references) == len(predictions)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in [*predictions, *references]))


def label_of(value, names: Sequence[str] | None) -> str:
    """A class id as its name ('positive'), or the value itself as text."""
    if names and isinstance(value, int) and 0 <= value < len(names):
        return str(names[value])
    return str(value)


def changed_frame(inputs: Sequence[dict], references: Sequence | None, dense, pruned,
                  names: Sequence[str] | None) -> pd.DataFrame:
    """One row per example whose prediction differs between all heads (``dense``) and the mask
    (``pruned``): its position, text, gold answer, both predictions and both losses."""
    rows = []
    for i, (a, b) in enumerate(zip(dense.predictions, pruned.predictions)):
        if a == b:
            continue
        gold = references[i] if references is not None and i < len(references) else None
        rows.append({"#": i, "text": example_text(inputs[i]) if i < len(inputs) else "",
                     "gold": "" if gold is None else label_of(gold, names),
                     "all heads": label_of(a, names), "this mask": label_of(b, names),
                     "loss, all heads": dense.losses[i] / max(1, dense.weights[i]),
                     "loss, this mask": pruned.losses[i] / max(1, pruned.weights[i])})
    return pd.DataFrame(rows, columns=["#", "text", "gold", "all heads", "this mask", "loss, all heads",
                                       "loss, this mask"])


def confusion_frame(rows: Sequence[int], cols: Sequence[int], names: Sequence[str] | None, row_title: str,
                    col_title: str) -> pd.DataFrame:
    """Counts of (row class, column class) pairs, every class of either side (and of ``names``) shown."""
    n = max([*rows, *cols, len(names or ()) - 1]) + 1
    labels = [label_of(k, names) for k in range(n)]
    counts = [[0] * n for _ in range(n)]
    for r, c in zip(rows, cols):
        counts[r][c] += 1
    frame = pd.DataFrame(counts, index=pd.Index(labels, name=row_title), columns=labels)
    frame.columns.name = col_title
    return frame


def _with_interval(value) -> str:
    """'33 % (18–53 %)' from a :class:`uncertainty.Shown` ('33 %', '95 % interval 18–53 %, 24 examples')."""
    if not value.interval.startswith("95 % interval "):
        return value.value                                  # no interval known
    return f"{value.value} ({value.interval.split(',')[0].removeprefix('95 % interval ')})"


def metric_frame(extra_names: Sequence[str], dense, pruned, references: Sequence) -> pd.DataFrame:
    """Each metric of ``extra_names`` (accuracy, F1, MCC: those the evaluation computed and the
    registry knows) for all heads and for the mask, each with its 95 % interval, and the change
    with its paired interval (exact McNemar for accuracy, paired bootstrap otherwise)."""
    rows, n = [], len(references)
    for name in extra_names:
        if name not in metric_names():
            continue
        metric = get_metric(name)
        if metric.inputs == "loss":
            continue
        results = []
        for out in (dense, pruned):
            kept = evidence(metric, out.predictions, references)
            results.append(EvalResult(name, metric.of(out.predictions, references), out.mean_loss, n, **kept))
        cmp = compare(metric, results[0], results[1], references)
        moved = change(results[0], results[1], cmp)
        # short cells, the test named in the page's caption: at 1366 px the table fits without scrolling
        rows.append({"metric": metric.label,
                     "all heads": _with_interval(shown(results[0])), "this mask": _with_interval(shown(results[1])),
                     "change": moved.text + (" (within noise)" if moved.within_noise else ""),
                     "change, 95 % interval": "" if cmp is None else
                     f"{metric.display(cmp.low):+.1f} to {metric.display(cmp.high):+.1f}"})
    return pd.DataFrame(rows, columns=["metric", "all heads", "this mask", "change", "change, 95 % interval"])


def loss_frame(inputs: Sequence[dict], dense, pruned, top: int = 10) -> pd.DataFrame:
    """The ``top`` examples whose loss (per example, or per target token) grew most under the mask."""
    rows = []
    for i in range(len(dense.losses)):
        a = dense.losses[i] / max(1, dense.weights[i])
        b = pruned.losses[i] / max(1, pruned.weights[i])
        rows.append({"#": i, "text": example_text(inputs[i]) if i < len(inputs) else "", "loss, all heads": a,
                     "loss, this mask": b, "change": b - a})
    rows.sort(key=lambda r: (-r["change"], r["#"]))
    return pd.DataFrame(rows[:top], columns=["#", "text", "loss, all heads", "loss, this mask", "change"])
