"""Tasks: where the examples come from, how they are tokenised, scored and evaluated.

- :mod:`.batching`: :class:`EncodedData` / :class:`EncodedBatch`, padding, length buckets, the in-memory cache
  of encoded splits;
- :mod:`.base`: the :class:`Task` base class with the one evaluation loop, the task-type registry, and
  :func:`default_score_split` (the one policy for which split heads are scored on);
- :mod:`.classification`, :mod:`.translation`, :mod:`.language_model`, :mod:`.speech`: the task types;
- :mod:`.registry`: task names, :func:`get_task` (``file:PATH``, GLUE, WMT, the embedded default).

The metric functions live in :mod:`pruning_core.evaluation.metrics` (re-exported here for old imports).
"""
from pruning_core.evaluation.metrics import accuracy, binary_f1, matthews_corrcoef
from pruning_core.tasks.base import (
    SCORE_SPLIT,
    TASK_TYPES,
    EvalState,
    Loader,
    Task,
    default_score_split,
    register_task_type,
)
from pruning_core.tasks.batching import (
    CACHE_SIZE,
    IGNORE,
    EncodedBatch,
    EncodedData,
    accepts_argument,
    clear_cache,
    collate_classification,
    tokenize_classification,
)
from pruning_core.tasks.classification import ClassificationTask
from pruning_core.tasks.language_model import LanguageModelTask
from pruning_core.tasks.registry import FILE_PREFIX, TASKS, get_task, register_task, task_names
from pruning_core.tasks.speech import SpeechRecognitionTask
from pruning_core.tasks.translation import TranslationTask

__all__ = [
    "CACHE_SIZE", "FILE_PREFIX", "IGNORE", "SCORE_SPLIT", "TASKS", "TASK_TYPES", "ClassificationTask", "EncodedBatch",
    "EncodedData", "EvalState", "LanguageModelTask", "Loader", "SpeechRecognitionTask", "Task", "TranslationTask", "accepts_argument", "accuracy", "binary_f1",
    "clear_cache", "collate_classification", "default_score_split", "get_task", "matthews_corrcoef", "register_task",
    "register_task_type", "task_names", "tokenize_classification",
]
