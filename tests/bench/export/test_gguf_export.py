"""GGUF export of uniformly pruned Llama-family models: read back by transformers' GGUF loader (which undoes
llama.cpp's q/k row permutation) with headprune's logits; float16 within its rounding; shapes GGUF cannot
hold refused; slow tests on the pruned SmolLM2 (transformers, and llama.cpp's greedy tokens when
`headprune prepare --runtime llama-cpp` has installed llama-cpp-python)."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from pruning_core.cli.main import main
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.sources.loading import load_model
from pruning_core.modeling.pruning import prune_heads
from tiny import VOCAB, logits_of, tiny_model

K = "decoder_self"
# every layer keeps the same heads: llama and qwen2 2 of 4 on 1 of 2 key/value heads, mistral 3 of 4 on its 1
UNIFORM = {"llama": {0: [0, 1], 1: [2, 3]}, "mistral": {0: [0], 1: [3]}, "qwen2": {0: [2, 3], 1: [0, 1]}}
IDS = torch.tensor([[9, 12, 15, 20, 11, 17], [10, 25, 13, 9, 22, 14]])


def bpe_tokenizer():
    """A byte-level BPE tokenizer over the tiny vocabulary (GGUF carries BPE vocabularies)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE(vocab={w: i for i, w in enumerate(VOCAB)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def _mask_file(path, removed, heads=4):
    rows = [[0 if h in removed.get(l, []) else 1 for h in range(heads)] for l in range(2)]
    path.write_text(json.dumps({"format": "headprune.mask/1", "model": "x", "kinds": {K: rows}}))


@pytest.fixture
def pruned_dirs(tmp_path, monkeypatch, headprune_home):
    monkeypatch.chdir(tmp_path)
    for arch, removed in UNIFORM.items():
        tiny_model(arch).save_pretrained(tmp_path / arch)
        bpe_tokenizer().save_pretrained(tmp_path / arch)
        _mask_file(tmp_path / f"{arch}.json", removed)
        assert main(["prune", arch, "--mask", f"{arch}.json", "--out", f"{arch}-pruned"]) == 0
    return tmp_path


def _gguf_model(folder: Path, name: str):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=name).eval()


def test_transformers_reads_the_gguf_back_with_equal_logits(pruned_dirs, capsys):
    arch = "llama"
    assert main(["export", f"{arch}-pruned", "--format", "gguf", "--out", "g/f32.gguf"]) == 0
    assert "wrote g/f32.gguf" in capsys.readouterr().out
    want = logits_of(load_model(f"{arch}-pruned").model, {"input_ids": IDS})
    back = _gguf_model(pruned_dirs / "g", "f32.gguf")
    assert (back.config.num_attention_heads, back.config.head_dim) == (2, 8)
    # the same float32 weights (q/k permuted and back: exact) in the same code: equal up to summation order
    assert torch.allclose(logits_of(back, {"input_ids": IDS}), want, atol=1e-5, rtol=0)

    assert main(["export", f"{arch}-pruned", "--format", "gguf", "--dtype", "float16", "--out", "g/f16.gguf"]) == 0
    half = logits_of(_gguf_model(pruned_dirs / "g", "f16.gguf"), {"input_ids": IDS})
    # every matrix rounded to float16 (relative 2^-11 ~ 5e-4 per weight; errors add up over 2 layers and the
    # output head to ~1e-3 of the logits' scale): allow 1e-2 of it, and require that rounding happened
    scale = float(want.abs().max())
    assert torch.allclose(half, want, atol=1e-2 * scale, rtol=0) and not torch.equal(half, want)


def test_qwen2_tensors_round_trip(pruned_dirs):
    # transformers' GGUF loader reads no head_dim for qwen2 (it derives hidden / heads, wrong once pruned),
    # so this checks the file itself: every tensor, unpermuted (qwen2 is NeoX-style in llama.cpp too)
    from gguf import GGUFReader
    assert main(["export", "qwen2-pruned", "--format", "gguf", "--out", "q.gguf"]) == 0
    reader = GGUFReader(str(pruned_dirs / "q.gguf"))
    tensors = {t.name: np.array(t.data) for t in reader.tensors}
    state = load_model("qwen2-pruned").model.state_dict()
    assert np.array_equal(tensors["blk.0.attn_q.weight"], state["model.layers.0.self_attn.q_proj.weight"].numpy())
    assert np.array_equal(tensors["blk.1.attn_k.bias"], state["model.layers.1.self_attn.k_proj.bias"].numpy())
    assert np.array_equal(tensors["output.weight"], state["lm_head.weight"].numpy())
    fields = {f.name: f for f in reader.fields.values()}
    assert int(fields["qwen2.attention.head_count"].parts[-1][0]) == 2
    assert int(fields["qwen2.attention.key_length"].parts[-1][0]) == 8


def test_shapes_gguf_cannot_hold_are_refused(pruned_dirs, capsys):
    # the tiny Mistral attends within a 4-token sliding window, which GGUF's llama architecture lacks
    assert main(["export", "mistral-pruned", "--format", "gguf", "--out", "m.gguf"]) == 2
    assert "sliding window of 4 tokens" in capsys.readouterr().err
    _mask_file(pruned_dirs / "n.json", {0: [0, 1]})                       # layer 1 keeps all 4
    assert main(["prune", "llama", "--mask", "n.json", "--out", "uneven"]) == 0
    capsys.readouterr()
    assert main(["export", "uneven", "--format", "gguf", "--out", "u.gguf"]) == 2
    err = capsys.readouterr().err
    assert "GGUF has one head count for every layer" in err and "--uniform" in err and "--format onnx" in err
    assert not (pruned_dirs / "u.gguf").exists()


# -- slow: the pruned SmolLM2 ---------------------------------------------------------------------------

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def smol_gguf(tmp_path_factory):
    from pruning_core.modeling.sources import catalog
    from pruning_core.bench.export.to_gguf import export_gguf
    if not (catalog.get("smollm2").folder() / "config.json").is_file():
        pytest.skip("smollm2 is not prepared: run `headprune prepare --model smollm2` (make test does)")
    smol = load_model("smollm2", device="cpu", dtype="float32")
    # the first key/value group (query heads 0-2) of every layer: 6 of 9 query heads on 2 of 3 key/value heads
    mask = HeadMask.from_removed(smol.layout, [(K, l, h) for l in range(len(smol.layout.kinds[K])) for h in (0, 1, 2)])
    pruned = smol.derive(prune_heads(smol.model, mask))
    out = tmp_path_factory.mktemp("smol") / "smol-pruned.gguf"
    export_gguf(pruned, out)
    return pruned, out


@pytest.mark.slow
def test_the_pruned_smollm2_gguf_in_transformers(smol_gguf):
    pruned, path = smol_gguf
    ids = pruned.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    back = _gguf_model(path.parent, path.name)
    # 30 layers of float32 in the same code on the same weights: only summation order may differ
    assert torch.allclose(logits_of(back, {"input_ids": ids}), logits_of(pruned.model, {"input_ids": ids}),
                          atol=1e-4, rtol=0)


def _llama_cpp():
    """llama.cpp's binding, or a skip naming the command that installs it (compiling llama.cpp takes
    minutes, up to 25 on two busy cores, so a test never does it)."""
    from pruning_core.core.errors import HeadpruneError
    from pruning_core.bench.export import llama_cpp
    try:
        return llama_cpp.import_llama_cpp()
    except HeadpruneError as err:
        pytest.skip(str(err))


@pytest.mark.slow
def test_llama_cpp_greedy_tokens_equal_the_pruned_smollm2(smol_gguf):
    pruned, path = smol_gguf
    Llama = _llama_cpp().Llama
    ids = pruned.tokenizer(PROMPT)["input_ids"]
    with torch.no_grad():
        ours = pruned.model.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False,
                                     pad_token_id=pruned.tokenizer.eos_token_id)[0, len(ids):].tolist()
    llm = Llama(model_path=str(path), n_ctx=64, verbose=False)
    theirs = []
    for token in llm.generate(ids, temp=0.0, top_k=1, top_p=1.0, repeat_penalty=1.0):
        theirs.append(int(token))
        if len(theirs) == 8:
            break
    assert theirs == ours
