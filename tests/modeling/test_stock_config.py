"""Standard shapes: a grouped-query decoder whose every layer keeps the same query and key/value heads is
saved with a stock config (num_attention_heads, num_key_value_heads, head_dim) that plain transformers
loads in a process that never imports headprune, with the logits of headprune's pruned model; `load_model`
reads it too. Shapes no stock config can express (different counts per layer; BERT, whose head size is
hidden / heads) say so in `prune` and `info`."""
import json

import pytest
import torch

from pruning_core.cli.main import main
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.sources.loading import load_model, save_pruned
from pruning_core.modeling.pruning import CONFIG_KEY, STOCK_KEY, prune_heads
from stock_load import stock_run
from tiny import logits_of, make_bert_tokenizer, tiny_loaded, tiny_model

K = "decoder_self"
# per family (tiny: 4 query heads on 2, 2, 1, 4 key/value heads), removed heads per layer that leave every
# layer the same shape: whole groups (llama, qwen2), one query head of the one group (mistral: 3 on 1),
# one head (gemma: 3 on 3)
UNIFORM = {"llama": {0: [0, 1], 1: [2, 3]}, "qwen2": {0: [2, 3], 1: [0, 1]},
           "mistral": {0: [0], 1: [3]}, "gemma": {0: [1], 1: [2]}}
SHAPES = {"llama": (2, 1), "qwen2": (2, 1), "mistral": (3, 1), "gemma": (3, 3)}
IDS = [[9, 12, 15, 20, 11, 17], [10, 25, 13, 9, 22, 14]]


def _mask(layout, removed):
    return HeadMask.from_removed(layout, [(K, l, h) for l, heads in removed.items() for h in heads])


@pytest.mark.heavy
@pytest.mark.parametrize("arch", list(UNIFORM))
def test_a_uniform_shape_loads_in_stock_transformers_with_equal_logits(arch, tmp_path):
    lm = tiny_loaded(arch, tmp_path)
    pruned = prune_heads(lm.model, _mask(lm.layout, UNIFORM[arch]))
    folder = save_pruned(pruned, lm.tokenizer, tmp_path / "pruned")
    config = json.loads((folder / "config.json").read_text())
    q, kv = SHAPES[arch]
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (q, kv, 8)
    assert config[STOCK_KEY] is True and config[CONFIG_KEY] == pruned.config.headprune_pruned_heads
    assert getattr(pruned.config, STOCK_KEY, None) is None          # save_pruned left the model as it was

    out = stock_run(folder, tmp_path, IDS)
    assert out["headprune"] == [] and out["heads"] == [[q * 8, kv * 8]] * 2
    ours = logits_of(pruned, {"input_ids": torch.tensor(IDS)})
    # the same float32 operations on the same weights; another process may split the matrix products over
    # threads differently (sums in another order: ~1e-6 relative on logits of size ~1)
    assert torch.allclose(out["logits"], ours, atol=1e-5, rtol=1e-5)
    again = load_model(str(folder))
    assert again.layout.kinds == {K: (q, q)} and again.pruned_heads == pruned.config.headprune_pruned_heads
    assert torch.allclose(logits_of(again.model, {"input_ids": torch.tensor(IDS)}), ours, atol=1e-5, rtol=1e-5)


@pytest.fixture
def folders(tmp_path, monkeypatch, headprune_home):
    for arch in ("llama", "bert"):
        tiny_model(arch).save_pretrained(tmp_path / arch)
        make_bert_tokenizer(tmp_path / "tok").save_pretrained(tmp_path / arch)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _write_mask(path, kind, removed, heads=4):
    rows = [[0 if h in removed.get(l, []) else 1 for h in range(heads)] for l in range(2)]
    path.write_text(json.dumps({"format": "headprune.mask/1", "model": "x", "kinds": {kind: rows}}))


def test_prune_and_info_say_where_a_model_loads(folders, capsys):
    _write_mask(folders / "u.json", K, UNIFORM["llama"])
    assert main(["prune", "llama", "--mask", "u.json", "--out", "llama-u"]) == 0
    out = capsys.readouterr().out
    assert "loads in stock transformers (num_attention_heads 2, num_key_value_heads 1, head_dim 8): " \
           "AutoModelForCausalLM.from_pretrained('llama-u') needs no headprune" in out
    assert main(["info", "llama-u", "--out", "i.json"]) == 0
    assert "loads in   stock transformers" in capsys.readouterr().out
    assert json.loads((folders / "i.json").read_text())["stock_transformers"] is True

    _write_mask(folders / "n.json", K, {0: [0, 1]})                     # layer 1 keeps all 4 heads
    assert main(["prune", "llama", "--mask", "n.json", "--out", "llama-n"]) == 0
    out = capsys.readouterr().out
    assert "loads in headprune only: layers keep different numbers of query/key-value heads (2/1, 4/2)" in out
    assert "headprune export llama-n --format onnx" in out
    config = json.loads((folders / "llama-n" / "config.json").read_text())
    assert config["num_attention_heads"] == 4 and STOCK_KEY not in config      # rebuilt by headprune on loading

    _write_mask(folders / "b.json", "encoder_self", {0: [0], 1: [1]})   # 3 heads in every layer
    assert main(["prune", "bert", "--mask", "b.json", "--out", "bert-u"]) == 0
    assert "headprune only: BertConfig derives each head's size from the hidden size" in capsys.readouterr().out
    assert main(["info", "bert-u"]) == 0
    assert "loads in   headprune only: BertConfig" in capsys.readouterr().out
    assert main(["info", "bert"]) == 0
    assert "loads in   stock transformers: AutoModelForSequenceClassification" in capsys.readouterr().out


@pytest.mark.parametrize("arch, stock", [("llama", True), ("bert", False)])
def test_the_share_zip_readme_says_where_the_model_loads(arch, stock, tmp_path):
    """The dashboard's pruned-model zip tells its reader whether stock transformers loads it (a uniform
    grouped-query shape) or only headprune does (BERT: head size derived from the head count)."""
    import io
    import zipfile

    from app.share import links as share
    lm = tiny_loaded(arch, tmp_path)
    kind = next(iter(lm.layout.kinds))
    mask = _mask(lm.layout, UNIFORM[arch]) if stock else HeadMask.from_removed(lm.layout, [(kind, 0, 1)])
    data = share.pruned_model_zip(lm, mask, "movie-sentiment")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        readme = zf.read(f"{share.pruned_folder_name(lm.model_id, mask)}/README.txt").decode()
    assert ("It loads in stock transformers" in readme) is stock
    assert ("It loads in headprune only" in readme) is not stock
    assert "load_model(" in readme
