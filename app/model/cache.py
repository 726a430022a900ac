"""The model floor's cached calls into pruning_core, shared by every feature: models, tasks, data, evaluation,
scores. With each feature's own ``app/<feature>/cache.py``, the only modules with ``st.cache_resource`` /
``st.cache_data``, and the only place the dashboard loads, scores, evaluates, times, prunes or runs attention.

Heavy shared objects (the loaded model, the task, the tokenised data, pruned copies) are ``st.cache_resource``:
one instance for every session, read-only (masks are applied per call, pruning returns a copy). Derived
results are ``st.cache_data``, keyed by their arguments alone (docs/DESIGN.md says which take a selection);
timings are never cached. Arguments named ``_progress`` take a progress callback and stay out of the key; long
calls run through :class:`app.runtime.work.Work`, built by :mod:`app.model.jobs`. docs/DASHBOARD.md gives the
rules in full.
"""
from __future__ import annotations

import logging
import math
import os
import statistics
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from pruning_core.modeling.architectures import adapter_for, kv_groups_of
from pruning_core import bench, tasks
from pruning_core.bench import budget
from pruning_core.modeling import pruning
from pruning_core.scoring import store as score_store
from pruning_core.modeling.sources import catalog
from pruning_core.core.errors import HeadpruneError, ModelLoadError
from pruning_core.core.heads import KIND_LABELS, HeadLayout, HeadMask
from pruning_core.modeling.inference.drafts import DraftStore
from pruning_core.modeling.inference.layer_cache import LayerInputCache
from pruning_core.modeling.sources.loading import LoadedModel, load_model
from pruning_core.tasks.per_example import ExampleOutputs
from pruning_core.core.progress import ProgressCallback
from pruning_core.evaluation.metrics import get_metric
from pruning_core.evaluation.results import EvalResult, ScoreResult
from pruning_core.evaluation.significance import Comparison, compare
from pruning_core.tasks import language_model
from pruning_core.tasks.language_model import UnigramBaseline
from pruning_core.analysis.roles import RoleReport, compute_roles, get_role, role_names
from pruning_core.analysis.roles.base import kinds_for
from pruning_core.scoring import ScoreConfig, get_scorer, scorer_info, scorer_names as _registered_scorers

from app.core.session.selection import ScoreRequest, Selection
from app.runtime import board
from app.core.access import DataAccess, data_access_from

EVAL_BATCH = 64          # examples per forward pass when evaluating
MEMORY_HEADROOM = 0.8    # refuse models whose weights exceed this share of available memory

log = logging.getLogger("headprune.app")
_SCORE_LOCKS: defaultdict = defaultdict(threading.Lock)   # (weights, ScoreKey) -> lock


def app_device() -> str | None:
    """``HEADPRUNE_APP_DEVICE`` ('cpu' / 'cuda'), else None: CUDA when present (documented in the README)."""
    return os.environ.get("HEADPRUNE_APP_DEVICE") or None


def data_access() -> DataAccess:
    """Which local paths this server may open (:mod:`app.core.access`): the one place the dashboard
    reads ``HEADPRUNE_DATA_DIRS`` and the address the server listens on."""
    return data_access_from(os.environ, st.get_option("server.address"))


# -- models ----------------------------------------------------------------------------------------
def _check_fits_memory(spec: str) -> None:
    """Refuse a model whose weight files clearly do not fit in the free memory (before trying)."""
    folder = catalog.get(spec).folder() if spec in catalog.names() else Path(spec).expanduser()
    budget.check_weights_fit(folder, spec, MEMORY_HEADROOM)


def load(spec: str) -> LoadedModel:
    """The model for ``spec`` ('default', a folder or a hub id), shared read-only by all sessions.

    Never modified: masks are applied per call (``apply_mask(loaded, mask)``), pruning copies it.
    A local folder outside the allowed ones of an exposed server is refused (:mod:`app.core.access`).
    """
    data_access().check_model(spec)
    return _load(spec, app_device())


