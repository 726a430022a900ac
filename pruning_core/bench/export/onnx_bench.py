"""Dense vs pruned in ONNX Runtime beside PyTorch, with the FLOP ceiling: does the pruned graph run faster
in another runtime, and how close to what the removed multiply-adds allow?

Four variants of one float32 CPU model are timed interleaved per round (:func:`~pruning_core.bench.timing.
interleaved_latencies`, so machine noise hits them alike): PyTorch dense and pruned (eager attention, the
attention both exports are traced with), ONNX Runtime dense and pruned (:func:`.to_onnx.export_onnx` of
each, in a temporary folder, with as many intra-op threads as PyTorch). Inputs are the benchmark's
synthetic ones (no padding; teacher-forced decoders, no cache).
"""
from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from pruning_core.bench.ceiling import CeilingReport, flop_ceiling
from pruning_core.bench.run import audio_frames, synthetic_inputs
from pruning_core.bench.timing import LatencyStats, interleaved_latencies, load_average
from pruning_core.core.io.codec import JsonRecord, ONNX_BENCH_FORMAT, json_field
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.presets import half_mask
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.modeling.pruning import prune_heads
from pruning_core.bench.export.to_onnx import LogitsOnly, export_onnx, onnx_session

VARIANTS = ("pytorch dense", "pytorch pruned", "onnxruntime dense", "onnxruntime pruned")

__all__ = ["ONNX_BENCH_FORMAT", "OnnxBenchResult", "OnnxBenchRow", "format_onnx_bench", "onnx_benchmark"]


@dataclass(frozen=True)
class OnnxBenchRow(JsonRecord):
    variant: str                        # one of VARIANTS
    batch_size: int
    latency: LatencyStats = field(metadata={"flatten": True})
    speedup: float                      # the same runtime's dense median / this median


@dataclass(frozen=True, kw_only=True)
class OnnxBenchResult(JsonRecord):
    format: str = field(default=ONNX_BENCH_FORMAT, init=False)
    model_id: str = field(metadata=json_field("model"))
    seq_len: int
    decoder_len: int | None
    threads: int                        # torch intra-op threads = ONNX Runtime intra-op threads
    mask: HeadMask = field(metadata={"decode": HeadMask.from_lists})
    ceiling: CeilingReport
    rows: tuple[OnnxBenchRow, ...]
    onnx_check: Mapping = field(default_factory=dict)   # variant -> max |ONNX Runtime - PyTorch| of its export
    machine: Mapping = field(default_factory=dict)
    settings: Mapping = field(default_factory=dict)
    seconds: float = 0.0


