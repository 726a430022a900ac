"""The role extension point: what a head *does*, as a score per head with a threshold.

A :class:`Role` names its probe input (``text``: natural sentences of the task; ``repeated``: [BOS] + R + R
with R uniform random tokens; ``needle``: needle-in-a-haystack prompts decoded greedily), how its score is
computed from the attention maps on that probe, the threshold above which a head has the role, and the
attention kinds it applies to. A role that makes no sense for a kind (induction on cross-attention) is
absent for that kind, never zero. Exact definitions: docs of each role and ``docs/METHODS.md``.

Roles register in :data:`ROLES` (one registry, like scorers and tasks); :func:`kinds_for` is the one
place that decides which of a model's attention kinds a role is computed on.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pruning_core.core.errors import UsageError
from pruning_core.core.registry import Registry

PROBES = ("text", "repeated", "needle")
SELF_KINDS = ("encoder_self", "decoder_self")


@dataclass(frozen=True)
class ProbeSequence:
    """One probe sequence's attention maps of one kind, padding cut off.

    ``maps[layer]`` is ``[heads, T_query, T_key]`` (each row sums to 1). ``query_ids`` / ``key_ids`` are
    the token ids of the query and key positions (``key_ids`` is None when the keys are audio frames).
    ``causal``: queries see only keys at or before their own position (decoder self-attention).
    ``special_keys``: ``[T_key]`` True where the key is a special token. ``marks``: what a probe adds
    (``repeat``: the length n of R; ``needle``: the (start, end) key positions of the needle's answer).
    ``frequency``: token id -> count in the task's training text (the same mapping for every sequence).
    """

    maps: tuple[np.ndarray, ...]
    query_ids: np.ndarray
    key_ids: np.ndarray | None
    causal: bool
    special_keys: np.ndarray | None = None
    marks: dict = field(default_factory=dict)
    frequency: dict | None = None


class Accumulator:
    """Gathers one role's score for one kind over the probe sequences."""

    def add(self, seq: ProbeSequence) -> None:
        raise NotImplementedError

    def result(self, rows: tuple[int, ...]) -> np.ndarray:
        """``[layers, max heads]`` float64 scores; NaN where a (pruned) layer has fewer heads or no data."""
        raise NotImplementedError


class MeanOverSequences(Accumulator):
    """The mean over sequences of ``per_layer(seq, maps[layer]) -> [heads]`` (None: the sequence has no data)."""

    def __init__(self, per_layer: Callable[[ProbeSequence, np.ndarray], np.ndarray | None]) -> None:
        self.per_layer = per_layer
        self.sums: dict[int, np.ndarray] = {}
        self.counts: dict[int, int] = {}

    def add(self, seq: ProbeSequence) -> None:
        for layer, a in enumerate(seq.maps):
            if a.shape[0] == 0:
                continue
            value = self.per_layer(seq, a)
            if value is None:
                continue
            self.sums[layer] = self.sums.get(layer, 0.0) + np.asarray(value, dtype=np.float64)
            self.counts[layer] = self.counts.get(layer, 0) + 1

    def result(self, rows: tuple[int, ...]) -> np.ndarray:
        out = np.full((len(rows), max(rows, default=0)), np.nan)
        for layer, total in self.sums.items():
            out[layer, :rows[layer]] = total / self.counts[layer]
        return out


@dataclass(frozen=True)
class Role:
    """One head role: a probe, a score per head and a threshold."""

    name: str                       # registry name, e.g. "induction"
    title: str                      # for people, e.g. "induction"
    probe: str                      # one of PROBES: the input the score is computed on
    threshold: float                # a head whose score is above it has the role
    score: str                      # how the score is computed (printed by `headprune roles`, shown in the app)
    kinds: tuple[str, ...]          # attention kinds the role applies to
    accumulator: Callable[[], Accumulator] = field(repr=False, default=Accumulator)
    task_types: tuple[str, ...] = ()    # model task types it applies to; () = every one

    @property
    def short_title(self) -> str:
        """The title without its gloss in brackets ("retrieval"), to count heads in a sentence."""
        return self.title.split(" (", 1)[0]

    def __post_init__(self) -> None:
        if self.probe not in PROBES:
            raise ValueError(f"Role {self.name!r}: probe {self.probe!r} is not one of {PROBES}.")


ROLES: Registry[Role] = Registry("role", UsageError, hint="Pass them comma-separated, e.g. --roles induction,previous_token.")


_ORDER: list[str] = []


def register_role(role: Role) -> Role:
    ROLES.add(role.name, role, description=role.score, probe=role.probe, threshold=role.threshold)
    _ORDER.append(role.name)
    return role


def role_names() -> list[str]:
    """Every registered role, in registration order (the order tables and legends list them)."""
    return list(_ORDER)


def get_role(name: str) -> Role:
    return ROLES.get(name)


def parse_roles(spec: str | None) -> list[str]:
    """Role names from a comma-separated ``spec`` (None or "" = every role); unknown names raise with the list."""
    if not spec:
        return role_names()
    names = [n.strip() for n in spec.split(",") if n.strip()]
    for n in names:
        get_role(n)
    return list(dict.fromkeys(names))


def kinds_for(role: Role, task_type: str, model_kinds) -> tuple[str, ...]:
    """The attention kinds of a model (``task_type``, its ``model_kinds``) that ``role`` is computed on.

    Speech models' encoder self-attention reads audio frames, not tokens: no probe here gives it a
    meaning, so every role is absent there (the decoder's self and cross attention are kept).
    """
    if role.task_types and task_type not in role.task_types:
        return ()
    skip = {"encoder_self"} if task_type == "asr" else set()
    return tuple(k for k in model_kinds if k in role.kinds and k not in skip)
