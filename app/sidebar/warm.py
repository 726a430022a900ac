"""Scores ready on arrival: the default scorer's importance of a prepared model's heads on its own task,
computed before anyone opens the Head map and kept on disk for every session (``pruning_core.scoring.store``).

``python -m app.sidebar.warm [MODEL ...]`` computes them now (``make run`` and ``make test`` do, right after
preparing); the dashboard's first run starts the same in the background (:func:`start_once`) for the model
a new session opens on, when prepare ran without it. Only scoring that would start by itself on opening a
page (:func:`app.model.jobs.waits_for_click` False: a short one) is done ahead: a long one keeps its button.
"""
from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
import warnings

# Streamlit loggers that warn when cached functions are made or called without a server ("No runtime found,
# using MemoryCacheStorageManager", "missing ScriptRunContext"): the command line quiets them to errors
NO_RUNTIME_LOGGERS = ("streamlit.runtime.caching.cache_data_api",
                      "streamlit.runtime.scriptrunner_utils.script_run_context")


def _errors_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR


def quiet_without_server() -> None:
    """Streamlit's no-server warnings down to errors: ``python -m app.sidebar.warm`` (``make run``) shows progress.
    A filter, not only a level: Streamlit sets every one of its loggers' levels again when it first reads its
    config (at the first cached call that computes, on a fresh cache), which let one warning through."""
    import streamlit.logger

    for name in NO_RUNTIME_LOGGERS:
        logger = streamlit.logger.get_logger(name)
        logger.setLevel(logging.ERROR)
        if _errors_only not in logger.filters:
            logger.addFilter(_errors_only)


if __name__ == "__main__":          # before the app's modules make their cached functions (each would warn)
    quiet_without_server()

from app.core.session.selection import Selection  # noqa: E402
from app.core.session.state import DEFAULT_SCORER  # noqa: E402
from app.core.progress_text import about  # noqa: E402
from app.model import cache, jobs, workload  # noqa: E402
from pruning_core.modeling.sources import catalog  # noqa: E402
from pruning_core.core.errors import HeadpruneError  # noqa: E402
from pruning_core.zoo.bergamot import SACREMOSES_HINT  # noqa: E402

log = logging.getLogger("headprune.app")


def wanted(spec: str, task_name: str, scorer: str = DEFAULT_SCORER) -> Selection | None:
    """The selection whose scores a new session's Head map would compute by itself, None when there is
    nothing to do ahead (:func:`why_not`)."""
    if spec not in catalog.prepared_names():     # before sizing: only a prepared model is read here
        return None
    sel = workload.default_selection(spec, task_name)
    return None if why_not(sel, scorer) else sel


def why_not(sel: Selection, scorer: str = DEFAULT_SCORER) -> str:
    """Why ``sel``'s scores are not computed ahead ("" when they should be)."""
    if sel.model not in catalog.prepared_names():
        return "not a prepared model"
    req, heads = workload.score_request(sel, scorer), cache.load(sel.model).layout.total_heads
    if cache.scores_kept(req):
        return "kept already"
    if jobs.waits_for_click(req, heads):
        return f"{about(jobs.scoring_seconds(req, heads))} of scoring: the Head map starts it on a click"
    return ""


def warm(sel: Selection, scorer: str = DEFAULT_SCORER) -> None:
    """Compute and keep ``scorer``'s scores of ``sel`` (what the Head map asks for)."""
    cache.scores(workload.score_request(sel, scorer))


def start(spec: str, task_name: str) -> threading.Thread | None:
    """Warm ``spec`` on ``task_name`` in a background thread when :func:`wanted`; a failure is logged, never
    shown (the Head map's own scoring then says what is wrong)."""
    try:
        sel = wanted(spec, task_name)
    except HeadpruneError:
        return None
    if sel is None:
        return None

    def run() -> None:
        try:
            warm(sel)
        except Exception as exc:  # noqa: BLE001 - the page that asks for the scores shows the error
            log.warning("could not score %s ahead: %s", spec, exc)

    thread = threading.Thread(target=run, name="headprune-warm", daemon=True)
    thread.start()
    return thread


_started: set[tuple[str, str]] = set()     # (model, task) warmed by this server process
_started_lock = threading.Lock()


def start_once(spec: str, task_name: str) -> threading.Thread | None:
    """:func:`start`, once per server process for each (model, task): the dashboard calls it on every run."""
    with _started_lock:
        if (spec, task_name) in _started:
            return None
        _started.add((spec, task_name))
    return start(spec, task_name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Score prepared models' heads ahead, for the dashboard.")
    parser.add_argument("models", nargs="*", help="prepared models (default: every prepared model)")
    args = parser.parse_args(argv)
    quiet_without_server()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=SACREMOSES_HINT)      # a translation model's tokenizer
        return _warm_all(args.models or catalog.prepared_names())


def _warm_all(models: list[str]) -> int:
    for spec in models:
        if spec not in catalog.prepared_names():
            print(f"{spec}: " + (f"not prepared yet: run `headprune prepare --model {spec}` first" if spec in
                                 catalog.names() else f"no such model; the models are {', '.join(catalog.names())}")
                  + ". Nothing scored.", file=sys.stderr)
            return 2
        t, task_name = time.monotonic(), catalog.get(spec).task
        sel = workload.default_selection(spec, task_name)
        if why := why_not(sel):
            print(f"{spec}: {DEFAULT_SCORER} scores not computed ahead: {why}")
            continue
        warm(sel)
        print(f"{spec}: {DEFAULT_SCORER} scores on {task_name} kept for the dashboard in {time.monotonic() - t:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
