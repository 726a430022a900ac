"""What a measured speed-up may be called: a gain, a gain at the ceiling, noise, or no change at all.

A speed-up is dense median / pruned median from one interleaved run. Its spread is taken from
the two interquartile ranges: ``dense.q1 / pruned.q3`` (worst case) to ``dense.q3 / pruned.q1``
(best case). :func:`judge_speedup` reads the numbers; :func:`speed_verdict` reads one batch size
of a :class:`~.results.BenchResult`. The dashboard and the CLI print the verdict's text instead
of the bare ratio, so a figure that noise could explain is never presented as a gain.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from pruning_core.bench.timing import LatencyStats

FULL, GAIN, AT_CEILING, NOISE, ABOVE, SLOWER = ("no change: full mask", "gain", "at ceiling", "within noise",
                                                "above ceiling", "slower")
VERDICTS: tuple[str, ...] = (FULL, GAIN, AT_CEILING, NOISE, ABOVE, SLOWER)
# a median this far above the FLOP ceiling still counts as reaching it (timing noise of a few per cent);
# further above, the figure is noise rather than removed work
CEILING_TOLERANCE = 1.10
FULL_MASK_TEXT = "all heads kept: same model as dense"
MASKED_TEXT = "same computation as dense"        # what masked latency is, whatever its ratio shows


@dataclass(frozen=True)
class SpeedVerdict:
    """A judged speed-up: ``kind`` is one of :data:`VERDICTS`; ``low``-``high`` its IQR-derived spread."""

    kind: str
    speedup: float          # dense median / pruned median
    low: float              # dense q1 / pruned q3
    high: float             # dense q3 / pruned q1
    ceiling: float          # the FLOP ceiling of the same mask

    @property
    def is_gain(self) -> bool:
        return self.kind in (GAIN, AT_CEILING)

    @property
    def spread(self) -> str:
        """'IQR 1.10-1.24x'."""
        return f"IQR {self.low:.2f}-{self.high:.2f}x"

    @property
    def short(self) -> str:
        """A few words for a metric value or a table cell: '1.18x faster', 'within noise', ..."""
        return {FULL: "no change", GAIN: f"{self.speedup:.2f}x faster", AT_CEILING: f"{self.speedup:.2f}x faster",
                NOISE: "within noise", ABOVE: f"at most {self.ceiling:.2f}x",
                SLOWER: f"{self.speedup:.2f}x (slower)"}[self.kind]

    @property
    def text(self) -> str:
        """One sentence that never presents noise as a gain."""
        if self.kind == FULL:
            return FULL_MASK_TEXT
        measured = f"{self.speedup:.2f}x ({self.spread})"
        if self.kind == GAIN:
            return f"{self.speedup:.2f}x faster ({self.spread}; FLOP ceiling {self.ceiling:.2f}x)"
        if self.kind == NOISE:
            return f"within noise: {measured} overlaps 1.0x, so no difference was measured"
        if self.kind == AT_CEILING:
            return (f"{self.speedup:.2f}x faster, at the {self.ceiling:.2f}x the removed arithmetic allows "
                    f"(the rest is timing noise; {self.spread})")
        if self.kind == ABOVE:
            return (f"above the FLOP ceiling: {measured} measured against the {self.ceiling:.2f}x the removed "
                    f"arithmetic allows, so the excess is timing noise; count on at most {self.ceiling:.2f}x")
        return f"slower: the pruned copy took longer than dense, {measured}"


def speedup_spread(dense: LatencyStats, pruned: LatencyStats) -> tuple[float, float]:
    """(worst, best) speed-up the two latency IQRs allow: dense q1 / pruned q3, dense q3 / pruned q1."""
    def ratio(a: float, b: float) -> float:
        return a / b if b > 0 else math.inf
    return ratio(dense.q1, pruned.q3), ratio(dense.q3, pruned.q1)


def judge_speedup(speedup: float, low: float, high: float, ceiling: float, *, full: bool = False) -> SpeedVerdict:
    """The verdict on one measured speed-up.

    Order of the checks: a full mask is "no change" whatever was measured; a spread that contains
    1.0 is "within noise"; a median above the FLOP ceiling is "at ceiling" (a gain of all the removed
    work, plus timing noise) when its spread reaches the ceiling or it is within CEILING_TOLERANCE
    of it, else "above ceiling" (noise, since no implementation removes more work than the ceiling
    counts); a spread wholly below 1.0 is "slower"; anything else is a "gain".
    """
    if full:
        kind = FULL
    elif not all(math.isfinite(x) for x in (speedup, low, high)) or low <= 1.0 <= high:
        kind = NOISE
    elif speedup > ceiling:
        kind = AT_CEILING if low <= ceiling or speedup <= CEILING_TOLERANCE * ceiling else ABOVE
    elif high < 1.0:
        kind = SLOWER
    else:
        kind = GAIN
    return SpeedVerdict(kind, speedup, low, high, ceiling)


def speed_verdict(result, batch_size: int | None = None) -> SpeedVerdict:
    """:func:`judge_speedup` for one batch size (default: the first) of a ``BenchResult``."""
    size = result.batch_sizes[0] if batch_size is None else batch_size
    comp = next(c for c in result.comparisons if c.batch_size == size)
    low, high = speedup_spread(result.row("dense", size).latency, result.row("pruned", size).latency)
    return judge_speedup(comp.speedup, low, high, comp.ceiling_speedup, full=result.mask.is_full())
