"""The benchmark: dense, masked and pruned variants of one model, timed side by side.

:func:`benchmark` times three variants of one model in one run, interleaved round by round so
machine noise hits them alike: **dense** (the model as given), **masked** (the same model under
:func:`~pruning_core.modeling.masking.apply_mask`: gates zero the heads' outputs, every head is still
computed, so it saves nothing) and **pruned** (the copy from
:func:`~pruning_core.modeling.pruning.prune_heads`). It never modifies the model passed in. Beside the
measurements it records the FLOP ceiling (:mod:`.ceiling`) of the same forward pass.
"""
from __future__ import annotations

import copy
import os
import statistics
import time
from collections.abc import Callable, Sequence

import torch

from pruning_core.core.errors import HeadpruneError, UnsupportedArchitectureError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.architectures import adapter_for
from pruning_core.modeling.masking import apply_mask
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.modeling.presets import half_mask
from pruning_core.modeling.pruning import parameter_count, prune_heads
from pruning_core.bench.ceiling import flop_ceiling
from pruning_core.bench.results import (
    CPU_MEMORY_MEASURE,
    CUDA_MEMORY_MEASURE,
    VARIANTS,
    BenchComparison,
    BenchResult,
    BenchRow,
)
from pruning_core.bench.timing import (
    LatencyStats,
    interleaved_latencies,
    load_average,
    peak_forward_bytes,
    weights_bytes,
)



def audio_frames(config) -> int | None:
    """Encoder positions of a speech model (Whisper: ``max_source_positions``, 1,500 for 30 s of audio),
    or None for a model that reads token ids. Its encoder length is fixed by the model: the input is
    always ``2 * frames`` log-mel frames (the stride-2 convolution halves them)."""
    if getattr(config, "num_mel_bins", None) is None:
        return None
    return int(config.max_source_positions)