def onnx_benchmark(loaded, mask: HeadMask | None = None, *, batch_sizes: Sequence[int] = (1, 8), seq_len: int = 128,
                   warmup: int = 2, repeats: int = 10, min_seconds: float = 2.0, seed: int = 0,
                   progress: ProgressCallback | None = None) -> OnnxBenchResult:
    """Time PyTorch and ONNX Runtime, dense and pruned (``mask``; None: :func:`~pruning_core.modeling.presets.half_mask`),
    for each batch size. ``loaded``: a float32 CPU model (never modified)."""
    started, load_before = time.perf_counter(), load_average()
    if loaded.device.type != "cpu" or loaded.dtype != torch.float32:
        raise HeadpruneError("bench --onnx compares CPU runtimes in float32; run it with --device cpu --dtype float32.")
    config = loaded.model.config
    mask = half_mask(loaded.layout, seed=0) if mask is None else mask
    mask.check_fits(loaded.layout)
    enc_dec = bool(getattr(config, "is_encoder_decoder", False))
    dec_len = seq_len if enc_dec else None
    enc_len = audio_frames(config) or seq_len
    ceiling = flop_ceiling(config, mask, enc_len, decoder_len=dec_len)
    pruned = loaded.derive(prune_heads(loaded.model, mask).eval())
    threads = torch.get_num_threads()
    rows: list[OnnxBenchRow] = []
    with tempfile.TemporaryDirectory(prefix="headprune-onnx-") as tmp:
        report(progress, "bench", 0, len(batch_sizes), "exporting dense and pruned to ONNX")
        exports = {name: export_onnx(m, Path(tmp) / f"{name}.onnx") for name, m in (("dense", loaded), ("pruned", pruned))}
        sessions = {name: onnx_session(e.path, threads) for name, e in exports.items()}
        models = {name: LogitsOnly(m.model, e.inputs).eval() for (name, e), m in zip(exports.items(), (loaded, pruned))}
        for i, bs in enumerate(int(b) for b in batch_sizes):
            inputs = synthetic_inputs(config, bs, seq_len, dec_len, torch.device("cpu"), seed=seed + i)
            inputs.pop("use_cache", None)
            tensors = tuple(inputs.values())
            feeds = {n: {k: v.numpy() for k, v in inputs.items()} for n in sessions}
            runs = {}
            for name in ("dense", "pruned"):
                runs[f"pytorch {name}"] = lambda m=models[name]: m(*tensors)
                runs[f"onnxruntime {name}"] = lambda s=sessions[name], f=feeds[name]: s.run(["logits"], f)
            with torch.inference_mode():
                timed = interleaved_latencies(runs, warmup=warmup, repeats=repeats, min_seconds=min_seconds,
                                              progress=progress, stage="bench", done=i, total=len(batch_sizes))
            stats = {n: LatencyStats.of(timed.seconds[n]) for n in VARIANTS}
            for n in VARIANTS:
                dense = stats[n.replace("pruned", "dense")].median
                rows.append(OnnxBenchRow(n, bs, stats[n], dense / stats[n].median))
    settings = {"batch_sizes": [int(b) for b in batch_sizes], "warmup": warmup, "repeats": repeats,
                "min_seconds": min_seconds, "seed": seed, "attention": "eager (what both exports are traced with)",
                "inputs": "synthetic token ids, no padding" + ("; teacher-forced decoder, no cache" if enc_dec else "")}
    return OnnxBenchResult(model_id=str(loaded.model_id), seq_len=enc_len, decoder_len=dec_len, threads=threads,
                           mask=mask, ceiling=ceiling, rows=tuple(rows),
                           onnx_check={n: e.max_abs_diff for n, e in exports.items()},
                           machine={"cpus": os.cpu_count(), "load_before": load_before, "load_after": load_average()},
                           settings=settings, seconds=time.perf_counter() - started)


def format_onnx_bench(result: OnnxBenchResult) -> str:
    """A plain-text table: per batch size, each runtime's dense and pruned median, speed-up and share of the ceiling."""
    c = result.ceiling
    lines = [f"model {result.model_id}, CPU float32, {result.threads} threads (both runtimes); heads kept "
             f"{result.mask.n_kept}/{result.mask.n_total}; seq_len {result.seq_len}"
             + (f", decoder_len {result.decoder_len}" if result.decoder_len else ""),
             f"FLOP ceiling: {c.removed_fraction:.1%} of multiply-adds removed -> at most {c.speedup:.3f}x faster",
             "", f"{'batch':>5}  {'variant':<19} {'median ms':>10} {'IQR ms':>17} {'speed-up':>8} {'of ceil.':>8}"]
    for r in result.rows:
        lat = r.latency
        share = f"{r.speedup / c.speedup:.1%}" if r.variant.endswith("pruned") else ""
        lines.append(f"{r.batch_size:>5}  {r.variant:<19} {lat.median * 1e3:>10.2f} "
                     f"{f'{lat.q1 * 1e3:.2f}-{lat.q3 * 1e3:.2f}':>17} {r.speedup:>7.3f}x {share:>8}")
    m = result.machine
    lines += ["", "speed-up = the same runtime's dense median / this median; of ceil. = speed-up / FLOP ceiling.",
              "ONNX exports checked against PyTorch: " + ", ".join(f"{n} max |diff| {d:.2g}"
                                                                  for n, d in result.onnx_check.items()) + ".",
              f"Machine: {m.get('cpus')} CPUs, load average {m.get('load_before')} before, {m.get('load_after')} after."]
    loads = [l[0] for l in (m.get("load_before"), m.get("load_after")) if l]
    if m.get("cpus") and loads and max(loads) > m["cpus"] + 0.5:
        lines.append("WARNING: other processes competed for the CPUs during this run; latencies are inflated and "
                     "noisy (a share of the ceiling above 100 % is noise). Re-run on an idle machine.")
    return "\n".join(lines)
