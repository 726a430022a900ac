"""The audio-alignment role: the voiced span, the monotonic bands, a constructed aligned head scoring highest,
the role on tiny Whisper (speech synthesised as tones, no espeak-ng) and the comparison with a listed set."""
from __future__ import annotations

import numpy as np
import pytest

from pruning_core.analysis.roles import compute_roles
from pruning_core.analysis.roles.alignment import alignment, bands, compare_listed, listed_alignment_heads, top_heads
from pruning_core.analysis.roles.base import ProbeSequence
from pruning_core.analysis.roles.probes import FRAME_SAMPLES, voiced_span
from tiny import synthetic_task, tiny_loaded


def test_the_voiced_span_skips_leading_and_trailing_silence():
    audio = np.zeros(100 * FRAME_SAMPLES, np.float32)
    audio[10 * FRAME_SAMPLES:40 * FRAME_SAMPLES] = np.sin(np.arange(30 * FRAME_SAMPLES) * 0.1)
    assert voiced_span(audio) == (10, 40)
    assert voiced_span(np.zeros(5 * FRAME_SAMPLES, np.float32)) == (0, 5)


def test_bands_cover_the_speech_in_order_in_proportion_to_characters():
    marks = {"speech": (10, 110), "chars": [1, 3, 1], "prompt": 2}
    b = bands(marks, 200)
    starts, ends = b.argmax(axis=1), 200 - b[:, ::-1].argmax(axis=1)
    assert list(starts) == [10, 30, 90] and list(ends) == [30, 90, 110]       # edges 10, 30, 90, 110
    assert not b[:, 110:].any() and not b[:, :10].any()


def _sequence(heads: list[np.ndarray], marks: dict) -> ProbeSequence:
    return ProbeSequence((np.stack(heads),), np.arange(heads[0].shape[0]), None, False, None, marks)


def test_a_constructed_monotonic_head_scores_highest():
    """Score: the share of tokens whose predicting query peaks on the token's frames."""
    marks = {"speech": (5, 65), "chars": [2, 2, 2, 2, 2, 2], "prompt": 3}          # 10 frames a token
    queries, keys = 3 + 6, 100
    aligned = np.zeros((queries, keys))
    for j in range(6):                                                           # query 2 + j predicts token j
        aligned[2 + j, 5 + 10 * j: 15 + 10 * j] = 0.1
    aligned[[0, 1, 8]] = 1 / keys
    sink = np.zeros((queries, keys))
    sink[:, 90] = 1.0                                                            # a frame of the silence after
    uniform = np.full((queries, keys), 1 / keys)
    backwards = aligned[:, ::-1].copy()
    seq = _sequence([sink, uniform, aligned, backwards], marks)
    scores = alignment(seq, seq.maps[0])
    assert scores.argmax() == 2 and scores[2] == pytest.approx(1.0)
    assert scores[0] == 0.0 and scores[1] == 0.0                     # a sink; an even spread peaks on frame 0
    assert scores[3] == pytest.approx(1 / 6)                          # reversed, it crosses the right frames once
    shifted = np.roll(aligned, 10, axis=1)                            # one token late: never on the token's frames
    assert alignment(_sequence([shifted], marks), shifted[None])[0] == 0.0
    no_speech = ProbeSequence((aligned[None],), np.arange(queries), None, False, None, {})
    assert alignment(no_speech, aligned[None]) is None


def test_top_heads_and_precision_against_a_listed_set():
    grid = np.array([[0.1, 0.9, np.nan], [0.8, 0.2, 0.7]])
    assert top_heads(grid, 3) == [(0, 1), (1, 0), (1, 2)]
    got = compare_listed(grid, [(0, 1), (1, 1), (1, 2)])
    assert got["hits"] == [(0, 1), (1, 2)] and got["precision"] == pytest.approx(2 / 3)


def test_the_role_runs_on_tiny_whisper_cross_attention_only(tmp_path, monkeypatch):
    from pruning_core.tasks.data import speech
    rng = np.random.default_rng(0)
    monkeypatch.setattr(speech, "synthesize", lambda text: np.concatenate([
        np.zeros(3200, np.float32), rng.normal(0, 0.3, 160 * (40 + len(text))).astype(np.float32),
        np.zeros(3200, np.float32)]))
    lm = tiny_loaded("whisper", tmp_path)
    report = compute_roles(lm, task=synthetic_task(), roles=["alignment", "first_token"], n_texts=3)
    grid = report.scores["alignment"]["cross"]
    assert set(report.scores["alignment"]) == {"cross"}
    assert grid.shape == (len(lm.layout.kinds["cross"]), max(lm.layout.kinds["cross"]))
    assert np.isfinite(grid).all() and (grid >= 0).all() and (grid <= 1 + 1e-6).all()
    assert report.probes["alignment"]["kinds"] == ["cross"]
    lm.model.generation_config.alignment_heads = [[1, 0], [0, 3]]
    assert listed_alignment_heads(lm) == [(1, 0), (0, 3)]


def test_the_role_is_absent_for_models_without_speech(tmp_path):
    lm = tiny_loaded("bart", tmp_path)
    report = compute_roles(lm, task=synthetic_task(), roles=["alignment"], n_texts=2)
    assert report.scores["alignment"] == {} and listed_alignment_heads(lm) is None
