"""The Attention kinds headline says what the chart shows under both removal orders, and when a lead is noise."""
from __future__ import annotations

from app.curves.words import kinds_headline
from pruning_core.evaluation.kinds import KindPoint, KindSensitivity


def _run(points: dict) -> KindSensitivity:
    """A BLEU run like bergamot-en-pt's: {(kind, method): (metric, half-width)} at 50 %, 3 random seeds."""
    pts = []
    for (kind, method), (metric, half) in points.items():
        for seed in ((None,) if method == "importance" else (0, 1, 2)):
            pts.append(KindPoint(kind, 0.5, 8, method, seed, metric, 1.0, metric - half, metric + half))
    return KindSensitivity("bleu", 31.6, 28.2, 34.7, 128, {"encoder_self": 48, "cross": 16}, ("decoder_self",),
                           tuple(pts))


def test_orders_that_disagree_are_both_named_and_the_overlap_is_called_noise():
    run = _run({("encoder_self", "importance"): (25.0, 3.0), ("cross", "importance"): (27.0, 3.0),
                ("encoder_self", "random"): (20.0, 3.0), ("cross", "random"): (1.0, 0.5)})
    line = kinds_headline(run)
    assert line.startswith("Most sensitive, least important first: **encoder self-attention**, within noise of "
                           "encoder-decoder (cross) attention"), line
    assert "in random order: **encoder-decoder (cross) attention**, beyond noise ahead of encoder self-attention" in line
    assert "The two orders disagree" in line
    assert run.apart("encoder_self", "cross", "importance") is False
    assert run.apart("cross", "encoder_self", "random") is True


def test_orders_that_agree_beyond_noise_say_so_without_a_disagreement():
    run = _run({("encoder_self", "importance"): (30.0, 1.0), ("cross", "importance"): (20.0, 1.0),
                ("encoder_self", "random"): (25.0, 1.0), ("cross", "random"): (5.0, 1.0)})
    line = kinds_headline(run)
    assert "least important first: **encoder-decoder (cross) attention**, beyond noise" in line
    assert "in random order: **encoder-decoder (cross) attention**, beyond noise" in line
    assert "within noise" not in line and "disagree" not in line


def test_points_without_intervals_claim_nothing_about_noise():
    pts = tuple(KindPoint(k, 0.5, 8, "importance" if s is None else "random", s, m, 1.0)
                for k, m in (("encoder_self", 25.0), ("cross", 27.0)) for s in (None, 0))
    run = KindSensitivity("bleu", 31.6, None, None, 128, {"encoder_self": 48, "cross": 16}, (), pts)
    line = kinds_headline(run)
    assert "noise" not in line and "**encoder self-attention**" in line


def test_the_button_counts_what_the_progress_counts():
    from app.curves.jobs import kinds_evaluations

    assert kinds_evaluations(2, 2, 2) == 2 * 2 * (1 + 2) + 1 == 13    # tests/evaluation/test_kinds.py: progress to 13
    assert kinds_evaluations(2, 3, 3) == 25                            # bergamot-en-pt on the Curves page
