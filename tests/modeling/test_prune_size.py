"""`headprune prune` words the parameter change ("% more" / "% fewer"); an uneven grouped-query mask (a tiny
Llama with 6 query heads on 2 key/value heads losing one query head) makes the model smaller, never larger
 (key/value heads are stored once, not copied), and saves in headprune's format.
`headprune mask --uniform` builds the fix: whole groups, the same count in every layer."""
import json

import pytest

from pruning_core.modeling.architectures import find_sites, kv_groups_of
from pruning_core.cli.main import main
from pruning_core.core.heads import HeadMask, HeadScores
from pruning_core.modeling.sources.loading import load_model
from pruning_core.modeling.presets import uniform_by_group
from pruning_core.modeling.pruning import describe_change, parameter_count, parameter_count_after
from pruning_core.evaluation.results import ScoreResult, mask_to_json
from tiny import llama_6_on_2, make_bert_tokenizer

K = "decoder_self"


@pytest.fixture
def llama_dir(tmp_path, monkeypatch, headprune_home):
    model = llama_6_on_2()
    model.save_pretrained(tmp_path / "llama")
    make_bert_tokenizer(tmp_path / "tok").save_pretrained(tmp_path / "llama")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args):
    return main([str(a) for a in args])


def _write_mask(path, layout, removed):
    mask = HeadMask.from_removed(layout, [(K, l, h) for l, heads in removed.items() for h in heads])
    path.write_text(json.dumps(mask_to_json(mask, "llama")))
    return mask


def test_the_change_is_worded_by_its_sign():
    assert describe_change(1000, 1024) == "2.4 % more"
    assert describe_change(1000, 976) == "2.4 % fewer"
    assert describe_change(1000, 1000) == "no change"


def test_an_uneven_mask_makes_the_model_smaller_and_loads_back(llama_dir, capsys):
    loaded = load_model("llama")
    # layer 0 loses one query head of group 0: groups keep 2 and 3, each key/value head stored once
    mask = _write_mask(llama_dir / "m.json", loaded.layout, {0: [0]})
    before, after = parameter_count(loaded.model), parameter_count_after(loaded.model, mask)
    assert before - after == 2 * 8 * 48                 # q and o lose one head of 8 x 48 each; k and v nothing
    capsys.readouterr()                                  # the loading bars of load_model above
    assert run("prune", "llama", "--mask", "m.json", "--out", "pruned") == 0
    out = capsys.readouterr().out
    assert f"parameters {before:,} -> {after:,} ({describe_change(before, after)})" in out and "% fewer" in out
    assert "headprune only" in out and "uneven key/value groups" in out
    assert parameter_count(load_model(str(llama_dir / "pruned")).model) == after


def test_a_smaller_result_is_worded_fewer(llama_dir, capsys):
    loaded = load_model("llama")
    _write_mask(llama_dir / "m.json", loaded.layout, {0: [0, 1, 2], 1: [3, 4, 5]})      # whole groups
    assert run("prune", "llama", "--mask", "m.json", "--out", "pruned") == 0
    assert "% fewer)" in capsys.readouterr().out


def test_uniform_removes_the_same_whole_groups_count_in_every_layer(llama_dir, capsys):
    loaded = load_model("llama")
    groups = kv_groups_of(find_sites(loaded.model))
    # group sums: layer 0 (0.6, 1.5) -> group 0 goes; layer 1 (2.4, 0.3) -> group 1 goes
    raw = HeadScores({K: ((0.1, 0.2, 0.3, 0.4, 0.5, 0.6), (0.7, 0.8, 0.9, 0.1, 0.1, 0.1))})
    mask = uniform_by_group(raw, groups, 0.5)
    assert mask.kinds[K] == ((0, 0, 0, 1, 1, 1), (1, 1, 1, 0, 0, 0))
    assert uniform_by_group(raw, groups, 0.0).is_full()
    with pytest.raises(ValueError, match="rounds to none"):
        uniform_by_group(raw, groups, 0.2)              # 0.2 of 2 groups: no whole group

    scores = ScoreResult("random", raw, normalize=False, provenance={"model": "llama"})
    (llama_dir / "s.json").write_text(json.dumps(scores.to_json()))
    assert run("mask", "s.json", "--uniform", "--remove", "0.5", "--out", "u.json") == 0
    written = json.loads((llama_dir / "u.json").read_text())
    assert written["kinds"][K] == [list(r) for r in mask.kinds[K]]
    assert run("prune", "llama", "--mask", "u.json", "--out", "pruned") == 0
    assert "% fewer)" in capsys.readouterr().out
    assert run("mask", "s.json", "--uniform", "--keep-per-layer", "2", "--out", "x.json") == 2
    assert "--uniform goes with --remove" in capsys.readouterr().err
