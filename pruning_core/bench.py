"""How much faster a head-pruned model is, measured side by side, and how much faster it could be.

Two things live here:

- :func:`flop_ceiling` counts the multiply-adds (MACs) of one forward pass per layer and kind,
  from the config and the actual mask, and gives the best speed-up that removing those heads can
  buy: ``1 / (1 - removed fraction)``. Only the attention projections and the attention itself
  shrink; the feed-forward blocks and the output head do not (REFERENCE.md, "The compute
  ceiling of head pruning").
- :func:`benchmark` times three variants of one model in one run, interleaved round by round so
  machine noise hits them alike: **dense** (the model as given), **masked** (the same model under
  :func:`~pruning_core.masking.apply_mask`: gates zero the heads' outputs, every head is still
  computed, so it saves nothing) and **pruned** (the copy from
  :func:`~pruning_core.pruning.prune_heads`). It never modifies the model passed in.

What is counted (``flop_ceiling``), per sequence of ``T`` encoder tokens (and ``T_dec`` decoder
tokens), with ``d`` the hidden size, ``w = heads * head_dim`` an attention's width, ``d_ff`` the
feed-forward size:

- self-attention (encoder, and decoder): ``T * 4*d*w`` for the q, k, v and output projections,
  plus ``2 * T**2 * w`` for QK^T and AV. The decoder's self-attention is counted over the full
  ``T_dec x T_dec`` square: teacher-forced forward passes (eager and sdpa) compute it whole, the
  causal mask only hides half of it.
- cross-attention: ``T_dec * 2*d*w`` (q, out) + ``T * 2*d*w`` (k, v of the encoder states)
  + ``2 * T_dec * T * w``.
- feed-forward: ``2*d*d_ff`` per token of its stack.
- output head, counted explicitly: classification ``d*d + d*num_labels`` once per sequence (the
  pooler / pre-classifier dense and the classifier; negligible), translation ``T_dec * d * vocab``
  (the LM head: for a Marian model it is a large share of the work, and it does not shrink).
- not counted: embedding look-ups (no multiply-adds), layer norms, activations, softmax, biases
  and residual adds (elementwise, O(d) per token).

Decoder length: ``decoder_len`` defaults to ``seq_len`` (a translation about as long as its
source); the benchmark feeds decoder inputs of exactly that length, so the ceiling and the
measurement describe the same forward pass.
"""
from __future__ import annotations

import contextlib
import copy
import gc
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from .errors import FormatError, HeadpruneError
from .heads import KINDS, HeadLayout, HeadMask
from .masking import apply_mask
from .progress import ProgressCallback, report
from .pruning import parameter_count, prune_heads

BENCH_FORMAT = "headprune.bench/1"
VARIANTS: tuple[str, ...] = ("dense", "masked", "pruned")
MASKING_NOTE = ("masking removes no computation: masked latency ≈ dense. Gates zero the removed heads' "
                "outputs but every head is still computed; only the pruned copy is smaller and faster.")
CPU_MEMORY_MEASURE = ("parameter+buffer bytes of the variant + peak bytes of tensors allocated during one "
                      "forward pass and alive at the same time (torch profiler allocation events, "
                      "profile_memory=True); not process RSS")
CUDA_MEMORY_MEASURE = ("parameter+buffer bytes of the variant + (torch.cuda.max_memory_allocated during one "
                       "forward pass, after reset_peak_memory_stats, minus memory_allocated just before it)")


# ==================================================================================================
# The FLOP ceiling
# ==================================================================================================

@dataclass(frozen=True)
class CeilingLayer:
    """The multiply-adds of one attention site for one sequence, and how many of them the mask removes."""

    kind: str             # "encoder_self" | "decoder_self" | "cross"
    layer: int
    heads: int            # heads the layer has now
    heads_kept: int       # heads the mask keeps (1 entries)
    macs: int             # projections + attention, all heads
    removed_macs: int     # the part that belongs to removed heads


