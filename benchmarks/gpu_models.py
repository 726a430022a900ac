"""Helpers of ``benchmarks/gpu_suite.py``: random-weight models at real shapes, synthetic data, the
bertology-style importance loop, group-wise half masks, CUDA-event timing and multiply-add counts.

Nothing here downloads anything: the models are built from configs with random weights (speed
does not depend on the weights' values), the tokenizer is a word-level BERT tokenizer written to a
temp folder, and the data are synthetic files read through headprune's own ``file:`` tasks.
"""
from __future__ import annotations

import contextlib
import random
import statistics
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import torch

from pruning_core.modeling.architectures import adapter_for, find_sites, kv_groups_of, layout_of
from pruning_core.bench import LatencyStats, interleaved_latencies
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.sources.loading import LoadedModel

WORDS = ("the a good bad movie film great awful plot acting fun dull love hate it was is not very really story "
         "scene cast music ending long short funny sad script actor director").split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@dataclass(frozen=True)
class Shape:
    """One model shape: a transformers config class and its arguments, at real size and tiny (``--quick``)."""

    name: str
    mirrors: str            # the public model whose shape this is
    config_class: str       # "BertConfig" | "LlamaConfig"
    real: Mapping
    quick: Mapping


_BERT_QUICK = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=64,
                   max_position_embeddings=64, num_labels=2)
SHAPES: dict[str, Shape] = {s.name: s for s in (
    Shape("bert-base", "bert-base-uncased: 12 layers x 12 heads, hidden 768, FFN 3072, vocab 30522", "BertConfig",
          dict(num_labels=2), _BERT_QUICK),
    Shape("minilm-l6", "all-MiniLM-L6-v2 (the embedded default): 6 layers x 12 heads, hidden 384, FFN 1536",
          "BertConfig", dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                             num_labels=2), {**_BERT_QUICK, "num_hidden_layers": 3, "num_attention_heads": 2}),
    Shape("llama-3.2-1b", "Llama-3.2-1B: 16 layers, 32 query / 8 key-value heads of 64, hidden 2048, FFN 8192, "
                          "vocab 128256, tied embeddings (rope scaling left out: it does not change the work)",
          "LlamaConfig", dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                              num_key_value_heads=8, head_dim=64, vocab_size=128256, tie_word_embeddings=True,
                              max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5),
          dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
               head_dim=8, vocab_size=64, tie_word_embeddings=True, max_position_embeddings=64)),
    Shape("smollm2-135m", "SmolLM2-135M: 30 layers, 9 query / 3 key-value heads of 64, hidden 576, FFN 1536, "
                          "vocab 49152, tied embeddings",
          "LlamaConfig", dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                              num_key_value_heads=3, head_dim=64, vocab_size=49152, tie_word_embeddings=True,
                              max_position_embeddings=8192, rope_theta=100000.0, rms_norm_eps=1e-5),
          dict(hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=3,
               head_dim=8, vocab_size=64, tie_word_embeddings=True, max_position_embeddings=64)),
)}


def config_of(shape: Shape, quick: bool, vocab: int | None = None):
    """The transformers config of ``shape``; ``vocab`` overrides a decoder's vocabulary (``--llama-vocab``)."""
    import transformers

    kwargs = dict(shape.quick if quick else shape.real)
    if vocab is not None and shape.config_class == "LlamaConfig" and not quick:
        kwargs["vocab_size"] = int(vocab)
    return getattr(transformers, shape.config_class)(**kwargs)


def build(shape: Shape, tokenizer, device: torch.device, dtype: torch.dtype, *, quick: bool, attn: str = "eager",
          seed: int = 0, vocab: int | None = None) -> LoadedModel:
    """A random-weight model of ``shape`` as a :class:`LoadedModel`, initialised on ``device`` directly.

    The weights are not hashed (a hash of random weights identifies nothing, and hashing 5 GB costs
    seconds): ``weights_sha256`` says so.
    """
    import transformers

    config = config_of(shape, quick, vocab)
    adapter = adapter_for(config)
    torch.manual_seed(seed)
    with torch.device(device):
        model = getattr(transformers, adapter.auto_class).from_config(config, attn_implementation=attn, dtype=dtype)
    model.eval()
    sites = find_sites(model)
    return LoadedModel(model=model, tokenizer=tokenizer, model_id=f"random:{shape.name}", source="memory",
                       task_type=adapter.task_type, arch=adapter.name,
                       weights_sha256=f"not hashed: random init, torch seed {seed}", sites=sites,
                       layout=layout_of(sites))


