"""The one head-index convention of the project, written once.

- Attention kinds are named ``encoder_self``, ``decoder_self`` and ``cross`` (encoder-decoder).
  An encoder-only model (BERT) has only ``encoder_self``.
- Layers and heads are zero-based. ``layout.kinds["encoder_self"][3] == 12`` means layer 3 of
  the encoder self-attention has 12 heads. After physical pruning a layer may have fewer, or 0.
- A mask holds, per kind, one row per layer with one entry per head: 1 = keep, 0 = removed.
- Scores have the same shape as masks, with floats; larger = more important.
"""
from __future__ import annotations

import math
import numbers
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pruning_core.core.errors import FormatError

KINDS: tuple[str, ...] = ("encoder_self", "decoder_self", "cross")
KIND_LABELS: dict[str, str] = {
    "encoder_self": "encoder self-attention",
    "decoder_self": "decoder self-attention",
    "cross": "encoder-decoder (cross) attention",
}
KIND_SHORT: dict[str, str] = {          # where a row or tick label has room for a word or two ("cross L0")
    "encoder_self": "encoder self",
    "decoder_self": "decoder self",
    "cross": "cross",
}

HeadId = tuple[str, int, int]  # (kind, layer, head)


@dataclass(frozen=True)
class HeadLayout:
    """How many heads each layer of each attention kind has."""

    kinds: Mapping[str, tuple[int, ...]]

    def __post_init__(self) -> None:
        for kind, rows in self.kinds.items():
            if kind not in KINDS:
                raise FormatError(f"Unknown attention kind {kind!r}; expected one of {KINDS}.")
            if any(n < 0 for n in rows):
                raise FormatError(f"Negative head count in {kind}: {rows}.")

    @property
    def total_heads(self) -> int:
        return sum(sum(rows) for rows in self.kinds.values())

    def heads(self) -> list[HeadId]:
        """Every head, in kind order, then layer, then head."""
        return [(k, l, h) for k, rows in self.kinds.items() for l, n in enumerate(rows) for h in range(n)]

    def describe(self) -> str:
        parts = []
        for kind, rows in self.kinds.items():
            if len(set(rows)) == 1:
                parts.append(f"{kind}: {len(rows)} layers x {rows[0]} heads")
            else:
                parts.append(f"{kind}: {len(rows)} layers, heads per layer {list(rows)}")
        return "; ".join(parts)

    def to_json(self) -> dict:
        # by hand: the wire form is the bare {kind: heads per layer} mapping, no field names
        return {k: list(v) for k, v in self.kinds.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Sequence[int]]) -> "HeadLayout":
        return cls({k: tuple(int(n) for n in v) for k, v in data.items()})


def _short(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for a message about a value read from a file."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _check_grid(kinds: Mapping[str, Sequence[Sequence]], layout: HeadLayout, what: str) -> None:
    """Raise FormatError unless ``kinds`` has exactly the layout's kinds, layers and heads."""
    if set(kinds) != set(layout.kinds):
        raise FormatError(
            f"The {what} has attention kinds {sorted(kinds)} but the model has {sorted(layout.kinds)}. "
            "It was probably made for another model; make a new one for this model.")
    for kind, rows in layout.kinds.items():
        got = [len(r) for r in kinds[kind]]
        if got != list(rows):
            raise FormatError(
                f"The {what}'s {kind} grid has heads per layer {got} but the model has {list(rows)}. "
                "It was probably made for another model; make a new one for this model.")


@dataclass(frozen=True)
class HeadMask:
    """Which heads are kept (1) and removed (0), per kind and layer."""

    kinds: Mapping[str, tuple[tuple[int, ...], ...]]

    def __post_init__(self) -> None:
        for kind, rows in self.kinds.items():
            if kind not in KINDS:
                raise FormatError(f"Unknown attention kind {kind!r} in mask; expected one of {KINDS}.")
            for row in rows:
                if any(v not in (0, 1) for v in row):
                    raise FormatError(f"Mask values must be 0 (removed) or 1 (kept); {kind} has row {list(row)}.")

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def full(cls, layout: HeadLayout) -> "HeadMask":
        """Keep every head."""
        return cls({k: tuple((1,) * n for n in rows) for k, rows in layout.kinds.items()})

    @classmethod
    def from_lists(cls, kinds: Mapping[str, Sequence[Sequence[int]]]) -> "HeadMask":
        """A mask from lists of rows of the whole numbers 0 and 1 (as read from JSON).

        Strict: 0.5, 1.0, true/false and "1" are refused, not rounded or converted.
        """
        fix = "Fix the mask or make a new one."
        if not isinstance(kinds, Mapping):
            raise FormatError(f"A mask must map attention kinds to lists of 0/1 rows; got {type(kinds).__name__}. {fix}")
        out = {}
        for kind, rows in kinds.items():
            if kind not in KINDS:
                raise FormatError(f"Unknown attention kind {str(kind)[:40]!r} in mask; expected one of {KINDS}. {fix}")
            if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence) or \
                    any(isinstance(r, (str, bytes)) or not isinstance(r, Sequence) for r in rows):
                raise FormatError(f"A mask must be lists of 0/1 per layer; {kind} is {_short(rows)}. {fix}")
            for layer, row in enumerate(rows):
                for head, v in enumerate(row):
                    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v not in (0, 1):
                        raise FormatError(f"Mask values must be exactly 0 (removed) or 1 (kept); {kind} layer "
                                          f"{layer} head {head} is {_short(v)}. {fix}")
            out[kind] = tuple(tuple(int(v) for v in row) for row in rows)
        return cls(out)

    @classmethod
    def from_removed(cls, layout: HeadLayout, removed: "set[HeadId] | Sequence[HeadId]") -> "HeadMask":
        removed = set(removed)
        return cls({k: tuple(tuple(0 if (k, l, h) in removed else 1 for h in range(n))
                             for l, n in enumerate(rows)) for k, rows in layout.kinds.items()})

    # -- queries ------------------------------------------------------------------------------
    @property
    def layout(self) -> HeadLayout:
        return HeadLayout({k: tuple(len(r) for r in rows) for k, rows in self.kinds.items()})

    @property
    def n_total(self) -> int:
        return self.layout.total_heads

    @property
    def n_kept(self) -> int:
        return sum(sum(r) for rows in self.kinds.values() for r in rows)

    def removed(self) -> list[HeadId]:
        return [(k, l, h) for k, rows in self.kinds.items() for l, r in enumerate(rows)
                for h, v in enumerate(r) if v == 0]

    def is_full(self) -> bool:
        return self.n_kept == self.n_total

    def check_fits(self, layout: HeadLayout) -> None:
        _check_grid(self.kinds, layout, "mask")

    # -- edits (each returns a new mask) --------------------------------------------------------
    def toggled(self, kind: str, layer: int, head: int) -> "HeadMask":
        rows = [list(r) for r in self.kinds[kind]]
        rows[layer][head] = 1 - rows[layer][head]
        return HeadMask({**self.kinds, kind: tuple(tuple(r) for r in rows)})

    def inverted(self) -> "HeadMask":
        return HeadMask({k: tuple(tuple(1 - v for v in r) for r in rows) for k, rows in self.kinds.items()})

    def to_json(self) -> dict:
        # by hand: the wire form is the bare {kind: [[per head] per layer]} lists, no field names
        return {k: [list(r) for r in rows] for k, rows in self.kinds.items()}


