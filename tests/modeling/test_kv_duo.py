"""A KV policy written in DuoAttention's pattern form (full_attention_heads.tsv + config.json) reads back the same,
by DuoAttention's threshold rule and by kvpress's compression-ratio rule; bad files get clear errors."""
from __future__ import annotations

import json

import pytest

from pruning_core.core.errors import FormatError
from pruning_core.modeling.kv import kv_budgets, kv_duo
from pruning_core.modeling.kv import kv_policy as kvp


def test_a_policy_round_trips_through_the_pattern_folder(tmp_path):
    policy = kvp.random_policy((3,) * 5, 0.4, seed=1, sink=64, window=192)
    folder = kv_duo.write(policy, tmp_path / "pattern", provenance={"model": "x"})
    assert (folder / "full_attention_heads.tsv").read_text().splitlines()[0].count("\t") == 2
    lines = [[float(x) for x in line.split("\t")] for line in (folder / "full_attention_heads.tsv").read_text().splitlines()]
    assert lines == [[0.0 if s else 1.0 for s in row] for row in policy.streaming]
    config = json.loads((folder / "config.json").read_text())
    assert (config["sink_size"], config["recent_size"], config["threshold"]) == (64, 192, 0.5)
    assert config["headprune"]["head_compression_ratio"] == pytest.approx(6 / 15)
    by_threshold = kv_duo.read(folder)
    by_ratio = kv_duo.read(folder, stream=policy.n_streaming / policy.n_heads)
    assert by_threshold == policy and by_ratio == policy
    assert kv_duo.read(folder / "full_attention_heads.tsv", sink=64, window=192) == policy


def test_a_trained_pattern_by_either_rule(tmp_path):
    """Gates as DuoAttention trains them (clipped to [0, 1] on reading): below 0.5 streams; kvpress's rule
    streams the lowest share, ties by position."""
    (tmp_path / "full_attention_heads.tsv").write_text("0.9\t0.2\n-0.1\t1.3\n0.5\t0.45\n")
    (tmp_path / "config.json").write_text(json.dumps({"sink_size": 128, "recent_size": 256, "lr": 0.02}))
    policy = kv_duo.read(tmp_path)
    assert policy.streaming == ((False, True), (True, False), (False, True))
    assert (policy.sink, policy.window) == (128, 256)
    assert kv_duo.read(tmp_path, stream=0.5).streaming == ((False, True), (True, False), (False, True))
    assert kv_duo.read(tmp_path, stream=1 / 6).streaming == ((False, False), (True, False), (False, False))


def test_what_the_pattern_cannot_hold_is_refused(tmp_path):
    budgets = kv_budgets.budget_policy([[30, 20], [12, 6]], sink=4, context=30)
    with pytest.raises(FormatError, match="different windows"):
        kv_duo.write(budgets, tmp_path / "b")
    assert not (tmp_path / "b").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(FormatError, match="not an empty folder"):
        kv_duo.write(kvp.KVPolicy.full([2, 2]), tmp_path / "full")
    (tmp_path / "bad.tsv").write_text("1\t0\n1\n")
    with pytest.raises(FormatError, match="same number of key/value heads"):
        kv_duo.read(tmp_path / "bad.tsv", sink=1, window=2)
    (tmp_path / "lone.tsv").write_text("1\t0\n")
    with pytest.raises(FormatError, match="give the sink and window"):
        kv_duo.read(tmp_path / "lone.tsv")