def summary(loaded: LoadedModel) -> dict:
    """Parameters, heads and the config fields that set the work, for the JSON."""
    c = loaded.config
    return {"parameters": sum(p.numel() for p in loaded.model.parameters()), "heads": loaded.layout.total_heads,
            "layers": c.num_hidden_layers, "query_heads": c.num_attention_heads,
            "kv_heads": getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
            "hidden": c.hidden_size, "ffn": c.intermediate_size, "vocab": c.vocab_size}


# -- tokenizer and data ---------------------------------------------------------------------------

def make_tokenizer(folder: Path):
    """A word-level BERT tokenizer over :data:`WORDS` (one token per word), saved in ``folder``."""
    from transformers import BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(SPECIALS + list(WORDS)) + "\n")
    tok = BertTokenizerFast(vocab=str(folder / "vocab.txt"))
    tok.save_pretrained(folder)
    return tok


def _texts(n: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(n)]


def write_data(folder: Path, n: int, tokens: int, seed: int = 0) -> dict[str, Path]:
    """Two files of ``n`` examples of exactly ``tokens`` tokens ([CLS] + words + [SEP]):
    ``classification`` (CSV, text + a random 0/1 label) and ``documents`` (TXT, one per line: each
    is one language-model window)."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = _texts(n, tokens - 2, seed)
    rng = random.Random(seed + 1)
    csv = folder / f"cls-{n}x{tokens}.csv"
    csv.write_text("text,label\n" + "".join(f"{t},{rng.randint(0, 1)}\n" for t in texts))
    txt = folder / f"docs-{n}x{tokens}.txt"
    txt.write_text("".join(t + "\n" for t in texts))
    return {"classification": csv, "language_model": txt}


def task_for(loaded: LoadedModel, files: Mapping[str, Path]):
    """headprune's ``file:`` task that fits ``loaded`` (classification or language model)."""
    from pruning_core.tasks import get_task

    return get_task(f"file:{files[loaded.task_type]}")


# -- masks ----------------------------------------------------------------------------------------

def half_mask(loaded: LoadedModel, seed: int = 0) -> tuple[HeadMask, str]:
    """Half the heads, as a rule: a seeded half of every layer's heads, or with grouped-query attention
    whole key/value groups (a K/V head with all its query heads), ``floor`` and ``ceil`` of half the
    groups in alternate layers so that the model loses half its heads overall."""
    from pruning_core.modeling.presets import half_mask as per_layer_half

    groups = kv_groups_of(loaded.sites)
    if all(len(g) == 1 for rows in groups.values() for row in rows for g in row):
        return per_layer_half(loaded.layout, seed=seed), "presets.half_mask: a seeded half of every layer's heads"
    rng, removed = random.Random(seed), []
    for kind, rows in groups.items():
        for layer, row in enumerate(rows):
            count = len(row) // 2 if layer % 2 == 0 else -(-len(row) // 2)
            removed += [(kind, layer, h) for g in rng.sample(list(row), count) for h in g]
    rule = "whole key/value groups: floor(groups/2) in even layers, ceil(groups/2) in odd layers, seeded"
    return HeadMask.from_removed(loaded.layout, removed), rule


# -- the bertology-style loop (Michel et al.'s released code, transformers' examples/research_projects/bertology)

BERTOLOGY_ATTN = "headprune_bench_bertology"
# the head mask [layers, max heads] and, per attention module id, its layer (no reliance on layer_idx)
_HEAD_MASK: ContextVar[tuple[torch.Tensor, dict[int, int]] | None] = ContextVar("bertology_head_mask", default=None)


