"""Data sources: where raw examples come from, before any tokenisation.

Every source yields plain dicts in one of four shapes: ``{"text", "label"}`` (classification), ``{"text_a",
"text_b", "label"}`` (pairs), ``{"source", "target"}`` (translation) or ``{"text"}`` (documents for a language
model). Labels are class ids ``0..num_labels-1`` whose names the source records; extra fields are ignored.
Sources: :mod:`.movie_sentiment` (the embedded default data, fetched by ``headprune prepare``), :mod:`.files`
(local CSV / TSV / JSONL / text), :mod:`.hub` (GLUE and WMT through ``datasets``), and the prepared sets of
:mod:`.bible`, :mod:`.speech` and :mod:`.ruler`.
"""
from __future__ import annotations

SHAPES: dict[str, tuple[str, ...]] = {
    "text": ("text", "label"),
    "pair": ("text_a", "text_b", "label"),
    "translation": ("source", "target"),
    "document": ("text",),
}
# the task type (a pruning_core.tasks.TASK_TYPES name) of each shape
SHAPE_TASK_TYPES: dict[str, str] = {"text": "classification", "pair": "classification",
                                    "translation": "translation", "document": "language_model"}
