"""`headprune roles`, and --protect / --roles-file on mask, curve and prune, on tiny models."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pruning_core.cli.main import main
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.analysis.roles import RoleReport
from tiny import make_bert_tokenizer, random_words_csv, tiny_model


@pytest.fixture
def bert_and_gpt2_dir(tmp_path, monkeypatch, headprune_home):
    for arch in ("bert", "gpt2"):
        tiny_model(arch).save_pretrained(tmp_path / arch)
        make_bert_tokenizer(tmp_path / "tok").save_pretrained(tmp_path / arch)     # not GPT-2's empty tokenizer
    random_words_csv(tmp_path / "tiny.csv", rows=24, words_per_row=8)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args):
    return main([str(a) for a in args])


def test_roles_prints_a_table_and_writes_the_schema(bert_and_gpt2_dir, capsys):
    assert run("roles", "gpt2", "--task", "file:tiny.csv", "--out", "r.json") == 0
    out = capsys.readouterr().out
    for role in ("previous_token", "induction", "retrieval", "rare_word"):
        assert role in out
    data = json.loads((bert_and_gpt2_dir / "r.json").read_text())
    assert data["format"] == "headprune.roles/1"
    assert np.asarray(data["roles"]["induction"]["decoder_self"]).shape == (2, 4)
    assert run("roles", "bert", "--task", "file:tiny.csv", "--roles", "induction,current_token") == 0
    out = capsys.readouterr().out
    assert "induction" in out and "not computed for this model" in out


def _protect_setup(bert_and_gpt2_dir) -> set:
    """Random scores, and a roles file whose first_token heads are the 3 heads those scores would remove first."""
    assert run("score", "bert", "--task", "file:tiny.csv", "--method", "random", "--score-split", "test",
               "--out", "s.json") == 0
    scores = json.loads((bert_and_gpt2_dir / "s.json").read_text())["kinds"]["encoder_self"]
    order = sorted(((l, h) for l in range(2) for h in range(4)), key=lambda x: scores[x[0]][x[1]])
    protected = set(order[:3])
    grid = np.zeros((2, 4))
    for l, h in protected:
        grid[l, h] = 0.9
    report = RoleReport(HeadLayout({"encoder_self": (4, 4)}), {"first_token": {"encoder_self": grid}},
                        {"first_token": 0.4})
    (bert_and_gpt2_dir / "r.json").write_text(json.dumps(report.to_json()))
    return {("encoder_self", l, h) for l, h in protected}


def test_mask_with_protect_keeps_the_role_heads_and_says_what_it_removes(bert_and_gpt2_dir, capsys):
    protected = _protect_setup(bert_and_gpt2_dir)
    assert run("mask", "s.json", "--remove", "0.5", "--out", "plain.json", "--roles-file", "r.json") == 0
    plain = HeadMask.from_lists(json.loads((bert_and_gpt2_dir / "plain.json").read_text())["kinds"])
    assert protected <= set(plain.removed())
    assert "removes 3 of 3 first token heads" in capsys.readouterr().out
    assert run("mask", "s.json", "--remove", "0.5", "--protect", "first_token", "--roles-file", "r.json",
               "--out", "m.json") == 0
    mask = HeadMask.from_lists(json.loads((bert_and_gpt2_dir / "m.json").read_text())["kinds"])
    assert not protected & set(mask.removed()) and len(mask.removed()) == 4
    out = capsys.readouterr().out
    assert "removes 0 of 3 first token heads" in out and "3 heads never removed" in out
    assert run("prune", "bert", "--mask", "plain.json", "--roles-file", "r.json", "--out", "pruned") == 0
    assert "removes 3 of 3 first token heads" in capsys.readouterr().out


def test_curve_with_protect_never_removes_the_role_heads(bert_and_gpt2_dir, capsys):
    protected = _protect_setup(bert_and_gpt2_dir)
    assert run("curve", "bert", "--task", "file:tiny.csv", "--method", "random", "--step", "0.5", "--score-split",
               "test", "--protect", "first_token", "--roles-file", "r.json", "--seeds", "1", "--out", "c.json") == 0
    points = json.loads((bert_and_gpt2_dir / "c.json").read_text())["points"]
    assert [p["heads_removed"] for p in points] == [0, 2, 5]                 # the 5 unprotected heads, half a step
    for p in points:
        assert not protected & set(HeadMask.from_lists(p["mask"]).removed())
    assert "removes 0 of 3 first token heads" in capsys.readouterr().out


def test_mask_protect_computes_the_roles_of_the_scored_model(bert_and_gpt2_dir, capsys):
    _protect_setup(bert_and_gpt2_dir)
    assert run("mask", "s.json", "--remove", "0.5", "--protect", "current_token", "--out", "m.json") == 0
    out = capsys.readouterr().out
    assert "computing the current token roles" in out and "removes 0 of 0 current token heads" in out


@pytest.mark.parametrize("args, message", [
    (("roles", "bert", "--task", "file:tiny.csv", "--roles", "inducton"), "Did you mean 'induction'"),
    (("mask", "s.json", "--remove", "0.5", "--protect", "retreival", "--roles-file", "r.json", "--out", "m.json"),
     "Available: .*retrieval"),
    (("mask", "s.json", "--remove", "0.5", "--protect", "induction", "--roles-file", "r.json", "--out", "m.json"),
     "has no scores for induction"),
    (("mask", "s.json", "--remove", "0.5", "--roles-file", "nothere.json", "--out", "m.json"), "does not exist"),
    (("prune", "gpt2", "--mask", "m.json", "--roles-file", "r.json", "--out", "p"), "headprune roles MODEL"),
])
def test_role_errors_say_what_to_do(bert_and_gpt2_dir, capsys, args, message):
    _protect_setup(bert_and_gpt2_dir)
    if args[0] == "prune":
        (bert_and_gpt2_dir / "m.json").write_text(json.dumps({"format": "headprune.mask/1", "model": "gpt2",
                                                    "kinds": {"decoder_self": [[1] * 4, [1, 0, 1, 1]]}}))
    assert run(*args) == 2
    import re
    assert re.search(message, capsys.readouterr().err)
