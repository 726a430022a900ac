"""The audio-alignment role: speech cross-attention heads whose attention follows the audio in time (Whisper's
``alignment_heads``, the heads its word timestamps read).

On the ``text`` probe a speech model hears a sentence spoken by espeak-ng and reads its transcript teacher-forced.
The transcript is laid over the voiced frames monotonically, each token a stretch proportional to its characters
(espeak-ng speaks at an even rate); the query that predicts token ``j`` (decoder position ``prompt + j - 1``)
should peak on token ``j``'s stretch. Score: per head, the share of the transcript's tokens whose query puts its
largest attention weight on a frame of that token's stretch, averaged over the sentences (a head that follows the
speech scores near 1; one parked on a frame, or spread evenly, near 0).
:func:`listed_alignment_heads` reads the model's own list to compare with (``generation_config.alignment_heads``).
"""
from __future__ import annotations

import numpy as np

from pruning_core.analysis.roles.base import MeanOverSequences, ProbeSequence, Role, register_role

def bands(marks: dict, keys: int) -> np.ndarray:
    """``[tokens, keys]`` True on the frames the monotonic, character-proportional alignment gives each
    transcript token."""
    first, end = marks["speech"]
    chars = np.asarray(marks["chars"], dtype=float)
    edges = first + (end - first) * np.concatenate([[0.0], np.cumsum(chars)]) / chars.sum()     # [tokens + 1]
    frame = np.arange(keys)[None, :]
    return (frame >= np.floor(edges[:-1, None])) & (frame < np.ceil(edges[1:, None]))


def alignment(seq: ProbeSequence, a: np.ndarray) -> np.ndarray | None:
    """Per head, the share of transcript tokens whose predicting query peaks on the token's stretch of frames.

    ``a``: ``[heads, T_q, T_k]`` cross-attention (queries: decoder positions, keys: encoder frames)."""
    marks = seq.marks
    if "speech" not in marks or not marks["chars"]:
        return None
    rows = marks["prompt"] - 1 + np.arange(len(marks["chars"]))          # the query predicting each token
    keep = (rows >= 0) & (rows < a.shape[1])
    if not keep.any():
        return None
    band = bands(marks, a.shape[2])[keep]                                  # [tokens, T_k]
    peaks = a[:, rows[keep]].argmax(axis=2)                                # [heads, tokens]
    return np.take_along_axis(band[None].repeat(a.shape[0], 0), peaks[..., None], axis=2)[..., 0].mean(axis=1)


def listed_alignment_heads(loaded) -> list[tuple[int, int]] | None:
    """The model's own alignment heads ``[(decoder layer, head), ...]`` (its generation config's
    ``alignment_heads``: Whisper's, for word timestamps), or None when it lists none."""
    listed = getattr(getattr(loaded.model, "generation_config", None), "alignment_heads", None)
    return [(int(layer), int(head)) for layer, head in listed] if listed else None


def top_heads(scores: np.ndarray, k: int) -> list[tuple[int, int]]:
    """The ``k`` heads ``(layer, head)`` of highest score in a ``[layers, heads]`` grid (NaN last; ties by
    position)."""
    flat = np.where(np.isnan(scores), -np.inf, scores).ravel()
    order = sorted(range(flat.size), key=lambda i: (-flat[i], i))[:k]
    return [(i // scores.shape[1], i % scores.shape[1]) for i in order]


def compare_listed(scores: np.ndarray, listed: list[tuple[int, int]]) -> dict:
    """The detector's top ``len(listed)`` heads beside the listed ones: ``{"top", "listed", "hits",
    "precision"}``."""
    top = top_heads(scores, len(listed))
    hits = sorted(set(top) & set(listed))
    return {"top": top, "listed": list(listed), "hits": hits, "precision": len(hits) / len(listed)}


register_role(Role("alignment", "audio alignment (follows the speech in time)", "text", 0.3,
                   "share of transcript tokens whose predicting query puts its largest cross-attention weight on "
                   "the frames a monotonic alignment puts under the token (voiced frames split by the tokens' "
                   "characters); speech models only",
                   ("cross",), lambda: MeanOverSequences(alignment), task_types=("asr",)))
