"""Parametrisations split between the test tiers (tests/README.md): the cases in ``fast`` run in
``make test-fast``, every other case is marked ``heavy`` and runs in ``make test`` only."""
from __future__ import annotations

from collections.abc import Iterable

import pytest


def heavy_beyond(cases: Iterable, fast: Iterable) -> list:
    """``cases`` for ``pytest.mark.parametrize``, those not in ``fast`` marked ``heavy`` (a tuple case is
    matched by its first value, the family)."""
    fast = set(fast)
    out = []
    for case in cases:
        key = case[0] if isinstance(case, tuple) else case
        values = case if isinstance(case, tuple) else (case,)
        out.append(case if key in fast else pytest.param(*values, marks=pytest.mark.heavy))
    return out
