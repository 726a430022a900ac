"""The Attention feature's shared job: the Attention page and the Tour run the model on a sentence through
:func:`attention_run`, one job name and one set of arguments."""
from __future__ import annotations

from pruning_core.core.heads import HeadMask

from app.attention import cache
from app.runtime.work import Work


def attention_run(spec: str, text: str, text_b: str | None, mask: HeadMask | None, task_name: str) -> Work:
    """Every head's attention map of ``spec`` on ``text`` (and ``text_b``) under ``mask``
    (:func:`app.attention.cache.attention_run`); a full mask is asked as None, so both share one cache entry."""
    masked = None if mask is None or mask.is_full() else mask
    return Work("attention", "Running the model on the sentence", cache.attention_run,
                (spec, text, text_b, masked, cache.label_names(task_name)), progress=False)


__all__ = ["attention_run"]