@st.cache_resource(show_spinner=False, max_entries=3)
def _load(spec: str, device: str | None) -> LoadedModel:
    _check_fits_memory(spec)
    try:
        return load_model(spec, device=device)
    except MemoryError:
        raise ModelLoadError(f"Model {spec!r} is too large for this machine's memory. Choose a smaller one.") from None
    except RuntimeError as exc:
        if "out of memory" in str(exc).lower():
            raise ModelLoadError(f"Model {spec!r} does not fit in memory ({str(exc).splitlines()[0]}). "
                                 "Choose a smaller model.") from None
        raise


def timing(spec: str) -> LoadedModel:
    """``spec``'s model as latencies are timed (:func:`pruning_core.bench.timing_model`: sdpa attention, as the CLI's
    ``bench`` and a deployed model run it), a copy made once per server beside the shared eager one; every timing
    (the Head map's latency and estimate, the pruned copies they time, the Speed page) reads it, never modifies it."""
    data_access().check_model(spec)
    return _timing(spec, app_device())


@st.cache_resource(show_spinner=False, max_entries=2)
def _timing(spec: str, device: str | None) -> LoadedModel:
    return bench.timing_model(_load(spec, device))


def not_prepared(spec: str) -> bool:
    """Whether ``spec`` names a prepared model (:mod:`pruning_core.modeling.sources.catalog`) that is not built on this machine."""
    return spec in catalog.names() and not catalog.get(spec).is_prepared()


def prepare_model(name: str, _progress: ProgressCallback | None = None) -> None:
    """Build the prepared model ``name`` (``headprune prepare --model NAME``), then forget stale cached results."""
    catalog.get(name).run_prepare(progress=_progress)
    _load.clear()
    st.cache_data.clear()


@dataclass(frozen=True)
class ArchSummary:
    """What the Model & data page shows about a model."""

    model_id: str
    source: str                       # "default" | "local" | "hub"
    model_type: str                   # config.model_type, e.g. "bert"
    arch: str                         # headprune adapter name
    task_type: str                    # "classification" | "translation"
    layout: HeadLayout                # heads per layer, per attention kind
    kind_labels: dict                 # kind -> readable name
    total_heads: int
    parameters: int
    attention_parameters: int
    num_labels: int | None
    weights_sha256: str
    pruned_heads: dict = field(default_factory=dict)
    kv_groups: dict = field(default_factory=dict)   # kind -> per layer, the query heads of each key/value group
    absent_kinds: dict = field(default_factory=dict)  # kind -> why this model has no heads of it (an SSRU decoder)

    @property
    def attention_share(self) -> float:
        return self.attention_parameters / self.parameters if self.parameters else 0.0


@st.cache_data(show_spinner=False, max_entries=16)
def architecture(spec: str) -> ArchSummary:
    m = load(spec)
    cfg = m.model.config
    return ArchSummary(m.model_id, m.source, str(cfg.model_type), m.arch, m.task_type, m.layout,
                       {k: KIND_LABELS[k] for k in m.layout.kinds}, m.layout.total_heads,
                       pruning.parameter_count(m.model), pruning.attention_parameter_count(m.model),
                       getattr(cfg, "num_labels", None) if m.task_type == "classification" else None,
                       m.weights_sha256, m.pruned_heads, kv_groups_of(m.sites), dict(adapter_for(m).absent_kinds))


def pruned_parameters(spec: str, mask: HeadMask) -> tuple[int, int]:
    """(parameters of the pruned model, parameters of the dense one), counted from the model's shapes
    (``pruning_core.modeling.pruning.parameter_count_after``): no pruned copy is made."""
    return _pruned_parameters(spec, None if mask.is_full() else mask)


@st.cache_data(show_spinner=False, max_entries=1024)
def _pruned_parameters(spec: str, mask: HeadMask | None) -> tuple[int, int]:
    model = load(spec).model
    dense = pruning.parameter_count(model)
    return (dense if mask is None else pruning.parameter_count_after(model, mask)), dense


