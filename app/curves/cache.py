"""Cached calls of the Curves page (and the Tour and Share, which show its results): pruning curves per
scorer, the single-head ablation table, one head per layer. The rules of :mod:`app.model.cache` hold."""
from __future__ import annotations

import streamlit as st

from app.core.session.selection import ScoreRequest, Selection
from app.model.cache import EVAL_BATCH, data, load, score_config, scores, task
from pruning_core.evaluation import experiments, kinds
from pruning_core.core.progress import ProgressCallback
from pruning_core.scoring import get_scorer, scorer_info

__all__ = ["ablation", "curve", "curve_seeds", "kind_sensitivity", "one_per_layer"]


def curve_seeds(scorer: str) -> int:
    """Seeds a curve of ``scorer`` averages: 3 when its scores come from the seed (random), else 1."""
    return 3 if scorer_info(scorer).seeded else 1


@st.cache_data(show_spinner=False, max_entries=64)
def curve(sel: Selection, req: ScoreRequest, step: float = 0.1, rescore: bool = False,
          _progress: ProgressCallback | None = None, batch_size: int = EVAL_BATCH, seeds: int = 1):
    """Iterative pruning curve (metric vs share of heads removed) of ``sel`` by the scores ``req`` asks for
    (:func:`app.model.cache.scores`); with ``seeds`` > 1 the mean and band over seeds."""
    config = score_config(req)
    if seeds > 1:
        return experiments.seeded_curves(load(sel.model), task(sel.task), data(sel), get_scorer(req.scorer), config,
                                         seeds, step=step, rescore=rescore, batch_size=batch_size, progress=_progress)
    initial = scores(req, _progress=_progress)
    return experiments.pruning_curve(load(sel.model), task(sel.task), data(sel), get_scorer(req.scorer),
                                     config, step=step, rescore=rescore, initial_scores=initial,
                                     batch_size=batch_size, progress=_progress)


@st.cache_data(show_spinner=False, max_entries=32)
def ablation(sel: Selection, _progress: ProgressCallback | None = None, batch_size: int = EVAL_BATCH):
    """The single-head ablation table: the metric with each head removed alone."""
    return experiments.ablation_table(load(sel.model), task(sel.task), data(sel), batch_size=batch_size,
                                      progress=_progress)


@st.cache_data(show_spinner=False, max_entries=32)
def one_per_layer(sel: Selection, req: ScoreRequest | None = None,
                  _progress: ProgressCallback | None = None, batch_size: int = EVAL_BATCH):
    """Each layer reduced to its best head (by the scores ``req`` asks for, or by search when None)."""
    chosen = scores(req, _progress=_progress) if req is not None else None
    return experiments.one_head_per_layer(load(sel.model), task(sel.task), data(sel), scores=chosen,
                                          batch_size=batch_size, progress=_progress)


@st.cache_data(show_spinner=False, max_entries=16)
def kind_sensitivity(sel: Selection, req: ScoreRequest,
                     fractions: tuple[float, ...] = kinds.FRACTIONS, seeds: int = 3,
                     _progress: ProgressCallback | None = None, batch_size: int = EVAL_BATCH):
    """Michel et al. §5: a share of one attention kind's heads removed at a time, by ``req``'s scores and at random."""
    ranking = scores(req, _progress=_progress).ranking_scores
    return kinds.kind_sensitivity(load(sel.model), task(sel.task), data(sel), ranking,
                                  fractions=fractions, seeds=seeds, batch_size=batch_size, progress=_progress)
