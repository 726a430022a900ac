"""Role scores of every head as a typed result, and its JSON format ``headprune.roles/1``.

``{"format": "headprune.roles/1", "layout": {kind: [heads per layer]},
   "roles": {ROLE: {KIND: [[score per head] per layer]}}, "thresholds": {ROLE: t},
   "probes": {ROLE: {"probe", "input", "size", "score", "kinds"}}, "provenance": {...}}``

A role absent for a kind (induction on cross-attention) has no entry for that kind; a role computed
on no kind (retrieval on an encoder) has an empty object. Layers are zero-based, heads too.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from pruning_core.core.io.codec import ROLES_FORMAT, check_format
from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadId, HeadLayout, HeadScores

# how a head's strongest role is picked: scores of different roles are on different scales, so they are
# compared as multiples of each role's own threshold
STRONGEST_RULE = "the role whose score is the largest multiple of its own threshold"


@dataclass(frozen=True)
class RoleReport:
    """Per role, per kind, a ``[layers, max heads]`` float array of scores (NaN beyond a pruned layer's heads).

    ``thresholds[role]``: a head with a score above it has the role. ``probes[role]``: the probe
    (``probe``: text / repeated / needle), its input in words (``input``), its ``size`` (sequences and
    tokens) and how the score is computed (``score``). ``provenance``: as in every headprune result.
    """

    layout: HeadLayout
    scores: Mapping[str, Mapping[str, np.ndarray]]
    thresholds: Mapping[str, float]
    probes: Mapping[str, dict] = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(self.scores)

    def score(self, role: str, head: HeadId) -> float | None:
        """One head's score for ``role``; None when the role is absent for the head's kind."""
        kind, layer, h = head
        grid = self.scores.get(role, {}).get(kind)
        return None if grid is None else float(grid[layer, h])

    def detected(self, role: str) -> dict[str, np.ndarray]:
        """Per kind the role applies to, a ``[layers, max heads]`` bool array: score > threshold."""
        if role not in self.scores:
            raise FormatError(f"This role report has no {role!r} scores; it has {', '.join(self.scores) or 'none'}.")
        t = self.thresholds[role]
        return {k: np.nan_to_num(g, nan=-np.inf) > t for k, g in self.scores[role].items()}

    def heads(self, role: str) -> list[HeadId]:
        """The heads that have ``role``, in kind, layer, head order."""
        return [(k, int(l), int(h)) for k, d in self.detected(role).items() for l, h in zip(*np.nonzero(d))]

    def strength(self, role: str, head: HeadId) -> float | None:
        """``score / threshold`` of one head for ``role`` (> 1: the head has the role); None when absent."""
        score = self.score(role, head)
        return None if score is None or math.isnan(score) else score / max(self.thresholds[role], 1e-9)

    def strongest_of(self, head: HeadId) -> str | None:
        """STRONGEST_RULE for one head: its detected role of the largest ``score / threshold``, or None."""
        best, chosen = 1.0, None
        for role in self.scores:
            ratio = self.strength(role, head)
            if ratio is not None and ratio > best:
                best, chosen = ratio, role
        return chosen

    def strongest(self) -> dict[str, list[list[str | None]]]:
        """Per kind, per layer, per head: :meth:`strongest_of` (None when the head has no role)."""
        return {kind: [[self.strongest_of((kind, layer, h)) for h in range(n)] for layer, n in enumerate(rows)]
                for kind, rows in self.layout.kinds.items()}

    def head_scores(self, role: str) -> HeadScores:
        """``role``'s scores as a score map (larger = more of the role; a NaN, no data, as 0): what a KV-cache
        policy or a mask is chosen from."""
        if role not in self.scores:
            raise FormatError(f"This role report has no {role!r} scores; it has {', '.join(self.scores) or 'none'}.")
        return HeadScores.from_lists({k: [[0.0 if v != v else float(v) for v in g[l, :n]]
                                          for l, n in enumerate(self.layout.kinds[k])]
                                      for k, g in self.scores[role].items()})

    def to_json(self) -> dict:
        # by hand: numpy grids written as ragged per-layer lists of each layer's real heads
        rows = self.layout.kinds
        return {"format": ROLES_FORMAT, "layout": self.layout.to_json(),
                "roles": {r: {k: [[float(v) for v in g[l, :rows[k][l]]] for l in range(len(rows[k]))]
                              for k, g in by_kind.items()} for r, by_kind in self.scores.items()},
                "thresholds": dict(self.thresholds), "probes": dict(self.probes), "provenance": self.provenance}

    @classmethod
    def from_json(cls, data: dict, where: str = "the roles file") -> "RoleReport":
        check_format(data, ROLES_FORMAT, where)
        try:
            layout = HeadLayout.from_json(data["layout"])
            scores = {}
            for role, by_kind in data["roles"].items():
                scores[role] = {}
                for kind, layers in by_kind.items():
                    n = layout.kinds[kind]
                    if [len(r) for r in layers] != list(n):
                        raise FormatError(f"{where}: {role} {kind} has heads per layer {[len(r) for r in layers]}, "
                                          f"its layout {list(n)}.")
                    grid = np.full((len(n), max(n, default=0)), np.nan)
                    for l, r in enumerate(layers):
                        grid[l, :len(r)] = [float(v) for v in r]
                    scores[role][kind] = grid
            thresholds = {r: float(data["thresholds"][r]) for r in scores}
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, FormatError):
                raise
            raise FormatError(f"{where} is not a complete {ROLES_FORMAT} file ({type(exc).__name__}: {exc}). "
                              "Write it again with `headprune roles MODEL --out FILE`.") from None
        if any(not math.isfinite(t) for t in thresholds.values()):
            raise FormatError(f"{where} has a threshold that is not a number.")
        return cls(layout, scores, thresholds, dict(data.get("probes") or {}), dict(data.get("provenance") or {}))


def load_roles(path, layout: HeadLayout | None = None) -> RoleReport:
    """Read a ``headprune roles --out`` file; with ``layout``, check it is of a model with those heads."""
    from pruning_core.evaluation.results import read_json
    report = RoleReport.from_json(read_json(path, ROLES_FORMAT), where=f"Roles file {str(path)!r}")
    if layout is not None and report.layout != layout:
        raise FormatError(f"Roles file {str(path)!r} is of a model with heads {report.layout.describe()}, this "
                          f"model has {layout.describe()}. Compute the roles of this model: `headprune roles MODEL`.")
    return report
