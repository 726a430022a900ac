"""The timing harness: interleaved latencies, their statistics, machine load and memory peaks.

Nothing here knows about models or masks: :func:`interleaved_latencies` times any callables side
by side; :func:`peak_forward_bytes` measures one call's peak allocation.
"""
from __future__ import annotations

import contextlib
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from pruning_core.core.progress import ProgressCallback, report
from pruning_core.core.io.codec import JsonRecord, json_field



@dataclass(frozen=True)
class LatencyStats(JsonRecord):
    """Seconds per batch over repeated runs."""

    median: float = field(metadata=json_field("median_s"))
    q1: float = field(metadata=json_field("q1_s"))          # 25th percentile
    q3: float = field(metadata=json_field("q3_s"))          # 75th percentile
    min: float = field(metadata=json_field("min_s"))
    max: float = field(metadata=json_field("max_s"))
    n: int = field(metadata=json_field("n_runs"))           # timed runs

    @classmethod
    def of(cls, seconds: Sequence[float]) -> "LatencyStats":
        xs = sorted(seconds)
        if len(xs) >= 2:
            q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
        else:
            q1 = q3 = xs[0]
        return cls(statistics.median(xs), q1, q3, xs[0], xs[-1], len(xs))


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


MIN_ROUNDS = 3         # timed rounds at least, whatever ``max_seconds`` says: a median needs three
YOUNG = 1              # the collection before timing: young objects only (a full one walks every object a loaded
#                        model's process holds, 0.2 to 0.5 s for ~440k on 2 cores, GIL held, and frees nothing there)


def interleaved_latencies(runs: Mapping[str, Callable[[], object]], *, warmup: int = 3, repeats: int = 10,
                          min_seconds: float = 2.0, device: torch.device | str = "cpu",
                          progress: ProgressCallback | None = None, stage: str = "bench",
                          done: int = 0, total: int | None = None,
                          pause: Callable[[], bool] | None = None, max_seconds: float | None = None) -> Timings:
    """Time several callables side by side: one call of each per round, order rotating per round.

    Runs ``warmup`` untimed rounds, then timed rounds until at least ``repeats`` rounds *and*
    ``min_seconds`` of timed calls (all callables together) are done; with ``max_seconds``, timing stops sooner
    once that much is spent and at least :data:`MIN_ROUNDS` rounds are done (a slow model's probe gives its
    figure in seconds, from fewer rounds). Garbage collection is off
    while timing; CUDA is synchronised before and after every call. Machine noise that lasts
    longer than a round hits every callable of that round, so per-round ratios cancel it.
    ``pause`` runs before every call and returns True when it let other work run meanwhile: that round is
    then timed again from its start, so no round pairs calls made on either side of someone else's work.
    """
    names = list(runs)
    cuda = torch.device(device).type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def paused() -> bool:
        return pause is not None and bool(pause())

    for i in range(warmup):
        report(progress, stage, done, total, f"warm-up {i + 1}/{warmup}")
        for name in names:
            paused()
            runs[name]()
    sync()
    times: dict[str, list[float]] = {n: [] for n in names}
    spent, rounds = 0.0, 0
    gc.collect(YOUNG)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    try:
        while rounds < repeats or spent < min_seconds:
            if max_seconds is not None and rounds >= MIN_ROUNDS and spent >= max_seconds:
                break
            report(progress, stage, done, total, f"round {rounds + 1}")
            k = rounds % len(names)
            this_round: dict[str, float] = {}
            for name in names[k:] + names[:k]:         # rotate who goes first: no order bias
                if paused() and this_round:
                    break                              # other work ran between this round's calls: redo it
                sync()
                start = time.perf_counter()
                runs[name]()
                sync()
                this_round[name] = time.perf_counter() - start
            if len(this_round) < len(names):
                continue
            for name, elapsed in this_round.items():
                times[name].append(elapsed)
                spent += elapsed
            rounds += 1
    finally:
        if gc_was_enabled:
            gc.enable()
    return Timings(times, time.perf_counter() - wall0, time.process_time() - cpu0)


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):       # not on every platform
        return None


def weights_bytes(model: nn.Module) -> int:
    """Bytes of ``model``'s parameters and buffers."""
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


def peak_forward_bytes(call: Callable[[], object], device: torch.device) -> int | None:
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
