"""`headprune prune` never makes a model larger without saying so: uneven key/value groups copy key/value
heads (a tiny Llama with 6 query heads on 2 key/value heads grows when one query head goes), the prune
is refused unless --allow-larger, the message names the fix, and the change is worded "% more" / "% fewer".
`headprune mask --uniform` builds the fix: whole groups, the same count in every layer."""
import json

import pytest
import torch

from pruning_core.modeling.architectures import find_sites, kv_groups_of
from pruning_core.cli.main import main
from pruning_core.core.heads import HeadMask, HeadScores
from pruning_core.modeling.loading import load_model
from pruning_core.modeling.presets import uniform_by_group
from pruning_core.modeling.pruning import describe_change, parameter_count, parameter_count_after
from pruning_core.evaluation.results import ScoreResult, mask_to_json
from tiny import make_bert_tokenizer

K = "decoder_self"


def llama_6_on_2(seed: int = 0):
    """A tiny Llama, 2 layers of 6 query heads (head_dim 8) sharing 2 key/value heads: groups of 3."""
    import transformers
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=30, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
                                      tie_word_embeddings=False, pad_token_id=0, bos_token_id=5, eos_token_id=6)
    return transformers.LlamaForCausalLM(config).eval()


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


def test_an_uneven_mask_that_grows_the_model_is_refused_with_the_fix(llama_dir, capsys):
    loaded = load_model("llama")
    # layer 0 loses one query head of group 0: groups keep 2 and 3, gcd 1, so 5 key/value heads instead of 2
    mask = _write_mask(llama_dir / "m.json", loaded.layout, {0: [0]})
    before, after = parameter_count(loaded.model), parameter_count_after(loaded.model, mask)
    # q and o lose 8x48 each; k and v gain 3 heads of 8x48 each: +4 x 384 parameters
    assert after - before == 4 * 8 * 48
    capsys.readouterr()                                  # the loading bars of load_model above
    assert run("prune", "llama", "--mask", "m.json", "--out", "pruned") == 2
    err = capsys.readouterr().err
    assert err.startswith("headprune: error: This mask makes the model larger")
    assert f"{before:,} -> {after:,} ({describe_change(before, after)})" in err and "% more" in err
    assert "--uniform" in err and "by group" in err and "--allow-larger" in err and "Traceback" not in err
    assert not (llama_dir / "pruned").exists()

    assert run("prune", "llama", "--mask", "m.json", "--out", "pruned", "--allow-larger") == 0
    out = capsys.readouterr().out
    assert f"parameters {before:,} -> {after:,} ({describe_change(before, after)})" in out and "fewer" not in out
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
