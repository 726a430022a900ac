"""Evaluation that recomputes from the first layer whose heads changed (pruning_core.modeling.inference.layer_cache) gives
exactly the full masked pass's metric, per-example losses and predictions, on every family that claims
it, and runs only the layers from the first change on."""
from __future__ import annotations

import gc
import json
import random
from contextlib import contextmanager

import pytest
import torch
import transformers

from pruning_core import tasks
from pruning_core.modeling.architectures import adapter_for, find_sites, layout_of
from pruning_core.core.errors import Cancelled
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.inference.layer_cache import LayerInputCache
from pruning_core.modeling.masking import installed_hook_count
from pruning_core.modeling.sources.loading import LoadedModel, weights_hash_of_module
from tiny import ALL_ARCHS, VOCAB, tiny_config, tokenizer_for, tiny_loaded

# (family, attention implementation) pairs that resume from a cached layer; every other tiny family runs
# the whole model (test_other_families_run_the_whole_model)
RESUMABLE = [("bert", "eager"), ("bert", "sdpa"), ("roberta", "eager"), ("roberta", "sdpa"), ("electra", "eager"),
             ("electra", "sdpa"), ("distilbert", "eager"), ("distilbert", "sdpa"), ("mpnet", "eager")]
LAYERS = 3
BATCH = 8                 # 37 examples: 5 batches, each padded to its longest example


@pytest.fixture(autouse=True)
def _fresh_encodings():
    tasks.clear_cache()
    yield
    tasks.clear_cache()


def three_layer_model(arch: str, tmp_path, attn: str) -> LoadedModel:
    """A tiny ``arch`` classifier or language model with 3 layers (a first, a middle and a last), weights drawn
    wide enough (std 0.4) that removing any head changes the losses."""
    torch.manual_seed(0)
    config = tiny_config(arch)
    setattr(config, {"distilbert": "n_layers", "gpt2": "n_layer"}.get(arch, "num_hidden_layers"), LAYERS)
    if getattr(config, "layer_types", None):                 # Qwen2: one attention type per layer
        config.layer_types = config.layer_types[:1] * LAYERS
    model = getattr(transformers, adapter_for(config).auto_class).from_config(config, attn_implementation=attn)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(0.0, 0.4)
    model.eval()
    sites = find_sites(model)
    return LoadedModel(model=model, tokenizer=tokenizer_for(tmp_path), model_id=f"tiny-{arch}", source="memory",
                       task_type=adapter_for(config).task_type, arch=arch, weights_sha256=weights_hash_of_module(model),
                       sites=sites, layout=layout_of(sites))


def sentiment_data(loaded: LoadedModel, tmp_path, n: int = 37):
    """``n`` sentences of 1 to 14 words (so every batch but the shortest holds padding)."""
    rng = random.Random(0)
    rows = [{"text": " ".join(rng.choice(VOCAB[9:]) for _ in range(rng.randint(1, 14))), "label": rng.randint(0, 1)}
            for _ in range(n)]
    path = tmp_path / "cls.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = tasks.get_task(f"file:{path}")
    return task, task.encode(loaded, "test")


def masks(layout, kind: str = "encoder_self") -> list[tuple[str, HeadMask | None]]:
    """A sequence of clicks in the layers of ``kind``: dense, last layer, first layer, middle layer (after the
    first), a fully removed layer, the same mask again, back to dense."""
    full = HeadMask.full(layout)
    last = full.toggled(kind, LAYERS - 1, 1)
    first = full.toggled(kind, 0, 2)
    middle_after_first = first.toggled(kind, 1, 0)
    whole_layer = HeadMask.from_removed(layout, [(kind, 1, h) for h in range(4)])
    return [("dense", None), ("last layer", last), ("first layer", first), ("middle after first", middle_after_first),
            ("fully removed layer", whole_layer), ("same mask again", whole_layer), ("dense again", full)]