@st.cache_data(show_spinner=False, max_entries=16)
def head_savings(spec: str) -> dict:
    """``pruning_core.modeling.pruning.head_savings`` of the shared model: what one click on a head saves, per kind."""
    return pruning.head_savings(load(spec).model)


# -- tasks and data --------------------------------------------------------------------------------
def task_names() -> list[str]:
    """Registered task names (the embedded task, GLUE and WMT names), for the task picker."""
    return list(tasks.task_names())


def task(name: str):
    """The ``pruning_core.tasks.Task`` for ``name`` ('movie-sentiment', 'sst2', 'file:PATH', ...);
    a ``file:`` outside the allowed folders of an exposed server is refused (:mod:`app.core.access`)."""
    data_access().check_task(name)
    return _task(name)


@st.cache_resource(show_spinner=False, max_entries=16)
def _task(name: str):
    return tasks.get_task(name)


def task_summary(task_name: str) -> dict:
    """What the Model & data page says about a task: type, metric, labels, evaluation split."""
    t = task(task_name)
    return {"task_type": t.task_type, "metric_name": t.metric_name, "label_names": t.label_names,
            "description": getattr(t, "description", ""), "split": split_of(task_name)}


def split_of(task_name: str) -> str:
    """The split the dashboard evaluates on (the task's default, else 'validation')."""
    return getattr(task(task_name), "default_split", "validation")


@st.cache_resource(show_spinner=False, max_entries=16)
def data(sel: Selection):
    """The task's evaluation split, tokenised for the model, its first ``sel.eval_size`` examples."""
    return task(sel.task).encode(load(sel.model), split_of(sel.task), sel.eval_size)


@st.cache_resource(show_spinner=False, max_entries=8)
def context_data(sel: Selection, context: int):
    """A long-context task's evaluation split at ``context`` tokens per example (``headprune evaluate --context``),
    its first ``sel.eval_size`` examples: the Head map's KV-cache mode and the Attention page's logit attribution."""
    return task(sel.task).encode(load(sel.model), split_of(sel.task), sel.eval_size, max_length=context)


LENGTH_SAMPLE = 128      # examples whose mean length gives an example's cost (the largest own evaluation size)


@st.cache_data(show_spinner=False, max_entries=32)
def example_cost(spec: str, task_name: str) -> budget.ExampleCost:
    """One example's cost for ``spec`` on ``task_name``: text lengths measured on the first
    :data:`LENGTH_SAMPLE` examples (a translation's source and target apart: their sum is its length bucket's
    sort key); a speech model's audio is fixed-length (not encoded here)."""
    loaded = load(spec)
    if bench.audio_frames(loaded.model.config) is not None:
        return budget.example_cost(loaded, loaded.task_type)
    encoded = data(Selection(spec, task_name, LENGTH_SAMPLE))
    pairs = [(len(f["input_ids"]), len(f["labels"])) for f in encoded.features or () if "labels" in f]
    if pairs and getattr(loaded.model.config, "is_encoder_decoder", False):      # a translation: source and target
        return budget.example_cost(loaded, loaded.task_type, math.ceil(statistics.mean(p[0] for p in pairs)),
                                   decoder_tokens=math.ceil(statistics.mean(p[1] for p in pairs)))
    mean_length = statistics.mean(encoded.lengths or [encoded.max_length])
    return budget.example_cost(loaded, loaded.task_type, math.ceil(mean_length))


UNIT = "example"         # what one example is called when the model or the task cannot be read


def example_unit(spec: str, task_name: str) -> str:
    """What one example of ``spec`` on ``task_name`` is called ("utterance", "window"), as the sidebar says."""
    try:
        return example_cost(spec, task_name).unit
    except HeadpruneError:
        return UNIT


@st.cache_data(show_spinner=False, max_entries=64)
def examples(task_name: str, rows: int = 5) -> list[dict]:
    """A few raw examples of the evaluation split (checks a file parses; shows what the data is)."""
    return list(task(task_name).load(split_of(task_name), limit=rows))


