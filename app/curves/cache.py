"""Cached calls of the Curves page (and the Tour and Share, which show its results): pruning curves per
scorer, the single-head ablation table, one head per layer. The rules of :mod:`app.jobs.cache` hold."""
from __future__ import annotations

import streamlit as st

from app.jobs.cache import EVAL_BATCH, data, load, score_split_of, scores, task
from pruning_core.evaluation import experiments, kinds
from pruning_core.core.progress import ProgressCallback
from pruning_core.scoring import ScoreConfig, get_scorer, scorer_info

__all__ = ["ablation", "curve", "curve_seeds", "kind_sensitivity", "one_per_layer"]


def curve_seeds(scorer: str) -> int:
    """Seeds a curve of ``scorer`` averages: 3 when its scores come from the seed (random), else 1."""
    return 3 if scorer_info(scorer).seeded else 1


@st.cache_data(show_spinner=False, max_entries=64)
def curve(spec: str, task_name: str, scorer: str, limit: int | None, score_limit_: int | None,
          step: float = 0.1, rescore: bool = False, _progress: ProgressCallback | None = None,
          batch_size: int = EVAL_BATCH, seeds: int = 1):
    """Iterative pruning curve (metric vs share of heads removed) of one scorer, scored on the
    training split (:func:`score_split_of`); with ``seeds`` > 1 the mean and band over seeds."""
    config = ScoreConfig(split=score_split_of(task_name), limit=score_limit_)
    if seeds > 1:
        return experiments.seeded_curves(load(spec), task(task_name), data(spec, task_name, limit),
                                         get_scorer(scorer), config, seeds, step=step, rescore=rescore,
                                         batch_size=batch_size, progress=_progress)
    initial = scores(spec, task_name, scorer, score_limit_, _progress=_progress, split=config.split)
    return experiments.pruning_curve(load(spec), task(task_name), data(spec, task_name, limit), get_scorer(scorer),
                                     config, step=step, rescore=rescore, initial_scores=initial,
                                     batch_size=batch_size, progress=_progress)


@st.cache_data(show_spinner=False, max_entries=32)
def ablation(spec: str, task_name: str, limit: int | None, _progress: ProgressCallback | None = None,
             batch_size: int = EVAL_BATCH):
    """The single-head ablation table: the metric with each head removed alone."""
    return experiments.ablation_table(load(spec), task(task_name), data(spec, task_name, limit),
                                      batch_size=batch_size, progress=_progress)


@st.cache_data(show_spinner=False, max_entries=32)
def one_per_layer(spec: str, task_name: str, limit: int | None, scorer: str | None = None,
                  score_limit_: int | None = None, _progress: ProgressCallback | None = None,
                  batch_size: int = EVAL_BATCH):
    """Each layer reduced to its best head (by ``scorer``'s scores, or by search when None)."""
    chosen = (scores(spec, task_name, scorer, score_limit_, _progress=_progress, split=score_split_of(task_name))
              if scorer else None)
    return experiments.one_head_per_layer(load(spec), task(task_name), data(spec, task_name, limit), scores=chosen,
                                          batch_size=batch_size, progress=_progress)


@st.cache_data(show_spinner=False, max_entries=16)
def kind_sensitivity(spec: str, task_name: str, limit: int | None, scorer: str, score_limit_: int | None,
                     fractions: tuple[float, ...] = kinds.FRACTIONS, seeds: int = 3,
                     _progress: ProgressCallback | None = None, batch_size: int = EVAL_BATCH):
    """Michel et al. §5: a share of one attention kind's heads removed at a time, by ``scorer`` and at random."""
    ranking = scores(spec, task_name, scorer, score_limit_, _progress=_progress,
                     split=score_split_of(task_name)).ranking_scores
    return kinds.kind_sensitivity(load(spec), task(task_name), data(spec, task_name, limit), ranking,
                                  fractions=fractions, seeds=seeds, batch_size=batch_size, progress=_progress)