@contextmanager
def layer_runs(loaded: LoadedModel, task, data, cache: LayerInputCache, modules=None):
    """Yields ``run(mask) -> (batches each of modules ran, result)``: one evaluation of ``mask`` with ``cache``,
    counting each module's forward calls (default: the layer stack's layers); the hooks go on exit."""
    modules = adapter_for(loaded.model).layer_stack(loaded.model).layers if modules is None else modules
    calls = [0] * len(modules)
    handles = [m.register_forward_pre_hook(lambda m, a, i=i: calls.__setitem__(i, calls[i] + 1))
               for i, m in enumerate(modules)]

    def run(mask: HeadMask | None):
        calls[:] = [0] * len(modules)
        result = task.evaluate(loaded, data, mask, batch_size=BATCH, layer_cache=cache)
        return list(calls), result
    try:
        yield run
    finally:
        for h in handles:
            h.remove()


@pytest.mark.parametrize("arch,attn", RESUMABLE)
def test_resumed_evaluation_equals_the_full_masked_pass(arch, attn, tmp_path):
    loaded = three_layer_model(arch, tmp_path, attn)
    task, data = sentiment_data(loaded, tmp_path)
    assert max(data.lengths) > min(data.lengths)                  # padded batches
    assert_resumed_equals_full(loaded, task, data, masks(loaded.layout))


def assert_resumed_equals_full(loaded, task, data, clicks: list[tuple[str, HeadMask | None]]) -> None:
    """Each click evaluated with one shared cache equals the full masked pass; the first pass fills the cache and
    every later one resumes; no hook stays and the model is unchanged."""
    cache = LayerInputCache(max_bytes=64 * 2**20)
    before = weights_hash_of_module(loaded.model)
    dense_losses = None
    for name, mask in clicks:
        resumed = task.evaluate(loaded, data, mask, batch_size=BATCH, layer_cache=cache)
        full = task.evaluate(loaded, data, mask, batch_size=BATCH)
        # Exact (tolerance 0): the resumed batch runs the same float32 operations on the same tensors in the
        # same order as the model's own loop (same layer modules, the arguments recorded from its full pass,
        # the same head), so the results are bitwise equal, not merely close.
        assert resumed.example_losses == full.example_losses, name
        assert resumed.predictions == full.predictions, name
        assert (resumed.metric, resumed.loss) == (full.metric, full.loss), name
        dense_losses = dense_losses or full.example_losses
        if mask is not None and not mask.is_full():
            assert full.example_losses != dense_losses, name      # the mask matters: a wrong start would show
    assert (cache.full, cache.resumed) == (1, len(clicks) - 1)
    assert installed_hook_count(loaded.model) == 0
    assert weights_hash_of_module(loaded.model) == before          # the shared model is never changed


@pytest.mark.parametrize("arch,attn", [("bert", "sdpa"), ("distilbert", "eager"), ("mpnet", "eager")])
def test_a_change_in_layer_l_runs_only_layers_l_and_later(arch, attn, tmp_path):
    loaded = three_layer_model(arch, tmp_path, attn)
    task, data = sentiment_data(loaded, tmp_path)
    batches, full = data.n_batches(BATCH), HeadMask.full(loaded.layout)
    with layer_runs(loaded, task, data, LayerInputCache(max_bytes=64 * 2**20)) as run:
        assert run(None)[0] == [batches] * LAYERS
        for changed in (2, 1, 0):
            assert run(full.toggled("encoder_self", changed, 3))[0] == [0] * changed + [batches] * (LAYERS - changed)
        two = full.toggled("encoder_self", 0, 3).toggled("encoder_self", 1, 1)
        assert run(two)[0] == [0, batches, batches]      # a second change in layer 1 after one in layer 0: from layer 1