# -- derived results -------------------------------------------------------------------------------
def _norm(mask: HeadMask | None) -> HeadMask | None:
    """A full mask and no mask are the same evaluation; give them one cache key."""
    return None if mask is None or mask.is_full() else mask


def evaluate(sel: Selection, mask: HeadMask | None, _progress: ProgressCallback | None = None) -> EvalResult:
    """Metric and loss of the model under ``mask`` on the first ``sel.eval_size`` evaluation examples."""
    return _evaluate(sel, _norm(mask), EVAL_BATCH, _progress)


@st.cache_data(show_spinner=False, max_entries=4096)
def _evaluate(sel: Selection, mask: HeadMask | None, batch_size: int,
              _progress: ProgressCallback | None = None) -> EvalResult:
    with board.GATE.hold(urgent=True, progress=_progress, what="evaluation"):   # sessions queue, not thrash
        return task(sel.task).evaluate(load(sel.model), data(sel), mask, batch_size=batch_size,
                                       progress=_metrics_first(_progress), layer_cache=layer_inputs(),
                                       drafts=draft_store())


def _metrics_first(progress: ProgressCallback | None) -> ProgressCallback:
    """``progress`` that, once the evaluation has reported its metric (``Task.metric_first``: its loss still to
    come, from hidden states already computed), lets the clicks waiting for the CPU through first: in a class, each
    session's BLEU comes before any session's loss. The mask is this thread's alone (``apply_mask``), so the others'
    evaluations run unchanged meanwhile."""
    def callback(event) -> None:
        if progress is not None:
            progress(event)
        if event.partial is not None:
            board.GATE.yield_to_urgent(progress, "loss", urgent=True)
    return callback


@st.cache_resource(show_spinner=False)
def layer_inputs() -> LayerInputCache:
    """Layer inputs shared by every session's evaluations: a click reruns only the layers from the first one
    whose heads changed (``pruning_core.modeling.inference.layer_cache``), in at most ``budget.layer_cache_budget()`` bytes."""
    return LayerInputCache(budget.layer_cache_budget())


@st.cache_resource(show_spinner=False)
def draft_store() -> DraftStore:
    """Decoded outputs shared by every session's evaluations: a click's translations and transcripts are checked
    against the nearest mask's already decoded (``pruning_core.modeling.inference.drafts``), not decoded again."""
    return DraftStore()


def references(sel: Selection) -> list | None:
    """The gold labels (or reference texts) of the evaluated examples, in order; None when the data has none."""
    found = task(sel.task).references(data(sel))
    return None if found is None else list(found.tolist() if hasattr(found, "tolist") else found)


@st.cache_data(show_spinner=False, max_entries=64)
def unigram_baseline(sel: Selection) -> UnigramBaseline | None:
    """A language model's reference: the unigram perplexity on the evaluated tokens (None for other tasks)."""
    found = task(sel.task)
    if found.task_type != "language_model":
        return None
    return language_model.unigram_baseline(load(sel.model), found, data(sel))


def example_outputs(sel: Selection, mask: HeadMask | None, predictions: bool = False,
                    _progress: ProgressCallback | None = None) -> ExampleOutputs:
    """Each evaluated example's loss (and with ``predictions`` its prediction) under ``mask``: a view of
    the cached :func:`evaluate` result, so the metric, its interval and these come from one forward pass."""
    out = ExampleOutputs.from_eval(evaluate(sel, mask, _progress))
    return out if predictions else ExampleOutputs(out.losses, out.weights)


def example_inputs(sel: Selection) -> list[dict]:
    """The evaluated examples as read from the task (dicts of text fields and label), in order."""
    return list(data(sel).texts)


@st.cache_data(show_spinner=False, max_entries=1024)
def comparison(sel: Selection, mask: HeadMask | None) -> Comparison | None:
    """Paired test of the model under ``mask`` against all heads on the same evaluated examples
    (``pruning_core.evaluation.significance.compare``) from the two cached :func:`evaluate` results, no pass of its
    own; None without per-example results."""
    base, other = evaluate(sel, None), evaluate(sel, mask)
    return compare(get_metric(base.metric_name), base, other, references(sel))


