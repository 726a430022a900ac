"""A damaged local model folder gives one `headprune: error:` line naming the file and what to do (exit 2),
never a traceback: a cut-off model.safetensors, a shard missing from a sharded checkpoint, a config.json
that does not match its weights; through `headprune info` and `headprune evaluate`."""
import json
import shutil

import pytest

from pruning_core.cli.main import main
from tiny import WORDS, make_bert_tokenizer, random_words_csv, tiny_model


def _truncate(folder):
    f = folder / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    return "model.safetensors", "is cut off"


def _drop_shard(folder):
    for f in folder.glob("*.safetensors"):
        f.unlink()
    tiny_model("bert").save_pretrained(folder, max_shard_size="20KB")
    shards = sorted(folder.glob("model-*.safetensors"))
    assert len(shards) > 2                               # the checkpoint really is sharded
    shards[1].unlink()
    return shards[1].name, "Copy or download every shard again"


def _edit_config(folder):
    config = json.loads((folder / "config.json").read_text())
    config["intermediate_size"] = 48                     # the weights hold 64
    (folder / "config.json").write_text(json.dumps(config))
    return "config.json does not match the weights in model.safetensors", "put back the config.json"


DAMAGE = {"truncated": _truncate, "missing-shard": _drop_shard, "config-mismatch": _edit_config}


@pytest.fixture
def good_model_dir(tmp_path, monkeypatch, headprune_home):
    tiny_model("bert").save_pretrained(tmp_path / "good")
    make_bert_tokenizer(tmp_path / "good")
    random_words_csv(tmp_path / "tiny.csv", rows=8, words_per_row=5, vocab=WORDS[:8])
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("command", [("info",), ("evaluate", "--task", "file:tiny.csv")], ids=["info", "evaluate"])
def test_a_damaged_folder_is_one_error_line_naming_the_file(good_model_dir, capsys, damage, command):
    shutil.copytree(good_model_dir / "good", good_model_dir / "bad")
    names, fix = DAMAGE[damage](good_model_dir / "bad")
    capsys.readouterr()
    assert main([command[0], "bad", *command[1:]]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("headprune: error:") and "Traceback" not in err and len(err.splitlines()) == 1
    assert names in err and fix in err


def test_the_intact_folder_loads(good_model_dir):
    assert main(["info", "good"]) == 0
