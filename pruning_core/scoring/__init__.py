"""Head scorers: one class per method behind one call, in one registry.

``get_scorer(name).score(loaded, task, config, progress=None, mask=None) -> ScoreResult``

Registered: ``gradient`` (Michel et al. 2019), ``random`` (seeded baseline), ``ablation``
(measured metric drop when a head alone is removed), and ``smp`` when its module is present.
"""
from __future__ import annotations

from .base import SCORERS, ScoreConfig, Scorer, get_scorer, register_scorer
from . import gradient as _gradient  # noqa: F401  (registers)
from . import baselines as _baselines  # noqa: F401  (registers)

from ..smp import scorer as _smp_scorer  # noqa: F401,E402  (registers `smp`)

__all__ = ["SCORERS", "ScoreConfig", "Scorer", "get_scorer", "register_scorer"]
