"""How much faster a head-pruned model is, measured side by side, and how much faster it could be.

- :mod:`.ceiling`: :func:`flop_ceiling`, the best speed-up removing the masked heads can buy,
  counted from the architecture adapter's FLOP dimensions.
- :mod:`.timing`: the interleaved timing harness, latency statistics, load average, memory peaks.
- :mod:`.run`: :func:`benchmark` (dense vs masked vs pruned) and its synthetic inputs.
- :mod:`.results`: the result dataclasses and the ``headprune.bench/1`` JSON format
  (:mod:`.codec` writes and reads them generically).
- :mod:`.report`: :func:`format_bench`, the terminal table.
"""
from __future__ import annotations

from .ceiling import CeilingLayer, CeilingReport, flop_ceiling
from .report import format_bench
from .results import (BENCH_FORMAT, CPU_MEMORY_MEASURE, CUDA_MEMORY_MEASURE, MASKING_NOTE, VARIANTS,
                      BenchComparison, BenchResult, BenchRow)
from ..presets import half_mask
from .run import benchmark, synthetic_inputs
from .timing import LatencyStats, Timings, interleaved_latencies, load_average, peak_forward_bytes, weights_bytes

__all__ = ["BENCH_FORMAT", "CPU_MEMORY_MEASURE", "CUDA_MEMORY_MEASURE", "MASKING_NOTE", "VARIANTS",
           "BenchComparison", "BenchResult", "BenchRow", "CeilingLayer", "CeilingReport", "LatencyStats", "Timings",
           "benchmark", "flop_ceiling", "format_bench", "half_mask", "interleaved_latencies", "load_average",
           "peak_forward_bytes", "synthetic_inputs", "weights_bytes"]