@dataclass(frozen=True)
class HeadScores:
    """One float per head (larger = more important), per kind and layer."""

    kinds: Mapping[str, tuple[tuple[float, ...], ...]]

    @classmethod
    def from_lists(cls, kinds: Mapping[str, Sequence[Sequence[float]]]) -> "HeadScores":
        """Scores from lists of rows of numbers (as read from JSON). Strict: text, true/false, NaN and
        infinity are refused, not converted."""
        fix = "Fix the scores or score the model again."
        if not isinstance(kinds, Mapping):
            raise FormatError(f"Scores must map attention kinds to lists of rows; got {type(kinds).__name__}. {fix}")
        out = {}
        for k, rows in kinds.items():
            if k not in KINDS:
                raise FormatError(f"Unknown attention kind {str(k)[:40]!r} in scores; expected one of {KINDS}. {fix}")
            if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence) or \
                    any(isinstance(r, (str, bytes)) or not isinstance(r, Sequence) for r in rows):
                raise FormatError(f"Scores must be lists of numbers per layer; {k} is {_short(rows)}. {fix}")
            for layer, row in enumerate(rows):
                for head, v in enumerate(row):
                    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
                        what = "NaN or infinity" if isinstance(v, numbers.Real) and not isinstance(v, bool) else "not a number"
                        raise FormatError(f"Scores must be finite numbers; {k} layer {layer} head {head} is "
                                          f"{_short(v)} ({what}). {fix}")
            out[k] = tuple(tuple(float(v) for v in row) for row in rows)
        return cls(out)

    @property
    def layout(self) -> HeadLayout:
        return HeadLayout({k: tuple(len(r) for r in rows) for k, rows in self.kinds.items()})

    def check_fits(self, layout: HeadLayout) -> None:
        _check_grid(self.kinds, layout, "scores file")

    def get(self, head: HeadId) -> float:
        k, l, h = head
        return self.kinds[k][l][h]

    def normalized_per_layer(self) -> "HeadScores":
        """Divide each layer's scores by that layer's l2 norm (Michel et al.); zero layers stay zero."""
        out = {}
        for k, rows in self.kinds.items():
            new_rows = []
            for r in rows:
                norm = math.sqrt(sum(v * v for v in r))
                new_rows.append(tuple(v / norm for v in r) if norm > 0 else tuple(r))
            out[k] = tuple(new_rows)
        return HeadScores(out)

    def ranked(self, mask: HeadMask | None = None, seed: int = 0) -> list[HeadId]:
        """Heads from least to most important; ties broken by a seeded shuffle, not by position.

        With ``mask``, only heads still kept in it are ranked.
        """
        heads = self.layout.heads()
        if mask is not None:
            heads = [h for h in heads if mask.kinds[h[0]][h[1]][h[2]] == 1]
        rng = random.Random(seed)
        tiebreak = {h: rng.random() for h in heads}
        return sorted(heads, key=lambda h: (self.get(h), tiebreak[h]))

    def to_json(self) -> dict:
        # by hand: the wire form is the bare {kind: [[per head] per layer]} lists, no field names
        return {k: [list(r) for r in rows] for k, rows in self.kinds.items()}


# per kind, per layer, per key/value group: the query head ids of the group (architectures.kv_groups_of)
KVGroups = Mapping[str, Sequence[Sequence[Sequence[int]]]]


def group_scores(scores: HeadScores, groups: KVGroups) -> HeadScores:
    """Scores per key/value group: the sum of its query heads' scores (grouped-query attention).

    The result has one cell per group instead of one per query head (``[layers][groups]`` per kind):
    a second view of the same I_h, saying which key/value heads matter. Without grouping every
    head is its own group and the scores come back unchanged.
    """
    _check_grid({k: [[h for g in row for h in g] for row in rows] for k, rows in groups.items()},
                scores.layout, "key/value grouping")
    return HeadScores({k: tuple(tuple(sum(scores.kinds[k][l][h] for h in g) for g in row)
                                for l, row in enumerate(rows)) for k, rows in groups.items()})
