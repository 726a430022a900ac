"""The benchmark's terminal summary: one plain-text table beside the ceiling."""
from __future__ import annotations

from pruning_core.bench.results import MASKING_NOTE, VARIANTS, BenchResult
from pruning_core.bench.verdict import MASKED_TEXT, speed_verdict


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
        for variant in (v for v in VARIANTS if v in result.variants):
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
    lines.append("")
    masked = f"; masked: {MASKED_TEXT}" if "masked" in result.variants else ""
    lines += [f"batch {comp.batch_size}: pruned {speed_verdict(result, comp.batch_size).text}{masked}"
              for comp in result.comparisons]
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
