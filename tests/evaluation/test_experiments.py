"""Experiments: ablation table, one head per layer, pruning curves' bookkeeping."""
import pytest

from fake_task import FakeTask
from pruning_core.core.errors import HeadpruneError
from pruning_core.evaluation.experiments import (
    AblationResult,
    CurveResult,
    OnePerLayerResult,
    ablation_table,
    one_head_per_layer,
    pruning_curve,
    removal_counts,
    removal_schedule,
)
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import installed_hook_count
from pruning_core.scoring import ScoreConfig, get_scorer
from tiny import tiny_loaded


def test_removal_schedule():
    assert removal_schedule(72, 0.1) == [0, 7, 14, 22, 29, 36, 43, 50, 58, 65, 72]
    assert removal_schedule(8, 0.5) == [0, 4, 8]
    assert removal_schedule(5, 1.0) == [0, 5]
    for bad in (0, -0.1, 1.5):
        with pytest.raises(HeadpruneError, match="fraction"):
            removal_schedule(10, bad)


def test_curve_at_chosen_fractions(tmp_path):
    """``fractions=(0, 0.1, 0.25, 0.5)``: points at just those shares (Qwen's 336 heads: 0, 34, 84, 168), the
    heads removed in the same order as the stepped curve, so the shared points agree exactly."""
    assert removal_counts(336, (0, 0.1, 0.25, 0.5)) == [0, 34, 84, 168]
    assert removal_counts(8, (0.5, 0.25)) == [0, 2, 4]                    # sorted, 0 added
    with pytest.raises(HeadpruneError, match=r"\[0, 1\].*\[1.5\]"):
        removal_counts(8, (0.5, 1.5))
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=8)
    picked = pruning_curve(lm, task, task.data, get_scorer("gradient"), ScoreConfig(), fractions=(0.25, 0.5))
    stepped = pruning_curve(lm, task, task.data, get_scorer("gradient"), ScoreConfig(), step=0.25)
    assert [p.heads_removed for p in picked.points] == [0, 2, 4]
    same = {p.heads_removed: p for p in stepped.points}
    for p in picked.points:
        assert p.mask == same[p.heads_removed].mask and p.metric == same[p.heads_removed].metric
    assert picked.provenance["settings"]["fractions"] == [0.25, 0.5]


@pytest.mark.parametrize("rescore", [False, True])
@pytest.mark.parametrize("method", ["gradient", "random"])
def test_curve_bookkeeping(method, rescore, tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=8)
    curve = pruning_curve(lm, task, task.data, get_scorer(method), ScoreConfig(), step=0.25, rescore=rescore)
    total = lm.layout.total_heads
    counts = [p.heads_removed for p in curve.points]
    assert counts == removal_schedule(total, 0.25) and counts[0] == 0 and counts[-1] == total
    previous_kept = None
    for p in curve.points:
        mask = HeadMask.from_lists(p.mask)
        assert mask.n_kept == total - p.heads_removed
        assert p.fraction_removed == pytest.approx(p.heads_removed / total)
        kept = {h for h in mask.layout.heads() if h not in set(mask.removed())}
        if previous_kept is not None:
            assert kept <= previous_kept, "a removed head came back"
        previous_kept = kept
    assert curve.points[0].metric == task.evaluate(lm, task.data).metric
    again = CurveResult.from_json(curve.to_json())
    assert again == curve
    assert installed_hook_count(lm.model) == 0


def test_curve_follows_the_ranking(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=8)
    scores = get_scorer("random").score(lm, task, ScoreConfig(seed=5))
    curve = pruning_curve(lm, task, task.data, get_scorer("random"), ScoreConfig(seed=5), step=0.125)
    order = scores.ranking_scores.ranked(seed=5)
    first = HeadMask.from_lists(curve.points[1].mask).removed()
    assert set(first) == set(order[:1])


def test_ablation_table_rows_and_roundtrip(tmp_path):
    lm = tiny_loaded("bart", tmp_path)
    task = FakeTask(seq2seq=True, n=6)
    table = ablation_table(lm, task, task.data)
    assert len(table.rows) == lm.layout.total_heads
    base = task.evaluate(lm, task.data)
    r = table.rows[5]
    single = task.evaluate(lm, task.data, HeadMask.from_removed(lm.layout, [(r.kind, r.layer, r.head)]))
    assert r.metric == single.metric and r.delta_metric == pytest.approx(single.metric - base.metric)
    assert AblationResult.from_json(table.to_json()) == table


@pytest.mark.parametrize("use_scores", [True, False])
def test_one_head_per_layer(use_scores, tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    task = FakeTask(n=8)
    scores = get_scorer("gradient").score(lm, task, ScoreConfig()) if use_scores else None
    res = one_head_per_layer(lm, task, task.data, scores=scores)
    assert len(res.rows) == 2
    for row in res.rows:
        if use_scores:
            values = scores.scores.kinds["encoder_self"][row.layer]
            assert row.kept_head == max(range(4), key=lambda h: values[h])
        only = [[1] * 4, [1] * 4]
        only[row.layer] = [1 if h == row.kept_head else 0 for h in range(4)]
        assert task.evaluate(lm, task.data, HeadMask.from_lists({"encoder_self": only})).metric == row.metric
    assert OnePerLayerResult.from_json(res.to_json()) == res