@dataclass(frozen=True)
class CeilingReport:
    """Compute of one forward pass of one sequence, and the best speed-up the mask can give.

    ``speedup = total_macs / (total_macs - removed_macs) = 1 / (1 - removed_fraction)``.
    """

    seq_len: int
    decoder_len: int | None                  # None for encoder-only models
    layers: tuple[CeilingLayer, ...]
    ffn_macs: int                            # every feed-forward block (never shrinks)
    head_macs: int                           # output head (pooler + classifier, or LM head)
    head_kind: str                           # "classifier" | "lm_head"

    @property
    def attention_macs(self) -> int:
        return sum(l.macs for l in self.layers)

    @property
    def total_macs(self) -> int:
        return self.attention_macs + self.ffn_macs + self.head_macs

    @property
    def removed_macs(self) -> int:
        return sum(l.removed_macs for l in self.layers)

    @property
    def removed_fraction(self) -> float:
        return self.removed_macs / self.total_macs if self.total_macs else 0.0

    @property
    def speedup(self) -> float:
        """The ceiling: no implementation can beat it by removing these heads alone."""
        left = self.total_macs - self.removed_macs
        return self.total_macs / left if left > 0 else math.inf

    def by_kind(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for l in self.layers:
            row = out.setdefault(l.kind, {"heads": 0, "heads_kept": 0, "macs": 0, "removed_macs": 0})
            row["heads"] += l.heads
            row["heads_kept"] += l.heads_kept
            row["macs"] += l.macs
            row["removed_macs"] += l.removed_macs
        return out

    def to_json(self) -> dict:
        return {"seq_len": self.seq_len, "decoder_len": self.decoder_len,
                "total_macs": self.total_macs, "attention_macs": self.attention_macs,
                "ffn_macs": self.ffn_macs, "head_macs": self.head_macs, "head_kind": self.head_kind,
                "removed_macs": self.removed_macs, "removed_fraction": self.removed_fraction,
                "speedup": self.speedup, "by_kind": self.by_kind(),
                "layers": [{"kind": l.kind, "layer": l.layer, "heads": l.heads, "heads_kept": l.heads_kept,
                            "macs": l.macs, "removed_macs": l.removed_macs} for l in self.layers],
                "counts": "multiply-adds per sequence; embeddings, norms, activations, softmax and biases "
                          "not counted; output head counted"}

    @classmethod
    def from_json(cls, data: Mapping) -> "CeilingReport":
        try:
            layers = tuple(CeilingLayer(str(l["kind"]), int(l["layer"]), int(l["heads"]), int(l["heads_kept"]),
                                        int(l["macs"]), int(l["removed_macs"])) for l in data["layers"])
            return cls(int(data["seq_len"]), None if data.get("decoder_len") is None else int(data["decoder_len"]),
                       layers, int(data["ffn_macs"]), int(data["head_macs"]), str(data["head_kind"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"The ceiling block of a bench file is malformed ({exc!r}).") from None


def _config_of(model_or_config):
    """The transformers config of a LoadedModel, a model, or a config itself."""
    model = getattr(model_or_config, "model", model_or_config)     # LoadedModel -> model
    return getattr(model, "config", model)


def _first(config, names: Sequence[str]):
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    raise HeadpruneError(f"The model config ({type(config).__name__}) has none of {list(names)}; "
                         "cannot count its compute.")


def flop_ceiling(model_or_config, mask: HeadMask | None, seq_len: int, *,
                 decoder_len: int | None = None) -> CeilingReport:
    """Count the multiply-adds of one forward pass of one sequence, and those ``mask`` removes.

    Args:
        model_or_config: a ``LoadedModel``, a transformers model, or its config. Layer counts and
            sizes come from the config; heads per layer come from the mask, so an already pruned
            model (fewer heads than its config says) is counted as it is.
        mask: per kind, one row per layer, 1 = keep, 0 = remove. ``None``: keep every head
            (then the layout is taken from the config).
        seq_len: encoder tokens ``T`` per sequence (no padding).
        decoder_len: decoder tokens for encoder-decoder models; ``None`` means ``seq_len``.

    Returns:
        a :class:`CeilingReport`; ``report.speedup`` is the ceiling ``1 / (1 - removed fraction)``.
    """
    config = _config_of(model_or_config)
    if seq_len < 1:
        raise HeadpruneError(f"seq_len must be at least 1, got {seq_len}.")
    enc_dec = bool(getattr(config, "is_encoder_decoder", False))
    d = int(_first(config, ("d_model", "hidden_size", "dim")))
    enc_heads = int(_first(config, ("encoder_attention_heads", "num_attention_heads", "n_heads")))
    enc_layers = int(_first(config, ("encoder_layers", "num_hidden_layers", "n_layers")))
    enc_ff = int(_first(config, ("encoder_ffn_dim", "intermediate_size", "hidden_dim")))
    expected = {"encoder_self": (enc_layers, enc_heads)}
    t_enc = int(seq_len)
    t_dec = None
    if enc_dec:
        dec_heads = int(_first(config, ("decoder_attention_heads", "num_attention_heads")))
        dec_layers = int(_first(config, ("decoder_layers", "num_hidden_layers")))
        dec_ff = int(_first(config, ("decoder_ffn_dim", "encoder_ffn_dim", "intermediate_size")))
        expected.update({"decoder_self": (dec_layers, dec_heads), "cross": (dec_layers, dec_heads)})
        t_dec = int(decoder_len if decoder_len is not None else seq_len)
        if t_dec < 1:
            raise HeadpruneError(f"decoder_len must be at least 1, got {t_dec}.")
    if mask is None:
        mask = HeadMask.full(HeadLayout({k: (h,) * n for k, (n, h) in expected.items()}))
    if set(mask.kinds) != set(expected):
        raise FormatError(f"The mask has attention kinds {sorted(mask.kinds)} but the model has "
                          f"{sorted(expected)}; make a mask for this model.")

    layers: list[CeilingLayer] = []
    for kind in KINDS:
        if kind not in expected:
            continue
        n_layers, config_heads = expected[kind]
        rows = mask.kinds[kind]
        if len(rows) != n_layers:
            raise FormatError(f"The mask has {len(rows)} {kind} layers but the model has {n_layers}.")
        head_dim = d // config_heads
        for i, row in enumerate(rows):
            if len(row) > config_heads:
                raise FormatError(f"The mask's {kind} layer {i} has {len(row)} heads; the model has at most "
                                  f"{config_heads}.")
            w, w_removed = len(row) * head_dim, (len(row) - sum(row)) * head_dim
            layers.append(CeilingLayer(kind, i, len(row), sum(row), _site_macs(kind, d, w, t_enc, t_dec),
                                       _site_macs(kind, d, w_removed, t_enc, t_dec)))

    ffn = t_enc * 2 * d * enc_ff * enc_layers
    if enc_dec:
        ffn += t_dec * 2 * d * dec_ff * dec_layers
        head, head_kind = t_dec * d * int(config.vocab_size), "lm_head"
    else:
        head, head_kind = d * d + d * int(getattr(config, "num_labels", 2) or 2), "classifier"
    return CeilingReport(t_enc, t_dec, tuple(layers), ffn, head, head_kind)


def _site_macs(kind: str, d: int, w: int, t_enc: int, t_dec: int | None) -> int:
    """Multiply-adds of one attention of width ``w`` (heads * head_dim) over one sequence."""
    if kind == "encoder_self":
        return t_enc * 4 * d * w + 2 * t_enc * t_enc * w
    if kind == "decoder_self":
        return t_dec * 4 * d * w + 2 * t_dec * t_dec * w
    # cross: q and out on decoder tokens, k and v on encoder tokens, QK^T and AV over T_dec x T_enc
    return t_dec * 2 * d * w + t_enc * 2 * d * w + 2 * t_dec * t_enc * w


# ==================================================================================================
# The benchmark
# ==================================================================================================

def half_mask(layout: HeadLayout, seed: int = 0) -> HeadMask:
    """Remove half of every layer's heads (rounded down), chosen by ``random.Random(seed)``.

    The 50 % setting of Michel et al.'s speed table. Which heads go does not change the speed.
    """
    rng = random.Random(seed)
    kinds = {}
    for kind, rows in layout.kinds.items():
        new_rows = []
        for n in rows:
            gone = set(rng.sample(range(n), n // 2))
            new_rows.append(tuple(0 if h in gone else 1 for h in range(n)))
        kinds[kind] = tuple(new_rows)
    return HeadMask(kinds)


@dataclass(frozen=True)
class LatencyStats:
    """Seconds per batch over repeated runs."""

    median: float
    q1: float                 # 25th percentile
    q3: float                 # 75th percentile
    min: float
    max: float
    n: int                    # timed runs

    @classmethod
    def of(cls, seconds: Sequence[float]) -> "LatencyStats":
        xs = sorted(seconds)
        if len(xs) >= 2:
            q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
        else:
            q1 = q3 = xs[0]
        return cls(statistics.median(xs), q1, q3, xs[0], xs[-1], len(xs))

    def to_json(self) -> dict:
        return {"median_s": self.median, "q1_s": self.q1, "q3_s": self.q3, "min_s": self.min,
                "max_s": self.max, "n_runs": self.n}

    @classmethod
    def from_json(cls, d: Mapping) -> "LatencyStats":
        return cls(float(d["median_s"]), float(d["q1_s"]), float(d["q3_s"]), float(d["min_s"]),
                   float(d["max_s"]), int(d["n_runs"]))


@dataclass(frozen=True)
class BenchRow:
    """One variant at one batch size."""

    variant: str                        # "dense" | "masked" | "pruned"
    batch_size: int
    latency: LatencyStats               # seconds per batch
    parameters: int
    weights_bytes: int                  # parameters + buffers
    peak_memory_bytes: int | None       # see BenchResult.memory_measure; None if it could not be measured
    heads_kept: int                     # heads that compute (masked: all of them still compute)

    @property
    def examples_per_s(self) -> float:
        return self.batch_size / self.latency.median if self.latency.median > 0 else math.inf

    def to_json(self) -> dict:
        return {"variant": self.variant, "batch_size": self.batch_size, **self.latency.to_json(),
                "examples_per_s": self.examples_per_s, "parameters": self.parameters,
                "weights_bytes": self.weights_bytes, "peak_memory_bytes": self.peak_memory_bytes,
                "heads_kept": self.heads_kept}

    @classmethod
    def from_json(cls, d: Mapping) -> "BenchRow":
        peak = d.get("peak_memory_bytes")
        return cls(str(d["variant"]), int(d["batch_size"]), LatencyStats.from_json(d), int(d["parameters"]),
                   int(d["weights_bytes"]), None if peak is None else int(peak), int(d["heads_kept"]))


@dataclass(frozen=True)
class BenchComparison:
    """Pruned and masked against dense at one batch size, from the same interleaved run."""

    batch_size: int
    speedup: float                 # dense median / pruned median (the headline figure)
    paired_speedup: float          # median over rounds of dense_i / pruned_i (same round, same noise)
    best_speedup: float            # fastest dense / fastest pruned (least disturbed runs)
    masked_ratio: float            # masked median / dense median (≈ 1: masking saves nothing)
    ceiling_speedup: float
    cpu_share: float | None        # CPU time got / (wall * threads) while timing; None on CUDA

    @property
    def fraction_of_ceiling(self) -> float:
        """Measured speed-up / ceiling speed-up; >= 0.95 is the target."""
        return self.speedup / self.ceiling_speedup

    @property
    def paired_fraction_of_ceiling(self) -> float:
        return self.paired_speedup / self.ceiling_speedup

    def to_json(self) -> dict:
        return {"batch_size": self.batch_size, "speedup": self.speedup, "paired_speedup": self.paired_speedup,
                "best_speedup": self.best_speedup, "masked_over_dense": self.masked_ratio,
                "ceiling_speedup": self.ceiling_speedup, "fraction_of_ceiling": self.fraction_of_ceiling,
                "paired_fraction_of_ceiling": self.paired_fraction_of_ceiling, "cpu_share": self.cpu_share}

    @classmethod
    def from_json(cls, d: Mapping) -> "BenchComparison":
        share = d.get("cpu_share")
        return cls(int(d["batch_size"]), float(d["speedup"]), float(d["paired_speedup"]), float(d["best_speedup"]),
                   float(d["masked_over_dense"]), float(d["ceiling_speedup"]), None if share is None else float(share))


@dataclass(frozen=True)
class BenchResult:
    """Dense, masked and pruned latency, throughput and memory per batch size, with the FLOP ceiling."""

    model_id: str
    arch: str
    task_type: str
    device: str
    attn_implementation: str            # what the model was loaded with ("eager", "sdpa", ...)
    torch_threads: int
    interop_threads: int
    seq_len: int
    decoder_len: int | None             # decoder input length for encoder-decoder models
    mask: HeadMask
    ceiling: CeilingReport
    rows: tuple[BenchRow, ...]
    comparisons: tuple[BenchComparison, ...]
    memory_measure: str
    machine: Mapping = field(default_factory=dict)       # cpus, load averages before/after (noise context)
    settings: Mapping = field(default_factory=dict)      # warmup, repeats, min_seconds, seed, ...
    provenance: Mapping = field(default_factory=dict)
    seconds: float = 0.0
    note: str = MASKING_NOTE

    def row(self, variant: str, batch_size: int) -> BenchRow:
        for r in self.rows:
            if r.variant == variant and r.batch_size == batch_size:
                return r
        raise KeyError((variant, batch_size))

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(c.batch_size for c in self.comparisons)

    @property
    def busy(self) -> bool:
        """Whether other processes competed for the CPUs (load above the CPU count, or < 80 % CPU share)."""
        cpus = self.machine.get("cpus") or 0
        loads = [l[0] for l in (self.machine.get("load_before"), self.machine.get("load_after")) if l]
        shares = [c.cpu_share for c in self.comparisons if c.cpu_share is not None]
        return bool(cpus and loads and max(loads) > cpus + 0.5) or bool(shares and min(shares) < 0.8)

    def to_json(self) -> dict:
        return {"format": BENCH_FORMAT, "model": self.model_id, "arch": self.arch, "task_type": self.task_type,
                "device": self.device, "attn_implementation": self.attn_implementation,
                "torch_threads": self.torch_threads, "interop_threads": self.interop_threads,
                "seq_len": self.seq_len, "decoder_len": self.decoder_len,
                "mask": self.mask.to_json(), "heads_kept": self.mask.n_kept, "heads_total": self.mask.n_total,
                "note": self.note, "memory_measure": self.memory_measure, "machine": dict(self.machine),
                "ceiling": self.ceiling.to_json(),
                "speedups": [c.to_json() for c in self.comparisons],
                "rows": [r.to_json() for r in self.rows],
                "settings": dict(self.settings), "seconds": self.seconds, "provenance": dict(self.provenance)}

    @classmethod
    def from_json(cls, data: Mapping) -> "BenchResult":
        from .results import check_format
        check_format(data, BENCH_FORMAT)
        try:
            return cls(model_id=str(data["model"]), arch=str(data["arch"]), task_type=str(data["task_type"]),
                       device=str(data["device"]), attn_implementation=str(data["attn_implementation"]),
                       torch_threads=int(data["torch_threads"]), interop_threads=int(data["interop_threads"]),
                       seq_len=int(data["seq_len"]),
                       decoder_len=None if data.get("decoder_len") is None else int(data["decoder_len"]),
                       mask=HeadMask.from_lists(data["mask"]), ceiling=CeilingReport.from_json(data["ceiling"]),
                       rows=tuple(BenchRow.from_json(r) for r in data["rows"]),
                       comparisons=tuple(BenchComparison.from_json(c) for c in data["speedups"]),
                       memory_measure=str(data["memory_measure"]), machine=dict(data.get("machine") or {}),
                       settings=dict(data.get("settings") or {}),
                       provenance=dict(data.get("provenance") or {}), seconds=float(data.get("seconds", 0.0)),
                       note=str(data.get("note", MASKING_NOTE)))
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"The bench file is malformed ({exc!r}); re-run the benchmark.") from None


@dataclass(frozen=True)
class Timings:
    """What :func:`interleaved_latencies` measured. Index ``i`` of every list is the same round."""

    seconds: Mapping[str, list[float]]      # name -> wall seconds per call, one per round
    wall_seconds: float                     # timed rounds only (no warm-up)
    cpu_seconds: float                      # process CPU time over the same span (all threads)

    @property
    def rounds(self) -> int:
        return len(next(iter(self.seconds.values()), []))

    def cpu_share(self, threads: int) -> float:
        """CPU time the process got / (wall time * threads): about 1 on an idle machine, lower when
        other processes took the cores (then latencies are inflated and noisy)."""
        return self.cpu_seconds / (self.wall_seconds * threads) if self.wall_seconds > 0 and threads else 0.0


def interleaved_latencies(runs: Mapping[str, Callable[[], object]], *, warmup: int = 3, repeats: int = 10,
                          min_seconds: float = 2.0, device: torch.device | str = "cpu",
                          progress: ProgressCallback | None = None, stage: str = "bench",
                          done: int = 0, total: int | None = None) -> Timings:
    """Time several callables side by side: one call of each per round, order rotating per round.

    Runs ``warmup`` untimed rounds, then timed rounds until at least ``repeats`` rounds *and*
    ``min_seconds`` of timed calls (all callables together) are done. Garbage collection is off
    while timing; CUDA is synchronised before and after every call. Machine noise that lasts
    longer than a round hits every callable of that round, so per-round ratios cancel it.
    """
    names = list(runs)
    cuda = torch.device(device).type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    for i in range(warmup):
        report(progress, stage, done, total, f"warm-up {i + 1}/{warmup}")
        for name in names:
            runs[name]()
    sync()
    times: dict[str, list[float]] = {n: [] for n in names}
    spent, rounds = 0.0, 0
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    try:
        while rounds < repeats or spent < min_seconds:
            report(progress, stage, done, total, f"round {rounds + 1}")
            k = rounds % len(names)
            for name in names[k:] + names[:k]:         # rotate who goes first: no order bias
                sync()
                start = time.perf_counter()
                runs[name]()
                sync()
                elapsed = time.perf_counter() - start
                times[name].append(elapsed)
                spent += elapsed
            rounds += 1
    finally:
        if gc_was_enabled:
            gc.enable()
    return Timings(times, time.perf_counter() - wall0, time.process_time() - cpu0)


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):       # not on every platform
        return None


def _weights_bytes(model: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()))


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 briefly: kineto prints 'profiler_start/stop' lines there from C++."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _peak_forward_bytes(call: Callable[[], object], device: torch.device) -> int | None:
    """Peak bytes allocated during one ``call()`` beyond what was allocated before it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        call()
        torch.cuda.synchronize(device)
        return max(0, torch.cuda.max_memory_allocated(device) - before)
    try:   # the profiler's allocation events are the only exact CPU allocation trace torch offers
        from torch._C._profiler import _EventType
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return None
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():
        prof.start()
    try:
        call()
    finally:
        with _quiet_stderr():
            prof.stop()
    try:
        events = []
        stack = list(prof.profiler.kineto_results.experimental_event_tree())
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            if node.tag == _EventType.Allocation:
                events.append((node.start_time_ns, node.extra_fields.ptr, node.extra_fields.alloc_size))
    except (AttributeError, RuntimeError):     # private API moved: say "not measured", not a wrong number
        return None
    live: dict[int, int] = {}
    current = peak = 0
    for _, ptr, size in sorted(events, key=lambda e: e[0]):
        if size > 0:
            live[ptr] = live.get(ptr, 0) + size
            current += size
        elif ptr in live:                       # frees of memory allocated before the call are ignored
            current -= live.pop(ptr)
        peak = max(peak, current)
    return peak


def synthetic_inputs(config, batch_size: int, seq_len: int, decoder_len: int | None,
                     device: torch.device, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random token ids of exactly ``seq_len`` tokens (never the pad id), attention mask all ones.

    Encoder-decoder models also get ``decoder_input_ids`` of ``decoder_len`` tokens and
    ``use_cache=False`` (a teacher-forced forward pass, as in evaluation of the loss).
    """
    g = torch.Generator().manual_seed(seed)
    vocab = int(config.vocab_size)
    pad = getattr(config, "pad_token_id", None)

    def ids(length: int) -> torch.Tensor:
        if pad is not None and 0 <= pad < vocab and vocab > 1:
            x = torch.randint(0, vocab - 1, (batch_size, length), generator=g)
            return (x + (x >= pad).long()).to(device)        # skip the pad id
        return torch.randint(0, vocab, (batch_size, length), generator=g).to(device)

    inputs = {"input_ids": ids(seq_len),
              "attention_mask": torch.ones(batch_size, seq_len, dtype=torch.long, device=device)}
    if getattr(config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = ids(decoder_len)
        inputs["use_cache"] = False
    return inputs


def benchmark(loaded, mask: HeadMask | None = None, *, batch_sizes: Sequence[int] = (1, 8, 32),
              seq_len: int = 128, decoder_len: int | None = None, device: str | None = None,
              warmup: int = 3, repeats: int = 10, min_seconds: float = 2.0, measure_memory: bool = True,
              seed: int = 0, progress: ProgressCallback | None = None) -> BenchResult:
    """Time dense, masked and pruned variants of ``loaded`` side by side, and count the FLOP ceiling.

    Args:
        loaded: a ``LoadedModel``; never modified (the pruned variant is ``prune_heads``' copy; if
            ``device`` differs from the model's, a copy is moved there). Its attention
            implementation (``eager`` / ``sdpa``) is what gets measured and is recorded.
        mask: 1 = keep, 0 = remove, per kind and layer. ``None``: :func:`half_mask` (seed 0).
        batch_sizes: sequences per forward pass.
        seq_len: tokens per sequence, exactly (synthetic ids, no padding).
        decoder_len: decoder tokens for encoder-decoder models (default ``seq_len``).
        device: 'cpu' or 'cuda' (checked by ``models.resolve_device``); None: the model's own device.
        warmup: untimed rounds per batch size.
        repeats, min_seconds: timed rounds per batch size: at least ``repeats`` rounds and at least
            ``min_seconds`` of timed forward passes (three variants together).
        measure_memory: one extra forward pass per variant and batch size for the peak memory.
        progress: ``report`` callback, stage ``"bench"``; raise ``Cancelled`` from it to stop.

    Returns:
        a :class:`BenchResult`. Timing runs under ``torch.inference_mode()``, one forward pass per
        call (for translation models: teacher-forced, ``use_cache=False``, logits over the vocabulary).
    """
    from .models import resolve_device
    from .results import provenance

    started = time.perf_counter()
    load_before = _load_average()
    if not batch_sizes or any(int(b) < 1 for b in batch_sizes):
        raise HeadpruneError(f"batch_sizes must be positive integers, got {list(batch_sizes)}.")
    if repeats < 1 or warmup < 0 or min_seconds < 0:
        raise HeadpruneError(f"Need repeats >= 1, warmup >= 0, min_seconds >= 0; got {repeats}, {warmup}, "
                             f"{min_seconds}.")
    config = loaded.model.config
    max_pos = getattr(config, "max_position_embeddings", None)
    if max_pos is not None and seq_len > max_pos:
        raise HeadpruneError(f"seq_len {seq_len} is longer than the model's {max_pos} positions; use a shorter one.")
    enc_dec = bool(getattr(config, "is_encoder_decoder", False))
    dec_len = (decoder_len or seq_len) if enc_dec else None
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
    report(progress, "bench", 0, len(batch_sizes), "pruning a copy")
    pruned = prune_heads(dense, mask).eval()
    sites = base.sites
    ceiling = flop_ceiling(config, mask, seq_len, decoder_len=dec_len)
    attn_impl = str(getattr(config, "_attn_implementation", None) or "unknown")

    def run_dense(inputs: dict) -> object:
        return dense(**inputs)

    def run_masked(inputs: dict) -> object:
        with apply_mask(base, mask):
            return dense(**inputs)

    def run_pruned(inputs: dict) -> object:
        return pruned(**inputs)

    variants = {"dense": (run_dense, dense, mask.n_total), "masked": (run_masked, dense, mask.n_total),
                "pruned": (run_pruned, pruned, mask.n_kept)}
    rows: list[BenchRow] = []
    comparisons: list[BenchComparison] = []
    with torch.inference_mode():
        for i, bs in enumerate(int(b) for b in batch_sizes):
            inputs = synthetic_inputs(config, bs, seq_len, dec_len, dev, seed=seed + i)
            timed = interleaved_latencies({name: (lambda f=f: f(inputs)) for name, (f, _, _) in variants.items()},
                                          warmup=warmup, repeats=repeats, min_seconds=min_seconds, device=dev,
                                          progress=progress, stage="bench", done=i, total=len(batch_sizes))
            times = timed.seconds
            for name, (f, model, heads) in variants.items():
                report(progress, "bench", i, len(batch_sizes), f"batch {bs}: memory of {name}")
                peak = _peak_forward_bytes(lambda: f(inputs), dev) if measure_memory else None
                wb = _weights_bytes(model)
                rows.append(BenchRow(name, bs, LatencyStats.of(times[name]), parameter_count(model), wb,
                                     None if peak is None else wb + peak, heads))
            stats = {r.variant: r.latency for r in rows[-3:]}
            speedup = stats["dense"].median / stats["pruned"].median
            paired = statistics.median(a / b for a, b in zip(times["dense"], times["pruned"]))
            comparisons.append(BenchComparison(
                bs, speedup, paired, stats["dense"].min / stats["pruned"].min,
                stats["masked"].median / stats["dense"].median, ceiling.speedup,
                None if dev.type == "cuda" else timed.cpu_share(torch.get_num_threads())))
            report(progress, "bench", i + 1, len(batch_sizes), f"batch {bs}: {speedup:.3f}x")
    settings = {"batch_sizes": [int(b) for b in batch_sizes], "seq_len": seq_len, "decoder_len": dec_len,
                "warmup": warmup, "repeats": repeats, "min_seconds": min_seconds, "seed": seed,
                "inputs": "synthetic token ids, no padding, attention mask all ones"
                          + ("; teacher-forced decoder, use_cache=False" if enc_dec else ""),
                "order": "variants interleaved per round, first variant rotating"}
    return BenchResult(model_id=str(loaded.model_id), arch=str(loaded.arch), task_type=str(loaded.task_type),
                       device=str(dev), attn_implementation=attn_impl, torch_threads=torch.get_num_threads(),
                       interop_threads=torch.get_num_interop_threads(), seq_len=seq_len, decoder_len=dec_len,
                       mask=mask, ceiling=ceiling, rows=tuple(rows), comparisons=tuple(comparisons),
                       memory_measure=(CUDA_MEMORY_MEASURE if dev.type == "cuda" else CPU_MEMORY_MEASURE)
                       if measure_memory else "not measured",
                       machine={"cpus": os.cpu_count(), "load_before": load_before, "load_after": _load_average()},
                       settings=settings,
                       provenance=provenance(loaded, method="bench", settings=settings, device=str(dev)),
                       seconds=time.perf_counter() - started)


# ==================================================================================================
# Terminal summary
# ==================================================================================================

def _mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.1f}"


def format_bench(result: BenchResult) -> str:
    """A plain-text table: per batch size, each variant's latency, throughput and memory, beside the ceiling."""
    c = result.ceiling
    lines = [
        f"model {result.model_id} ({result.arch}), device {result.device}, attention {result.attn_implementation}, "
        f"torch threads {result.torch_threads}",
        f"seq_len {result.seq_len}" + (f", decoder_len {result.decoder_len}" if result.decoder_len else "")
        + f"; heads kept {result.mask.n_kept}/{result.mask.n_total}",
        f"FLOP ceiling: {c.removed_fraction:.1%} of multiply-adds removed -> at most {c.speedup:.3f}x faster",
        "",
        f"{'batch':>5}  {'variant':<7} {'median ms':>10} {'IQR ms':>17} {'ex/s':>8} {'peak MiB':>9} "
        f"{'params':>11}  {'speed-up':>8} {'ceiling':>8} {'of ceil.':>8}  {'paired':>15}",
    ]
    for comp in result.comparisons:
        for variant in VARIANTS:
            r = result.row(variant, comp.batch_size)
            lat = r.latency
            paired = ""
            if variant == "dense":
                sp, ce, frac = "1.000x", f"{comp.ceiling_speedup:.3f}x", ""
            elif variant == "masked":
                sp, ce, frac = f"{1 / comp.masked_ratio:.3f}x", "1.000x", ""
            else:
                sp, ce, frac = f"{comp.speedup:.3f}x", f"{comp.ceiling_speedup:.3f}x", f"{comp.fraction_of_ceiling:.1%}"
                paired = f"{comp.paired_speedup:.3f}x ({comp.paired_fraction_of_ceiling:.1%})"
            iqr = f"{lat.q1 * 1e3:.2f}-{lat.q3 * 1e3:.2f}"
            lines.append(f"{comp.batch_size:>5}  {variant:<7} {lat.median * 1e3:>10.2f} {iqr:>17} "
                         f"{r.examples_per_s:>8.1f} {_mib(r.peak_memory_bytes):>9} {r.parameters:>11,}  "
                         f"{sp:>8} {ce:>8} {frac:>8}  {paired:>15}")
    lines += ["",
              "speed-up = dense median / variant median; ceiling = 1 / (1 - removed fraction of multiply-adds); "
              "paired = median over rounds of dense/pruned from the same round.",
              f"Note: {MASKING_NOTE}",
              f"Peak memory: {result.memory_measure}."]
    shares = [comp.cpu_share for comp in result.comparisons if comp.cpu_share is not None]
    m = result.machine
    context = (f"Machine: {m.get('cpus')} CPUs, load average {m.get('load_before')} before, {m.get('load_after')} after"
               + (f"; CPU share while timing {min(shares):.0%}-{max(shares):.0%}" if shares else "") + ".")
    lines.append(context)
    if result.busy:
        lines.append("WARNING: other processes competed for the CPUs during this run; latencies are inflated and "
                     "noisy. Trust the paired ratios more than the medians, or re-run on an idle machine.")
    return "\n".join(lines)