def test_the_cache_keeps_to_its_budget_least_recently_used_first(tmp_path):
    loaded = three_layer_model("bert", tmp_path, "eager")
    task, data = sentiment_data(loaded, tmp_path)
    probe = LayerInputCache(max_bytes=2**30)
    task.evaluate(loaded, data, None, batch_size=BATCH, layer_cache=probe)
    one_evaluation = probe.nbytes                      # the context and the inputs of 3 layers
    cache = LayerInputCache(max_bytes=one_evaluation + one_evaluation // 2)
    full = HeadMask.full(loaded.layout)
    for head in range(4):
        mask = full.toggled("encoder_self", 0, head)
        plain = task.evaluate(loaded, data, mask, batch_size=BATCH)
        assert task.evaluate(loaded, data, mask, batch_size=BATCH, layer_cache=cache).example_losses == \
            plain.example_losses
        assert 0 < cache.nbytes <= cache.max_bytes
    dense = task.evaluate(loaded, data, None, batch_size=BATCH)
    nothing = LayerInputCache(max_bytes=0)             # a budget of 0 keeps nothing and still evaluates
    for _ in range(2):
        assert task.evaluate(loaded, data, None, batch_size=BATCH, layer_cache=nothing).example_losses == \
            dense.example_losses
    assert (len(nothing), nothing.nbytes, nothing.full, nothing.resumed) == (0, 0, 2, 0)


def test_the_inputs_every_first_click_resumes_from_outlast_other_sessions_clicks(tmp_path):
    """With plain LRU, a session's clicks in the first layer pushed out the all-heads inputs of the deeper
    layers, and the next session's first click in the last layer reran every layer."""
    loaded = three_layer_model("bert", tmp_path, "eager")
    task, data = sentiment_data(loaded, tmp_path)
    probe = LayerInputCache(max_bytes=2**30)
    task.evaluate(loaded, data, None, batch_size=BATCH, layer_cache=probe)
    cache = LayerInputCache(max_bytes=probe.nbytes + probe.nbytes // 2)     # the context, 3 layers, and half again
    last = HeadMask.full(loaded.layout).toggled("encoder_self", LAYERS - 1, 2)
    with layer_runs(loaded, task, data, cache) as run:
        run(None)                                     # a session opens the map
        mask = HeadMask.full(loaded.layout)
        for head in range(4):                         # one session's clicks in the first layer, one after the other
            mask = mask.toggled("encoder_self", 0, head)
            run(mask)
            assert cache.nbytes <= cache.max_bytes
        counts, resumed = run(last)                   # another session's first click, in the last layer
        assert counts == [0] * (LAYERS - 1) + [data.n_batches(BATCH)]
    assert resumed.example_losses == task.evaluate(loaded, data, last, batch_size=BATCH).example_losses


def test_a_cancelled_evaluation_stores_nothing_and_leaves_no_hook(tmp_path):
    loaded = three_layer_model("bert", tmp_path, "eager")
    task, data = sentiment_data(loaded, tmp_path)
    cache = LayerInputCache(max_bytes=64 * 2**20)

    def cancel_at_second_batch(event):
        if event.done == 2:
            raise Cancelled("stop")
    with pytest.raises(Cancelled):
        task.evaluate(loaded, data, None, batch_size=BATCH, layer_cache=cache, progress=cancel_at_second_batch)
    assert (len(cache), installed_hook_count(loaded.model)) == (0, 0)
    task.evaluate(loaded, data, None, batch_size=BATCH, layer_cache=cache)
    stored = len(cache)
    with pytest.raises(Cancelled):                     # a resumed evaluation cancelled midway adds nothing
        task.evaluate(loaded, data, HeadMask.full(loaded.layout).toggled("encoder_self", 0, 0), batch_size=BATCH,
                      layer_cache=cache, progress=cancel_at_second_batch)
    assert (len(cache), installed_hook_count(loaded.model)) == (stored, 0)


def test_entries_go_with_their_model(tmp_path):
    cache = LayerInputCache(max_bytes=64 * 2**20)
    loaded = three_layer_model("distilbert", tmp_path, "eager")
    task, data = sentiment_data(loaded, tmp_path)
    task.evaluate(loaded, data, None, batch_size=BATCH, layer_cache=cache)
    assert len(cache) == 1 + LAYERS and cache.nbytes > 0
    del loaded
    tasks.clear_cache()                                # the encoded data refers to nothing of the model, but be sure
    del data
    gc.collect()
    assert (len(cache), cache.nbytes) == (0, 0)


def test_other_families_run_the_whole_model(tmp_path):
    claimed = {arch for arch, _ in RESUMABLE + DECODERS}
    for arch in ALL_ARCHS:
        model = tiny_loaded(arch, tmp_path).model
        has_stack = adapter_for(model).layer_stack(model) is not None
        assert has_stack == (arch in claimed), arch


def test_length_sorted_batches_change_each_loss_only_by_rounding(tmp_path):
    """Batches are sorted by length (less padding, less work); an example's loss then depends on how far its
    batch is padded only through float32 rounding (padded keys get exactly zero attention weight, but the
    matrix products run over other widths, so sums are formed in other orders: about 1e-6 relative)."""
    loaded = three_layer_model("bert", tmp_path, "eager")
    task, data = sentiment_data(loaded, tmp_path)
    alone = task.evaluate(loaded, data, None, batch_size=1)         # no padding at all
    batched = task.evaluate(loaded, data, None, batch_size=BATCH)
    assert data.padding_fraction(BATCH) < data.padding_fraction(BATCH, sort_by_length=False)
    assert batched.predictions == alone.predictions and batched.metric == alone.metric
    assert batched.example_losses == pytest.approx(alone.example_losses, rel=1e-5, abs=1e-6)


# decoder-only language models (LayerStack of decoder_self layers, then the final norm and the output head)
DECODERS = [("llama", "eager"), ("llama", "sdpa"), ("qwen2", "eager"), ("qwen2", "sdpa"), ("gpt2", "eager"),
            ("gpt2", "sdpa"), ("mistral", "eager"), ("gemma", "eager")]


def text_data(loaded: LoadedModel, tmp_path, n: int = 9):
    """``n`` documents of 3 to 40 words cut into windows of 16 tokens (the last window of most documents is shorter,
    so batches hold padding)."""
    rng = random.Random(2)
    path = tmp_path / "lm.txt"
    path.write_text("\n".join(" ".join(rng.choice(VOCAB[9:]) for _ in range(rng.randint(3, 40))) for _ in range(n)))
    task = tasks.get_task(f"file:{path}")
    return task, task.encode(loaded, "test", max_length=16)


@pytest.mark.parametrize("arch,attn", DECODERS)
def test_resumed_language_model_equals_the_full_masked_pass(arch, attn, tmp_path):
    """Perplexity, each window's loss and prediction of a resumed decoder-only model equal the full masked pass
    bitwise, from every start layer (the recorded rotary embeddings, causal mask and position ids, no key/value
    cache)."""
    loaded = three_layer_model(arch, tmp_path, attn)
    task, data = text_data(loaded, tmp_path)
    assert task.task_type == "language_model" and max(data.lengths) > min(data.lengths)
    assert_resumed_equals_full(loaded, task, data, masks(loaded.layout, "decoder_self"))


def test_a_decoder_change_in_layer_l_runs_only_layers_l_and_later(tmp_path):
    loaded = three_layer_model("qwen2", tmp_path, "sdpa")
    task, data = text_data(loaded, tmp_path)
    batches, full = data.n_batches(BATCH), HeadMask.full(loaded.layout)
    with layer_runs(loaded, task, data, LayerInputCache(max_bytes=64 * 2**20)) as run:
        run(None)
        for changed in (2, 1, 0):
            assert run(full.toggled("decoder_self", changed, 3))[0] == [0] * changed + [batches] * (LAYERS - changed)


def test_a_figure_is_never_served_for_another_mask(tmp_path):
    """The cached input of layer ``L`` is found only under the mask rows of the layers before it: after a click in
    layer 0 and one in layer 2, the same layer-2 change under another layer-0 row starts again at layer 0 (its
    figure differs, and equals the full pass's); the dense inputs stay reachable only for an unchanged prefix."""
    loaded = three_layer_model("llama", tmp_path, "eager")
    task, data = text_data(loaded, tmp_path)
    batches, full = data.n_batches(BATCH), HeadMask.full(loaded.layout)
    one = full.toggled("decoder_self", 0, 1).toggled("decoder_self", 2, 0)
    other = full.toggled("decoder_self", 0, 2).toggled("decoder_self", 2, 0)     # the same rows but layer 0's
    with layer_runs(loaded, task, data, LayerInputCache(max_bytes=64 * 2**20)) as run:
        run(None)
        run(full.toggled("decoder_self", 0, 1))
        counts, first = run(one)
        assert counts == [0, 0, batches]
        counts, second = run(other)
        assert counts == [batches] * LAYERS
    assert second.example_losses != first.example_losses
    assert second.example_losses == task.evaluate(loaded, data, other, batch_size=BATCH).example_losses
    assert first.example_losses == task.evaluate(loaded, data, one, batch_size=BATCH).example_losses


# encoder-decoders whose encoder resumes (EncoderStack): a change in the decoder's heads starts after the encoder
SEQ2SEQ = ["marian-ssru", "marian", "bart"]


def translation_data(loaded: LoadedModel, tmp_path, n: int = 19):
    """``n`` source/target pairs of 1 to 9 words (padded batches on both sides)."""
    rng = random.Random(1)
    words = lambda: " ".join(rng.choice(VOCAB[9:]) for _ in range(rng.randint(1, 9)))   # noqa: E731
    path = tmp_path / "mt.jsonl"
    path.write_text("".join(json.dumps({"source": words(), "target": words()}) + "\n" for _ in range(n)))
    task = tasks.get_task(f"file:{path}")
    return task, task.encode(loaded, "test", max_length=12)


def seq2seq_model(arch: str, tmp_path) -> LoadedModel:
    """A tiny ``arch`` encoder-decoder with 2 encoder layers, weights drawn wide enough that a head matters."""
    loaded = tiny_loaded(arch, tmp_path)
    if len(loaded.tokenizer) < len(VOCAB):
        loaded.tokenizer = tokenizer_for(tmp_path)
    with torch.no_grad():
        for module in loaded.model.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(0.0, 0.4, generator=torch.Generator().manual_seed(module.weight.numel()))
    loaded.weights_sha256 = weights_hash_of_module(loaded.model)
    return loaded


def seq2seq_masks(layout) -> list[tuple[str, HeadMask | None]]:
    full = HeadMask.full(layout)
    other = [k for k in layout.kinds if k != "encoder_self"]
    last_enc = len(layout.kinds["encoder_self"]) - 1
    decoder_only = full.toggled(other[0], 0, 1)
    return [("dense", None), ("decoder head", decoder_only), ("two decoder heads", decoder_only.toggled(other[-1], 1, 2)),
            ("last encoder layer", full.toggled("encoder_self", last_enc, 0)),
            ("first encoder layer", full.toggled("encoder_self", 0, 3)),
            ("encoder and decoder", full.toggled("encoder_self", 0, 3).toggled(other[0], 1, 0)),
            ("dense again", full)]


@pytest.mark.parametrize("arch", SEQ2SEQ)
def test_resumed_translation_equals_the_full_masked_pass(arch, tmp_path):
    """Losses, decoded texts and BLEU of a resumed encoder-decoder equal the full masked pass bitwise, as for the
    classifiers above (the same modules on the same tensors in the same order)."""
    loaded = seq2seq_model(arch, tmp_path)
    task, data = translation_data(loaded, tmp_path)
    assert_resumed_equals_full(loaded, task, data, seq2seq_masks(loaded.layout))


def test_a_decoder_change_runs_no_encoder_layer_and_an_encoder_change_only_those_after_it(tmp_path):
    loaded = seq2seq_model("marian-ssru", tmp_path)
    task, data = translation_data(loaded, tmp_path)
    stack = adapter_for(loaded.model).encoder_stack(loaded.model)
    n, batches, full = len(stack.layers), data.n_batches(BATCH), HeadMask.full(loaded.layout)
    with layer_runs(loaded, task, data, LayerInputCache(max_bytes=64 * 2**20), stack.layers) as run:
        assert run(None)[0] == [batches] * n
        for mask, expected in [(full.toggled("cross", 1, 2), [0] * n),
                               (full.toggled("encoder_self", n - 1, 1), [0] * (n - 1) + [batches]),
                               (full.toggled("encoder_self", n - 1, 1).toggled("cross", 0, 0), [0] * n),
                               (full.toggled("encoder_self", 0, 1), [batches] * n)]:
            assert run(mask)[0] == expected, mask


def speech_data(loaded: LoadedModel, tmp_path, n: int = 7):
    """``n`` utterances of noise (0.3 to 0.75 s) with transcripts of 1 to 6 words."""
    from pruning_core.tasks.data import speech

    folder = tmp_path / "audio"
    folder.mkdir()
    rng = random.Random(2)
    noise = torch.Generator().manual_seed(2)
    for i in range(n):
        audio = 0.1 * torch.randn(rng.randint(4800, 12000), generator=noise)
        (folder / f"{i}.wav").write_bytes(speech.encode_wav(audio.numpy()))
        (folder / f"{i}.txt").write_text(" ".join(rng.choice(VOCAB[9:]) for _ in range(rng.randint(1, 6))))
    task = tasks.get_task(f"speech:{folder}")
    return task, task.encode(loaded, "test", max_length=12)


def test_resumed_speech_recognition_equals_the_full_masked_pass(tmp_path):
    """Whisper resumes after its convolutional front end: losses, transcripts and WER equal the full masked pass."""
    loaded = seq2seq_model("whisper", tmp_path)
    task, data = speech_data(loaded, tmp_path)
    clicks = seq2seq_masks(loaded.layout) + [("every kind", HeadMask.full(loaded.layout).toggled("encoder_self", 1, 2)
                                               .toggled("decoder_self", 1, 0).toggled("cross", 0, 3))]
    assert_resumed_equals_full(loaded, task, data, clicks)


def test_a_whisper_decoder_change_runs_no_encoder_layer_and_no_convolution(tmp_path):
    loaded = seq2seq_model("whisper", tmp_path)
    task, data = speech_data(loaded, tmp_path)
    encoder = loaded.model.model.encoder
    modules = [encoder.conv1, *encoder.layers]
    batches, full = data.n_batches(BATCH), HeadMask.full(loaded.layout)
    with layer_runs(loaded, task, data, LayerInputCache(max_bytes=64 * 2**20), modules) as run:
        assert run(None)[0] == [batches] * len(modules)
        for mask, expected in [(full.toggled("cross", 1, 2), [0, 0, 0]), (full.toggled("decoder_self", 0, 1), [0, 0, 0]),
                               (full.toggled("encoder_self", 1, 1), [0, 0, batches]),
                               (full.toggled("encoder_self", 0, 1), [0, batches, batches])]:
            assert run(mask)[0] == expected, mask


def cross_projections(loaded: LoadedModel) -> list[torch.nn.Module]:
    """Each decoder layer's cross-attention key and value projections."""
    return [proj for layer in loaded.model.get_decoder().layers for proj in (layer.encoder_attn.k_proj,
                                                                             layer.encoder_attn.v_proj)]


@contextmanager
def loss_pass_calls(loaded: LoadedModel, task, data, cache: LayerInputCache, modules: list, batch_size: int):
    """Yields ``run(mask) -> (calls of each of modules during the loss passes, result)`` for one evaluation with
    ``cache`` (decoding, after every batch's teacher-forced pass, is not counted); the hooks go on exit."""
    counting, calls = [True], [0] * len(modules)

    def count(i):
        def hook(module, args):
            calls[i] += counting[0]
        return hook
    handles = [m.register_forward_pre_hook(count(i)) for i, m in enumerate(modules)]

    def passes_done(event) -> None:       # Task.metric_first: every batch's pass is reported before any decoding
        if event.stage == "evaluate" and event.done >= data.n_batches(batch_size):
            counting[0] = False

    def run(mask: HeadMask | None):
        counting[0], calls[:] = True, [0] * len(modules)
        result = task.evaluate(loaded, data, mask, batch_size=batch_size, layer_cache=cache, progress=passes_done)
        return list(calls), result
    try:
        yield run
    finally:
        for h in handles:
            h.remove()


def seq2seq_case(arch: str, tmp_path):
    loaded = seq2seq_model(arch, tmp_path)
    task, data = speech_data(loaded, tmp_path) if arch == "whisper" else translation_data(loaded, tmp_path)
    return loaded, task, data


@pytest.mark.parametrize("arch", ["whisper", "marian-ssru", "bart"])
def test_a_decoder_side_click_reuses_the_cross_keys_and_values_of_its_encoder_mask(arch, tmp_path):
    """The cross-attention keys and values are cached per mask of the encoder: a decoder-side click under an encoder
    mask evaluated before projects none in its loss pass, an encoder change projects them anew, and every figure
    equals the full masked pass (K/V of another encoder mask would change the losses). Batches of 3: each batch
    reads its own."""
    loaded, task, data = seq2seq_case(arch, tmp_path)
    assert data.n_batches(3) > 1
    modules = cross_projections(loaded)
    full = HeadMask.full(loaded.layout)
    decoder_kind = "decoder_self" if "decoder_self" in loaded.layout.kinds else "cross"
    encoder = full.toggled("encoder_self", 1, 2)
    clicks = [(None, True), (full.toggled("cross", 0, 1), False), (encoder, True),
              (encoder.toggled(decoder_kind, 1, 0), False), (full.toggled(decoder_kind, 1, 3), False),
              (encoder.toggled("cross", 1, 1).toggled("encoder_self", 0, 0), True),
              (encoder.toggled("cross", 1, 1), False)]
    dense = task.evaluate(loaded, data, None, batch_size=3).example_losses
    cache = LayerInputCache(max_bytes=64 * 2**20)
    with loss_pass_calls(loaded, task, data, cache, modules, batch_size=3) as run:
        for mask, projects in clicks:
            calls, resumed = run(mask)
            assert calls == [data.n_batches(3) if projects else 0] * len(modules), mask
            plain = task.evaluate(loaded, data, mask, batch_size=3)
            assert (resumed.example_losses, resumed.predictions, resumed.metric) == \
                (plain.example_losses, plain.predictions, plain.metric), mask
            assert mask is None or resumed.example_losses != dense, mask
    assert installed_hook_count(loaded.model) == 0


def test_the_cross_keys_and_values_never_push_out_the_inputs_kept_longest(tmp_path):
    """Where the budget holds the all-heads inputs but not the cross-attention keys and values beside them, those
    are not kept: a decoder click projects them again, runs no encoder layer, and its figures equal the full pass."""
    loaded, task, data = seq2seq_case("whisper", tmp_path)
    probe = LayerInputCache(max_bytes=2**30)
    with loss_pass_calls(loaded, task, data, probe, cross_projections(loaded), batch_size=BATCH) as run:
        run(None)
        assert run(HeadMask.full(loaded.layout).toggled("cross", 0, 1))[0] == [0] * 4     # the K/V were kept
    cache = LayerInputCache(max_bytes=probe.nbytes - 1)
    encoder = loaded.model.model.encoder
    modules = [*encoder.layers, *cross_projections(loaded)]
    click = HeadMask.full(loaded.layout).toggled("decoder_self", 1, 2)
    with loss_pass_calls(loaded, task, data, cache, modules, batch_size=BATCH) as run:
        run(None)
        assert len(cache) == len(probe) - 1 and cache.nbytes <= cache.max_bytes
        calls, resumed = run(click)
        assert calls == [0, 0] + [data.n_batches(BATCH)] * 4
        assert cache.nbytes <= cache.max_bytes
    plain = task.evaluate(loaded, data, click, batch_size=BATCH)
    assert (resumed.example_losses, resumed.predictions) == (plain.example_losses, plain.predictions)


def test_other_encoder_decoders_run_the_whole_model(tmp_path):
    for arch in ALL_ARCHS:
        model = tiny_loaded(arch, tmp_path).model
        assert (adapter_for(model).encoder_stack(model) is not None) == (arch in SEQ2SEQ + ["whisper"]), arch


@pytest.mark.parametrize("shape", [
    # SmolLM2-135M: 30 layers, hidden 576; Qwen2.5-0.5B: 24 layers, hidden 896 (configs only, no weights)
    dict(cls="LlamaConfig", hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
         num_key_value_heads=3, vocab_size=49152),
    dict(cls="Qwen2Config", hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
         num_key_value_heads=2, vocab_size=151936)])
def test_the_budget_keeps_a_language_models_all_heads_inputs_with_room_for_clicks(shape):
    """At the evaluation size the dashboard picks for each mean window length, the inputs of every layer of the
    all-heads evaluation (kept longest: every first click resumes from them) take at most half the cache, so a
    click's new inputs fit beside them."""
    from app.model.workload import click_eval_size
    from pruning_core.bench import budget

    fields = dict(shape)
    config = getattr(transformers, fields.pop("cls"))(**fields)
    for tokens in (16, 32, 64, 128):
        cost = budget.example_cost(config, "language_model", tokens)
        n = click_eval_size(cost)
        held = budget.layer_cache_bytes(cost, config.hidden_size, n, config.num_hidden_layers)
        assert held <= budget.LAYER_CACHE_MAX / 2, (tokens, n, held)


def test_the_budget_estimate_matches_a_language_models_cached_inputs(tmp_path):
    """layer_cache_bytes bounds what an all-heads evaluation of a decoder stores (recorded position embeddings and
    causal masks included) when its batches are padded less than its allowance (half the mean length) above the
    mean; SmolLM2's 16 movie-text windows (mean 26.5 tokens, padded to 58) hold 64 MB against 43 MB estimated."""
    from pruning_core.bench import budget

    loaded = three_layer_model("llama", tmp_path, "sdpa")
    task, data = text_data(loaded, tmp_path)
    cache = LayerInputCache(max_bytes=64 * 2**20)
    task.evaluate(loaded, data, None, batch_size=BATCH, layer_cache=cache)
    mean = sum(data.lengths) / len(data.lengths)
    assert max(data.lengths) <= 1.5 * mean
    cost = budget.example_cost(loaded.model.config, "language_model", round(mean))
    assert len(cache) == 1 + LAYERS
    assert 0 < cache.nbytes <= budget.layer_cache_bytes(cost, loaded.model.config.hidden_size, data.n_examples, LAYERS)


def whisper_all_heads_bytes(config, n: int) -> int:
    """What an all-heads evaluation of ``n`` utterances leaves in the cache: the input of each encoder layer and the
    encoder's output, and each decoder layer's cross-attention keys and values, ``[n, frames, d_model]`` float32 each."""
    return (config.encoder_layers + 1 + 2 * config.decoder_layers) * n * config.max_source_positions * config.d_model * 4


def test_the_budget_keeps_whisper_bases_all_heads_evaluation_beside_an_encoder_clicks(tmp_path):
    """The cache holds exactly what whisper_all_heads_bytes counts (checked on the tiny Whisper); for Whisper-base at
    the dashboard's evaluation size, that and what an encoder click adds (its new encoder inputs, keys and values)
    fit the budget, so a decoder-side click after an encoder click still reuses the all-heads keys and values."""
    from app.model.workload import click_eval_size
    from pruning_core.bench import budget

    loaded, task, data = seq2seq_case("whisper", tmp_path)
    cache = LayerInputCache(max_bytes=2**30)
    task.evaluate(loaded, data, None, batch_size=BATCH, layer_cache=cache)
    assert cache.nbytes == whisper_all_heads_bytes(loaded.model.config, data.n_examples)
    base = transformers.WhisperConfig(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                                      decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
                                      num_mel_bins=80, max_source_positions=1500, vocab_size=51865)
    n = click_eval_size(budget.example_cost(base, "asr"))
    per_layer = n * base.max_source_positions * base.d_model * 4
    encoder_click = (base.encoder_layers + 2 * base.decoder_layers) * per_layer      # from layer 0 on: the most
    assert whisper_all_heads_bytes(base, n) + encoder_click <= budget.LAYER_CACHE_MAX, n
