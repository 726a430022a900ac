"""What a benchmark measured, and its JSON file format ``headprune.bench/1`` (written by the generic codec)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from pruning_core.core.io.codec import BENCH_FORMAT, JsonRecord, json_field
from pruning_core.core.heads import HeadMask
from pruning_core.bench.ceiling import CeilingReport
from pruning_core.bench.timing import LatencyStats

# a benchmark counts as disturbed by other processes above this load over the CPU count, or below this
# share of CPU time while the load reached the CPU count (see BenchResult.busy)
BUSY_LOAD_MARGIN = 0.5
BUSY_CPU_SHARE = 0.8
VARIANTS: tuple[str, ...] = ("dense", "masked", "pruned")
MASKING_NOTE = ("masking removes no computation: masked latency ≈ dense. Gates zero the removed heads' "
                "outputs but every head is still computed; only the pruned copy is smaller and faster.")
CPU_MEMORY_MEASURE = ("parameter+buffer bytes of the variant + peak bytes of tensors allocated during one "
                      "forward pass and alive at the same time (torch profiler allocation events, "
                      "profile_memory=True); not process RSS")
CUDA_MEMORY_MEASURE = ("parameter+buffer bytes of the variant + (torch.cuda.max_memory_allocated during one "
                       "forward pass, after reset_peak_memory_stats, minus memory_allocated just before it)")


@dataclass(frozen=True)
class BenchRow(JsonRecord):
    """One variant at one batch size."""

    variant: str                        # "dense" | "masked" | "pruned"
    batch_size: int
    latency: LatencyStats = field(metadata={"flatten": True})     # seconds per batch
    examples_per_s: float = field(init=False)
    parameters: int
    weights_bytes: int                  # parameters + buffers
    peak_memory_bytes: int | None       # see BenchResult.memory_measure; None if it could not be measured
    heads_kept: int                     # heads that compute (masked: all of them still compute)

    def __post_init__(self) -> None:
        median = self.latency.median
        self._derive(examples_per_s=self.batch_size / median if median > 0 else math.inf)


@dataclass(frozen=True)
class BenchComparison(JsonRecord):
    """Pruned and masked against dense at one batch size, from the same interleaved run."""

    batch_size: int
    speedup: float                 # dense median / pruned median (the headline figure)
    paired_speedup: float          # median over rounds of dense_i / pruned_i (same round, same noise)
    best_speedup: float            # fastest dense / fastest pruned (least disturbed runs)
    masked_ratio: float | None = field(metadata=json_field("masked_over_dense"))   # masked / dense median (≈ 1);
    #                                                        None when masked was not timed
    ceiling_speedup: float
    fraction_of_ceiling: float = field(init=False)          # speedup / ceiling; >= 0.95 is the target
    paired_fraction_of_ceiling: float = field(init=False)
    cpu_share: float | None        # CPU time got / (wall * threads) while timing; None on CUDA

    def __post_init__(self) -> None:
        self._derive(fraction_of_ceiling=self.speedup / self.ceiling_speedup,
                     paired_fraction_of_ceiling=self.paired_speedup / self.ceiling_speedup)


@dataclass(frozen=True, kw_only=True)
class BenchResult(JsonRecord):
    """Dense, masked and pruned latency, throughput and memory per batch size, with the FLOP ceiling."""

    _malformed = "The bench file is malformed; re-run the benchmark"

    format: str = field(default=BENCH_FORMAT, init=False)
    model_id: str = field(metadata=json_field("model"))
    arch: str
    task_type: str
    device: str
    attn_implementation: str            # what the model was loaded with ("eager", "sdpa", ...)
    torch_threads: int
    interop_threads: int
    seq_len: int
    decoder_len: int | None             # decoder input length for encoder-decoder models
    mask: HeadMask = field(metadata={"decode": HeadMask.from_lists})
    heads_kept: int = field(init=False)
    heads_total: int = field(init=False)
    note: str = MASKING_NOTE
    memory_measure: str
    machine: Mapping = field(default_factory=dict)       # cpus, load averages before/after (noise context)
    ceiling: CeilingReport
    comparisons: tuple[BenchComparison, ...] = field(metadata=json_field("speedups"))
    rows: tuple[BenchRow, ...]
    settings: Mapping = field(default_factory=dict)      # warmup, repeats, min_seconds, seed, ...
    seconds: float = 0.0
    provenance: Mapping = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._derive(heads_kept=self.mask.n_kept, heads_total=self.mask.n_total)

    def row(self, variant: str, batch_size: int) -> BenchRow:
        for r in self.rows:
            if r.variant == variant and r.batch_size == batch_size:
                return r
        raise KeyError((variant, batch_size))

    @property
    def variants(self) -> tuple[str, ...]:
        """The variants timed, in :data:`VARIANTS` order (the live panel times only dense and pruned)."""
        return tuple(v for v in VARIANTS if any(r.variant == v for r in self.rows))

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(c.batch_size for c in self.comparisons)

    @property
    def busy(self) -> bool:
        """Whether other processes competed for the CPUs: the load average above the CPU count by
        BUSY_LOAD_MARGIN, or a CPU share under BUSY_CPU_SHARE while the load reached the CPU count. A
        low share alone is no sign of others (a small model's operations do not fill every thread), and
        a load of 1 on 2 CPUs is this server's own work."""
        cpus = self.machine.get("cpus") or 0
        loads = [l[0] for l in (self.machine.get("load_before"), self.machine.get("load_after")) if l]
        shares = [c.cpu_share for c in self.comparisons if c.cpu_share is not None]
        if not (cpus and loads):
            return False
        return max(loads) > cpus + BUSY_LOAD_MARGIN or bool(shares and min(shares) < BUSY_CPU_SHARE
                                                             and max(loads) >= cpus)
