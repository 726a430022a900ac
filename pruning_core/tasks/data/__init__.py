"""Data sources: where raw examples come from, before any tokenisation.

Every source yields raw examples as plain dicts, in one of four shapes:

- single text classification: ``{"text": str, "label": int}``
- text pair classification:   ``{"text_a": str, "text_b": str, "label": int}``
- translation:                ``{"source": str, "target": str}``
- document (language model):  ``{"text": str}`` (no label)

Labels are class ids ``0..num_labels-1``; the source records the label names. Sources may add
fields of their own (``id``, ``rating``), which the tasks ignore.

- :mod:`.movie_sentiment`: the embedded default data (movie review snippets of Hutto & Gilbert
  2014, shipped inside the ``vaderSentiment`` sdist), fetched and verified by ``headprune prepare``.
- :mod:`.files`: local CSV / TSV / JSONL files.
- :mod:`.hub`: GLUE and WMT through ``datasets.load_dataset`` (needs the Hugging Face hub).
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
