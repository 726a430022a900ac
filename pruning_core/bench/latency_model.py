"""A latency estimate for any mask, from timings made once per model: dense, and without each kind's heads.

Within one attention kind every layer has the same shape, so each removed head of kind ``k`` is taken to save
the same time, ``saving[k] / heads[k]``, where ``saving[k]`` is what removing every head of that kind saved when
timed (dense against physically pruned, interleaved, :func:`pruning_core.bench.benchmark`):

    estimate(mask) = dense - sum over kinds k of saving[k] * removed[k] / heads[k]

It is an estimate (linear in the heads removed; a grouped-query model frees a key/value head only with the last
query head of its group), shown as one until a measurement of the mask itself replaces it.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pruning_core.core.heads import HeadMask
from pruning_core.core.progress import ProgressCallback


@dataclass(frozen=True)
class LatencyModel:
    """Seconds of one probe pass (``batch_size`` x ``seq_len``) with every head, and what each kind's heads cost."""

    dense_s: float                          # median seconds of one pass, every head kept
    saving_s: Mapping[str, float]           # kind -> seconds saved by removing every head of that kind (>= 0)
    heads: Mapping[str, int]                # kind -> heads of that kind in the model
    batch_size: int
    seq_len: int
    device: str
    measured_at: float                      # time.time() when calibrated
    load: float | None = None               # 1-minute load average before calibrating

    def __post_init__(self) -> None:
        if self.dense_s <= 0 or any(s < 0 for s in self.saving_s.values()):
            raise ValueError(f"a latency model needs dense_s > 0 and savings >= 0, got {self.dense_s} and "
                             f"{dict(self.saving_s)}")
        if set(self.saving_s) != set(self.heads) or any(n < 1 for n in self.heads.values()):
            raise ValueError(f"saving_s and heads must name the same kinds, each with heads; got {dict(self.saving_s)} "
                             f"and {dict(self.heads)}")

    def estimate(self, mask: HeadMask) -> float:
        """Estimated seconds of one probe pass of the physically pruned model under ``mask``."""
        removed = {kind: sum(row.count(0) for row in rows) for kind, rows in mask.kinds.items()}
        unknown = set(removed) - set(self.heads)
        if unknown:
            raise ValueError(f"the mask has kinds {sorted(unknown)} that this latency model has no timing for "
                             f"(it knows {sorted(self.heads)})")
        saved = sum(self.saving_s[kind] * removed[kind] / self.heads[kind] for kind in removed)
        return max(self.dense_s - saved, 0.0)

    def speedup(self, mask: HeadMask) -> float:
        """Estimated dense / pruned latency under ``mask``."""
        pruned = self.estimate(mask)
        return self.dense_s / pruned if pruned > 0 else float("inf")


def calibrate(loaded, *, batch_size: int, seq_len: int, warmup: int = 1, repeats: int = 5, min_seconds: float = 0.3,
              max_seconds: float | None = None, progress: ProgressCallback | None = None,
              pause: Callable[[], bool] | None = None) -> LatencyModel:
    """Time ``loaded`` dense against pruned of every head of each kind in turn (one :func:`benchmark` per kind,
    the same probe the dashboard times), and return the :class:`LatencyModel` of those timings. ``pause`` and
    ``max_seconds`` (per kind): as in :func:`benchmark`."""
    from pruning_core.bench.run import benchmark
    from pruning_core.bench.timing import load_average

    load = load_average()
    layout = loaded.layout
    dense: list[float] = []
    saving: dict[str, float] = {}
    result = None
    for kind, rows in layout.kinds.items():
        mask = HeadMask({k: tuple((0 if k == kind else 1,) * n for n in r) for k, r in layout.kinds.items()})
        result = benchmark(loaded, mask, batch_sizes=(batch_size,), seq_len=seq_len, warmup=warmup, repeats=repeats,
                           min_seconds=min_seconds, max_seconds=max_seconds, measure_memory=False, progress=progress,
                           variants=("dense", "pruned"), pause=pause)
        d, p = result.row("dense", batch_size).latency.median, result.row("pruned", batch_size).latency.median
        dense.append(d)
        saving[kind] = max(d - p, 0.0)
    dense.sort()
    return LatencyModel(dense_s=dense[len(dense) // 2], saving_s=saving,
                        heads={k: sum(rows) for k, rows in layout.kinds.items()}, batch_size=batch_size,
                        seq_len=result.seq_len if result is not None else seq_len, device=str(loaded.device),
                        measured_at=time.time(), load=load[0] if load else None)
