"""How much faster a head-pruned model is, measured side by side, how much faster it could be, and where it runs.

- :mod:`.ceiling`: :func:`flop_ceiling`, the best speed-up removing the masked heads can buy,
  counted from the architecture adapter's FLOP dimensions.
- :mod:`.timing`: the interleaved timing harness, latency statistics, load average, memory peaks.
- :mod:`.run`: :func:`benchmark` (dense vs masked vs pruned), inputs, :func:`timing_model` (sdpa attention).
- :mod:`.results`: the result dataclasses and the ``headprune.bench/1`` JSON format
  (:mod:`.codec` writes and reads them generically).
- :mod:`.verdict`: :func:`speed_verdict`, what a measured speed-up may be called (gain, within
  noise, above the ceiling, no change for a full mask).
- :mod:`.report`: :func:`format_bench`, the terminal table.
- :mod:`.export`: the pruned model as ONNX (ONNX Runtime) and GGUF (llama.cpp), checked and timed there.
"""
from __future__ import annotations

from pruning_core.bench.ceiling import CeilingLayer, CeilingReport, flop_ceiling
from pruning_core.bench.report import format_bench
from pruning_core.bench.results import (
    BENCH_FORMAT,
    CPU_MEMORY_MEASURE,
    CUDA_MEMORY_MEASURE,
    MASKING_NOTE,
    VARIANTS,
    BenchComparison,
    BenchResult,
    BenchRow,
)
from pruning_core.modeling.presets import half_mask
from pruning_core.bench.run import (TIMING_ATTENTION, audio_frames, benchmark, synthetic_inputs, text_positions,
                                    timing_model)
from pruning_core.bench.timing import (
    LatencyStats,
    Timings,
    interleaved_latencies,
    load_average,
    peak_forward_bytes,
    weights_bytes,
)
from pruning_core.bench.verdict import (
    FULL_MASK_TEXT,
    MASKED_TEXT,
    VERDICTS,
    SpeedVerdict,
    judge_speedup,
    speed_verdict,
    speedup_spread,
)

__all__ = ["BENCH_FORMAT", "CPU_MEMORY_MEASURE", "CUDA_MEMORY_MEASURE", "MASKING_NOTE", "VARIANTS",
           "BenchComparison", "BenchResult", "BenchRow", "CeilingLayer", "CeilingReport", "FULL_MASK_TEXT",
           "LatencyStats", "MASKED_TEXT", "SpeedVerdict", "Timings", "VERDICTS", "judge_speedup", "speed_verdict",
           "speedup_spread",
           "TIMING_ATTENTION", "audio_frames", "benchmark", "flop_ceiling", "format_bench", "half_mask",
           "interleaved_latencies", "load_average", "peak_forward_bytes", "synthetic_inputs", "text_positions",
           "timing_model", "weights_bytes"]