def synthetic_inputs(config, batch_size: int, seq_len: int, decoder_len: int | None,
                     device: torch.device, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random inputs of exactly ``seq_len`` tokens (never the pad id), attention mask all ones.

    Encoder-decoder models also get ``decoder_input_ids`` of ``decoder_len`` tokens and
    ``use_cache=False`` (a teacher-forced forward pass, as in evaluation of the loss). Speech models
    (:func:`audio_frames` not None) get random log-mel ``input_features`` [batch, mel bins,
    2 * frames] instead of token ids; ``seq_len`` is then ignored (their encoder length is fixed).
    """
    g = torch.Generator().manual_seed(seed)
    vocab = int(config.vocab_size)
    pad = getattr(config, "pad_token_id", None)

    def ids(length: int) -> torch.Tensor:
        if pad is not None and 0 <= pad < vocab and vocab > 1:
            x = torch.randint(0, vocab - 1, (batch_size, length), generator=g)
            return (x + (x >= pad).long()).to(device)        # skip the pad id
        return torch.randint(0, vocab, (batch_size, length), generator=g).to(device)

    frames = audio_frames(config)
    if frames is not None:
        features = torch.randn(batch_size, int(config.num_mel_bins), 2 * frames, generator=g)
        inputs = {"input_features": features.to(device)}
    else:
        inputs = {"input_ids": ids(seq_len),
                  "attention_mask": torch.ones(batch_size, seq_len, dtype=torch.long, device=device)}
    if getattr(config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = ids(decoder_len)
        inputs["use_cache"] = False
    return inputs


def text_positions(config) -> int | None:
    """The most tokens one sequence may have (decoder tokens for a speech model), or None if unbounded."""
    if audio_frames(config) is not None:
        return getattr(config, "max_target_positions", None)
    return getattr(config, "max_position_embeddings", None)


TIMING_ATTENTION = "sdpa"     # what a deployed model runs (the CLI's bench loads it); eager is for attention maps


def timing_model(loaded):
    """``loaded`` as timings measure it: with :data:`TIMING_ATTENTION` where its family has it (a copy, the same
    weights: :meth:`~pruning_core.modeling.sources.loading.LoadedModel.with_attention`), else ``loaded`` itself. The
    dashboard's shared model runs eager attention for its maps, which a 30-s Whisper encoder pays twice for."""
    if TIMING_ATTENTION not in adapter_for(loaded.model).attn_implementations:
        return loaded
    try:
        return loaded.with_attention(TIMING_ATTENTION)
    except UnsupportedArchitectureError:          # transformers kept the model's own: time that (the result says which)
        return loaded


def benchmark(loaded, mask: HeadMask | None = None, *, batch_sizes: Sequence[int] = (1, 8, 32),
              seq_len: int = 128, decoder_len: int | None = None, device: str | None = None,
              warmup: int = 3, repeats: int = 10, min_seconds: float = 2.0, measure_memory: bool = True,
              seed: int = 0, progress: ProgressCallback | None = None, variants: Sequence[str] = VARIANTS,
              pruned=None, pause: Callable[[], bool] | None = None, max_seconds: float | None = None) -> BenchResult:
    """Time dense, masked and pruned variants of ``loaded`` side by side, and count the FLOP ceiling.

    Args:
        loaded: a ``LoadedModel``; never modified (the pruned variant is ``prune_heads``' copy; if
            ``device`` differs from the model's, a copy is moved there). Its attention
            implementation (``eager`` / ``sdpa``) is what gets measured and is recorded.
        mask: 1 = keep, 0 = remove, per kind and layer. ``None``: :func:`half_mask` (seed 0).
        batch_sizes: sequences per forward pass.
        seq_len: tokens per sequence, exactly (synthetic ids, no padding). A speech model's encoder
            reads its fixed :func:`audio_frames` instead (recorded as ``seq_len``), and ``seq_len``
            is then its decoder's length unless ``decoder_len`` is given.
        decoder_len: decoder tokens for encoder-decoder models (default ``seq_len``).
        device: 'cpu' or 'cuda' (checked by ``models.resolve_device``); None: the model's own device.
        warmup: untimed rounds per batch size.
        repeats, min_seconds: timed rounds per batch size: at least ``repeats`` rounds and at least
            ``min_seconds`` of timed forward passes (all variants together); with ``max_seconds``, fewer rounds
            (three at least) once that much is spent (:func:`interleaved_latencies`).
        measure_memory: one extra forward pass per variant and batch size for the peak memory.
        variants: which of "dense", "masked", "pruned" to time (default all three; "dense" and
            "pruned" are always timed: the speed-up is theirs). Without "masked" its row is absent
            and ``masked_ratio`` is None.
        pruned: ``prune_heads(loaded.model, mask)`` made earlier (e.g. cached per mask and shared),
            on the timing device; None: pruned here. Only read, never modified.
        progress: ``report`` callback, stage ``"bench"``; raise ``Cancelled`` from it to stop.
        pause: called before every timed call and before the pruning; True when it let other work run, and
            the round is then timed again (:func:`interleaved_latencies`).

    Returns:
        a :class:`BenchResult`. Timing runs under ``torch.inference_mode()``, one forward pass per
        call (for translation models: teacher-forced, ``use_cache=False``, logits over the vocabulary).
    """
    from pruning_core.modeling.sources.loading import resolve_device
    from pruning_core.evaluation.results import provenance

    started = time.perf_counter()
    load_before = load_average()
    if not batch_sizes or any(int(b) < 1 for b in batch_sizes):
        raise HeadpruneError(f"batch_sizes must be positive integers, got {list(batch_sizes)}.")
    if repeats < 1 or warmup < 0 or min_seconds < 0:
        raise HeadpruneError(f"Need repeats >= 1, warmup >= 0, min_seconds >= 0; got {repeats}, {warmup}, "
                             f"{min_seconds}.")
    config = loaded.model.config
    max_pos = text_positions(config)
    if max_pos is not None and max(seq_len, decoder_len or 0) > max_pos:
        raise HeadpruneError(f"{max(seq_len, decoder_len or 0)} tokens is longer than the model's {max_pos} "
                             "positions; use a shorter sequence length.")
    enc_dec = bool(getattr(config, "is_encoder_decoder", False))
    dec_len = (decoder_len or seq_len) if enc_dec else None
    frames = audio_frames(config)
    if frames is not None:              # the encoder reads all its audio frames, whatever seq_len says
        seq_len = frames
    wanted = set(variants)
    if wanted - set(VARIANTS) or not {"dense", "pruned"} <= wanted:
        raise HeadpruneError(f"variants must include 'dense' and 'pruned', from {list(VARIANTS)}; got {list(variants)}.")
    if mask is None:
        mask = half_mask(loaded.layout, seed=0)
    mask.check_fits(loaded.layout)
    dev = loaded.device if device is None else resolve_device(device)
    same = dev.type == loaded.device.type and (dev.index is None or dev.index == loaded.device.index)
    base = loaded if same else loaded.to(dev)   # a copy on another device; never move the caller's model
    dense = base.model
    if dense.training:                         # never flip the caller's model to eval: use a copy
        dense = copy.deepcopy(dense).eval()
        base = base.derive(dense, base.model_id)
    if pruned is None or next(pruned.parameters()).device != dev:
        report(progress, "bench", 0, len(batch_sizes), "pruning a copy")
        if pause is not None:
            pause()
        pruned = prune_heads(dense, mask, share_weights=True).eval()   # only run: no second model in memory
    ceiling = flop_ceiling(config, mask, seq_len, decoder_len=dec_len)
    attn_impl = str(getattr(config, "_attn_implementation", None) or "unknown")

    def run_dense(inputs: dict) -> object:
        return dense(**inputs)

    def run_masked(inputs: dict) -> object:
        with apply_mask(base, mask):
            return dense(**inputs)

    def run_pruned(inputs: dict) -> object:
        return pruned(**inputs)

    variants = {name: run for name, run in (("dense", (run_dense, dense, mask.n_total)),
                                            ("masked", (run_masked, dense, mask.n_total)),
                                            ("pruned", (run_pruned, pruned, mask.n_kept))) if name in wanted}
    rows: list[BenchRow] = []
    comparisons: list[BenchComparison] = []
    with torch.inference_mode():
        for i, bs in enumerate(int(b) for b in batch_sizes):
            inputs = synthetic_inputs(config, bs, seq_len, dec_len, dev, seed=seed + i)
            timed = interleaved_latencies({name: (lambda f=f: f(inputs)) for name, (f, _, _) in variants.items()},
                                          warmup=warmup, repeats=repeats, min_seconds=min_seconds, device=dev,
                                          progress=progress, stage="bench", done=i, total=len(batch_sizes),
                                          pause=pause, max_seconds=max_seconds)
            times = timed.seconds
            for name, (f, model, heads) in variants.items():
                report(progress, "bench", i, len(batch_sizes), f"batch {bs}: memory of {name}")
                peak = peak_forward_bytes(lambda: f(inputs), dev) if measure_memory else None
                wb = weights_bytes(model)
                rows.append(BenchRow(name, bs, LatencyStats.of(times[name]), parameter_count(model), wb,
                                     None if peak is None else wb + peak, heads))
            stats = {r.variant: r.latency for r in rows[-len(variants):]}
            speedup = stats["dense"].median / stats["pruned"].median
            paired = statistics.median(a / b for a, b in zip(times["dense"], times["pruned"]))
            comparisons.append(BenchComparison(
                bs, speedup, paired, stats["dense"].min / stats["pruned"].min,
                stats["masked"].median / stats["dense"].median if "masked" in stats else None, ceiling.speedup,
                None if dev.type == "cuda" else timed.cpu_share(torch.get_num_threads())))
            report(progress, "bench", i + 1, len(batch_sizes), f"batch {bs}: {speedup:.3f}x")
    settings = {"batch_sizes": [int(b) for b in batch_sizes], "seq_len": seq_len, "decoder_len": dec_len,
                "warmup": warmup, "repeats": repeats, "min_seconds": min_seconds, "seed": seed,
                "variants": list(variants),
                "inputs": ("random log-mel features of the model's fixed length" if frames is not None else
                           "synthetic token ids, no padding, attention mask all ones")
                          + ("; teacher-forced decoder, use_cache=False" if enc_dec else ""),
                "order": "variants interleaved per round, first variant rotating"}
    return BenchResult(model_id=str(loaded.model_id), arch=str(loaded.arch), task_type=str(loaded.task_type),
                       device=str(dev), attn_implementation=attn_impl, torch_threads=torch.get_num_threads(),
                       interop_threads=torch.get_num_interop_threads(), seq_len=seq_len, decoder_len=dec_len,
                       mask=mask, ceiling=ceiling, rows=tuple(rows), comparisons=tuple(comparisons),
                       memory_measure=(CUDA_MEMORY_MEASURE if dev.type == "cuda" else CPU_MEMORY_MEASURE)
                       if measure_memory else "not measured",
                       machine={"cpus": os.cpu_count(), "load_before": load_before, "load_after": load_average()},
                       settings=settings,
                       provenance=provenance(loaded, method="bench", settings=settings, device=str(dev)),
                       seconds=time.perf_counter() - started)