def scorer_names() -> list[str]:
    """The registered scorers (``pruning_core.scoring``), sorted by name."""
    return _registered_scorers()


def scorer_description(name: str) -> str:
    return scorer_info(name).description


def slow_scorer(name: str) -> bool:
    """Whether ``name`` evaluates the model once per head (minutes on a big model: start it on a click)."""
    return scorer_info(name).cost == "per_head"


def score_split_of(task_name: str) -> str:
    """The split heads are scored on (Head map, Curves, Share): the library's policy,
    ``pruning_core.tasks.default_score_split`` (train when the task has training examples of its own, so
    the order is not chosen on the examples it is measured on; else the evaluation split)."""
    return tasks.default_score_split(task(task_name))


def score_config(req: ScoreRequest) -> ScoreConfig:
    """The library's settings for ``req``: its size and seed on :func:`score_split_of` its task."""
    return ScoreConfig(split=score_split_of(req.sel.task), limit=req.score_size, seed=req.seed)


@st.cache_data(show_spinner=False, max_entries=64)
def scores(req: ScoreRequest, _progress: ProgressCallback | None = None) -> ScoreResult:
    """Importance scores of every head by ``req.scorer`` (larger = more important) on ``req.score_size`` examples of
    :func:`score_split_of` the task (train when the task has its own). The split used is in the result's
    ``provenance["split"]`` (absent for a scorer that reads no data, such as random)."""
    config = score_config(req)
    loaded, the_task = load(req.sel.model), task(req.sel.task)
    if scorer_info(req.scorer).seeded:                 # reads no data: nothing worth keeping
        return get_scorer(req.scorer).score(loaded, the_task, config, progress=_progress)
    key = score_store.key_for(req.sel.task, req.scorer, config.split, req.score_size, req.seed)
    with _SCORE_LOCKS[(loaded.weights_sha256, key)]:  # one computation, whichever sessions ask together
        kept = score_store.load_stored(key, loaded.weights_sha256, loaded.layout)
        if kept is not None:
            return kept
        result = get_scorer(req.scorer).score(loaded, the_task, config, progress=_progress)
        try:
            score_store.save_stored(key, result)
        except OSError as exc:                         # a read-only cache: the scores still serve this server
            log.warning("could not keep the %s scores of %s: %s", req.scorer, req.sel.model, exc)
        return result


def scores_kept(req: ScoreRequest) -> bool:
    """Whether :func:`scores` of ``req`` is kept on disk: opening a page then reads it instead of computing
    (``pruning_core.scoring.store``)."""
    try:
        loaded, _ = load(req.sel.model), task(req.sel.task)      # the task first: an exposed server's path check
        key = score_store.key_for(req.sel.task, req.scorer, score_split_of(req.sel.task), req.score_size, req.seed)
    except HeadpruneError:
        return False
    return score_store.storable(key, loaded.weights_sha256) and score_store.stored_path(
        key, loaded.weights_sha256).is_file()


# -- head roles ------------------------------------------------------------------------------------
def applicable_roles(arch: ArchSummary) -> list[str]:
    """The roles that apply to the model of ``arch``, in registry order."""
    return [r for r in role_names() if kinds_for(get_role(r), arch.task_type, arch.layout.kinds)]


def roles(sel: Selection, seed: int = 0, _progress: ProgressCallback | None = None) -> RoleReport:
    """Every role's score of every head (``pruning_core.analysis.roles.compute_roles`` on the shared model, only read),
    probed with ``sel.task``'s sentences; once per model, weights, task, roles and seed for all sessions, whatever
    the evaluation size."""
    return _roles(sel.without_size(), load(sel.model).weights_sha256, tuple(role_names()), seed, _progress)


@st.cache_data(show_spinner=False, max_entries=16)
def _roles(sel: Selection, weights_sha256: str, names: tuple[str, ...], seed: int,
           _progress: ProgressCallback | None = None) -> RoleReport:
    return compute_roles(load(sel.model), task=task(sel.task), roles=list(names), seed=seed, progress=_progress)
