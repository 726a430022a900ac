"""The latency estimate: arithmetic on the calibrated timings, and a calibration on tiny random models (no
timing asserts: only what the arithmetic fixes)."""
from __future__ import annotations

import pytest

from pruning_core.bench.latency_model import LatencyModel, calibrate
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.modeling.masking import installed_hook_count
from tiny import tiny_loaded

LAYOUT = HeadLayout({"encoder_self": (4, 4), "cross": (2, 2)})


def _model(**kw) -> LatencyModel:
    return LatencyModel(**{"dense_s": 1.0, "saving_s": {"encoder_self": 0.4, "cross": 0.2},
                           "heads": {"encoder_self": 8, "cross": 4}, "batch_size": 8, "seq_len": 64,
                           "device": "cpu", "measured_at": 0.0, **kw})


def test_a_full_mask_is_the_dense_time_and_each_removed_head_saves_its_kinds_share():
    model = _model()
    full = HeadMask.full(LAYOUT)
    assert model.estimate(full) == 1.0 and model.speedup(full) == 1.0
    one_encoder = full.toggled("encoder_self", 1, 3)
    one_cross = full.toggled("cross", 0, 0)
    assert model.estimate(one_encoder) == pytest.approx(1.0 - 0.4 / 8, abs=1e-12)
    assert model.estimate(one_cross) == pytest.approx(1.0 - 0.2 / 4, abs=1e-12)
    assert model.estimate(full.inverted()) == pytest.approx(1.0 - 0.4 - 0.2, abs=1e-12)
    assert model.speedup(full.inverted()) == pytest.approx(1.0 / 0.4, rel=1e-12)


def test_the_estimate_falls_as_heads_go_and_never_below_zero():
    model = _model(saving_s={"encoder_self": 0.9, "cross": 0.5})
    mask, last = HeadMask.full(LAYOUT), 1.0
    for kind, layer, head in [("encoder_self", 0, 0), ("cross", 1, 1), ("encoder_self", 1, 2), ("cross", 0, 0)]:
        mask = mask.toggled(kind, layer, head)
        now = model.estimate(mask)
        assert now < last
        last = now
    assert model.estimate(HeadMask.full(LAYOUT).inverted()) == 0.0


def test_bad_timings_and_unknown_kinds_are_refused():
    with pytest.raises(ValueError, match="dense_s > 0"):
        _model(dense_s=0.0)
    with pytest.raises(ValueError, match="same kinds"):
        _model(heads={"encoder_self": 8})
    with pytest.raises(ValueError, match="no timing"):
        _model(saving_s={"encoder_self": 0.4}, heads={"encoder_self": 8}).estimate(HeadMask.full(LAYOUT))


@pytest.mark.parametrize("arch", ["bert", "qwen2", "marian"])
def test_calibration_times_each_kind_and_leaves_the_model_as_it_was(arch, tmp_path):
    lm = tiny_loaded(arch, tmp_path)
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    model = calibrate(lm, batch_size=2, seq_len=8, warmup=0, repeats=2, min_seconds=0.0)
    assert set(model.saving_s) == set(lm.layout.kinds)
    assert model.heads == {k: sum(rows) for k, rows in lm.layout.kinds.items()}
    assert model.dense_s > 0 and model.batch_size == 2 and model.seq_len == 8
    assert model.estimate(HeadMask.full(lm.layout)) == model.dense_s
    after = lm.model.state_dict()
    assert before.keys() == after.keys() and all(before[k].equal(after[k]) for k in before)
    assert installed_hook_count(lm.model) == 0