def _bertology_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention with the head mask multiplied into the attention probabilities, as
    ``BertSelfAttention`` did with ``head_mask`` before transformers 5 dropped it.

    query ``[B, H, T, d]``; key/value ``[B, H_kv, S, d]`` (repeated for grouped-query attention).
    """
    active = _HEAD_MASK.get()
    groups = query.shape[1] // key.shape[1]
    if groups > 1:
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    scores = torch.matmul(query, key.transpose(2, 3)) * (query.shape[-1] ** -0.5 if scaling is None else scaling)
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)            # [B, H, T, S]
    if active is not None:
        head_mask, layer_of = active
        probs = probs * head_mask[layer_of[id(module)], :probs.shape[1]].to(probs.dtype).view(1, -1, 1, 1)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs


def _register_bertology() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(BERTOLOGY_ATTN, _bertology_attention)
    AttentionMaskInterface.register(BERTOLOGY_ATTN, eager_mask)


@contextlib.contextmanager
def bertology_attention(loaded: LoadedModel, head_mask: torch.Tensor) -> Iterator[None]:
    """Run ``loaded.model`` with :func:`_bertology_attention` and ``head_mask`` ``[layers, max heads]`` inside the block."""
    _register_bertology()
    config, saved = loaded.model.config, loaded.model.config._attn_implementation
    layer_of = {id(m): s.layer for s in loaded.sites for m in s.container.modules()}
    token = _HEAD_MASK.set((head_mask, layer_of))
    config._attn_implementation = BERTOLOGY_ATTN
    try:
        yield
    finally:
        config._attn_implementation = saved
        _HEAD_MASK.reset(token)


def bertology_importance(loaded: LoadedModel, task, data, batch_size: int, param_grads: bool = True) -> torch.Tensor:
    """Head importance as the bertology example computes it: ``[layers, max heads]``.

    A padded ``head_mask`` leaf (ones, ``requires_grad``) scales every head's attention
    probabilities; per batch, ``loss.backward()`` and ``|head_mask.grad|`` summed over batches, divided
    by the real tokens. ``param_grads``: the example leaves the weights trainable, so ``backward``
    also computes every weight gradient; False freezes them for the call. Its absolute value is per
    batch, headprune's per token, so the values differ; only the cost is compared.
    """
    model = loaded.model
    layers = max(s.layer for s in loaded.sites) + 1
    heads = max(s.num_heads for s in loaded.sites)
    head_mask = torch.ones(layers, heads, device=loaded.device, requires_grad=True)
    importance = torch.zeros(layers, heads, device=loaded.device)
    tokens = torch.zeros((), device=loaded.device)
    kind = loaded.sites[0].kind
    saved = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(param_grads)
    try:
        with torch.enable_grad(), bertology_attention(loaded, head_mask):
            for batch in data.batches(batch_size, device=loaded.device):
                loss = task.loss_sum(loaded, batch, model(**batch.inputs))
                loss.backward()
                importance += head_mask.grad.abs()
                head_mask.grad = None
                tokens += batch.token_masks[kind].sum()
    finally:
        for p, r in zip(model.parameters(), saved):
            p.requires_grad_(r)
        model.zero_grad(set_to_none=True)
    return importance / tokens


# -- timing and counting --------------------------------------------------------------------------

def event_latencies(runs: Mapping[str, Callable[[], object]], device: torch.device, *, warmup: int, repeats: int,
                    min_seconds: float) -> dict[str, dict]:
    """:func:`pruning_core.bench.interleaved_latencies` (warm-up, rotating order, sync around each call),
    plus, on CUDA, CUDA events around every call. Per name: wall and (CUDA) event statistics and the
    per-round seconds of the figure used (events on CUDA, wall on CPU)."""
    cuda = device.type == "cuda"
    events: dict[str, list] = {name: [] for name in runs}

    def timed(name: str, fn: Callable[[], object]) -> Callable[[], object]:
        def call() -> object:
            if not cuda:
                return fn()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn()
            end.record()
            events[name].append((start, end))
            return out
        return call

    timings = interleaved_latencies({n: timed(n, f) for n, f in runs.items()}, warmup=warmup, repeats=repeats,
                                    min_seconds=min_seconds, device=device)
    out = {}
    for name, wall in timings.seconds.items():
        ev = [s.elapsed_time(e) / 1e3 for s, e in events[name][warmup:]] if cuda else None
        out[name] = {"wall": LatencyStats.of(wall).to_json(), "events": LatencyStats.of(ev).to_json() if ev else None,
                     "seconds": ev if ev else wall}
    return out


def paired_median(a: list[float], b: list[float]) -> float:
    """Median over rounds of ``a[i] / b[i]`` (noise that lasts a round cancels)."""
    return statistics.median(x / y for x, y in zip(a, b))


def forward_macs(loaded: LoadedModel, seq_len: int) -> int:
    """Multiply-adds of one forward pass of one ``seq_len``-token sequence (``bench.flop_ceiling``'s count)."""
    from pruning_core.bench import flop_ceiling

    return flop_ceiling(loaded.config, None, seq_len).total_macs


# bf16 dense tensor-core peak by device name (FLOP/s, not multiply-adds); the H100/H200 SXM datasheets
PEAKS_BF16 = {"H200": (989.4e12, "NVIDIA H200 datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity, 989 dense"),
              "H100": (989.4e12, "NVIDIA H100 SXM datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity, 989 dense")}


def bf16_peak(device_name: str | None) -> tuple[float | None, str]:
    """The datasheet dense bf16 peak of a GPU named ``device_name`` (None on CPU or an unknown GPU)."""
    for key, (flops, source) in PEAKS_BF16.items():
        if device_name and key in device_name:
            return flops, source
    return None, f"no datasheet peak recorded for {device_name or 'a CPU'}"
