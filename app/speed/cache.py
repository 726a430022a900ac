"""The Speed page's sweep: dense vs masked vs physically pruned at several batch sizes, measured on every call
(never cached: a timing belongs to its moment and machine load). The rules of :mod:`app.model.cache` hold."""
from __future__ import annotations

from app.model.cache import timing
from app.runtime import board
from pruning_core import bench
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask
from pruning_core.core.progress import ProgressCallback

__all__ = ["devices", "speed_sweep"]

# Few repeats, so a sweep of the default on 2 CPU cores takes ~20-40 s.
SWEEP_WARMUP = 1
SWEEP_REPEATS = 5
SWEEP_MIN_SECONDS = 0.5


def devices() -> list[str]:
    """The devices the Speed page offers: CPU, and CUDA when present."""
    import torch
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def speed_sweep(spec: str, mask: HeadMask, batch_sizes: tuple[int, ...], seq_len: int, device: str,
                _progress: ProgressCallback | None = None):
    """``pruning_core.bench.benchmark`` of the timing model (:func:`app.model.cache.timing`: sdpa attention, as
    ``headprune bench``): dense vs masked vs pruned at each batch size, with the ceiling.

    Measured now on every call, never cached: a timing belongs to its moment and machine load (the
    Speed page keeps the result in the session and shows when and under what load it was made). Background work
    in :data:`app.runtime.board.GATE`: another session's click goes first, before each timed call."""
    with board.GATE.hold(urgent=False, progress=_progress, what="speed sweep"):
        loaded = timing(spec)
        max_pos = bench.text_positions(loaded.model.config)
        if max_pos is not None and seq_len > max_pos:
            raise HeadpruneError(f"{seq_len} tokens is more than this model's {max_pos} positions; choose a shorter "
                                 "sequence length.")
        return bench.benchmark(loaded, mask, batch_sizes=batch_sizes, seq_len=seq_len, device=device,
                               warmup=SWEEP_WARMUP, repeats=SWEEP_REPEATS, min_seconds=SWEEP_MIN_SECONDS,
                               progress=_progress, pause=board.pausing(_progress, "speed sweep"))
