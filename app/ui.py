"""Shared widgets: page intro, error display, and long work with a progress bar and a Cancel button.

:func:`run_job` is how a page calls anything slow in :mod:`app.cache`. The call runs as one of the
session's jobs (:mod:`app.jobs`) in a worker thread; the page's script thread draws a progress bar
fed by the pruning_core progress callback. Leaving the page does not stop the work: coming back
shows its progress or result. Cancel sets a flag that the callback turns into
``pruning_core.errors.Cancelled``: the work unwinds cleanly (pruning_core removes its hooks in
``finally`` blocks), nothing half-done is cached, and the session stays usable. A job the user
cancelled does not restart by itself; the page offers a "Cancelled. Run: ..." button.
"""
from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import streamlit as st

from app import jobs, progress_text, state
from app.access import hide_upload_paths, store_upload, task_label
from app.text import md_code, md_escape
from pruning_core import zoo
from pruning_core.errors import Cancelled, HeadpruneError
from pruning_core.metrics import get_metric

log = logging.getLogger("headprune.app")

QUICK_S = 0.3          # jobs finishing within this show no progress bar (cache hits, small work)
POLL_S = 0.15          # how often the progress bar is refreshed


def page_intro(title: str, text: str) -> None:
    """The page title, a short explanation of what the reader sees, and any queued notices."""
    st.title(title)
    st.markdown(text)
    show_notices()


def show_notices() -> None:
    """Show (once) the messages queued with ``state.add_notice``, e.g. by a link's unreadable mask."""
    for level, message in state.pop_notices():
        getattr(st, level if level in ("info", "warning", "error", "success") else "info")(message)


def show_error(exc: BaseException, what: str = "") -> None:
    """A readable message instead of a traceback (the traceback goes to the server log).

    ``what`` is Markdown (callers pass values in it through :mod:`app.text`); the message is shown
    as plain text (it often holds a value from a link or a file).
    """
    prefix = f"{what}: " if what else ""
    if isinstance(exc, HeadpruneError):             # an upload is named by its file name, not its server path
        st.error(f"{prefix}{md_escape(hide_upload_paths(str(exc)))}", icon=":material/error:")
    else:
        log.exception("unexpected error in the dashboard", exc_info=exc)
        first = md_escape(hide_upload_paths(str(exc).splitlines()[0])) if str(exc) else ""
        st.error(f"{prefix}unexpected {type(exc).__name__}: {first} "
                 "The details are in the server log; the rest of the dashboard keeps working.",
                 icon=":material/error:")


_describe = progress_text.describe     # "Pruning curve by gradient importance: step 1 of 11, …"


def run_job(job: str, label: str, fn: Callable[..., Any], *args: Any, progress: bool = True,
            auto: bool = True, fresh: bool = False, **kwargs: Any) -> Any | None:
    """Run ``fn(*args, **kwargs)`` (plus ``_progress=callback`` when ``progress``) as this session's job
    ``job`` (:mod:`app.jobs`), with a progress bar and a Cancel button while it runs.

    The work outlives the page run: when the user goes to another page and comes back, the same
    call finds the job (same name and arguments) still running, or finished, and does not start
    it again. Only Cancel stops it (or a call under the same name with other arguments).

    Args:
        job: a name for this piece of work, unique in the session (e.g. "curve_gradient").
        label: what the user sees, e.g. "Scoring heads (gradient)"; Markdown, so a value from a link or a
            file in it goes through :mod:`app.text` (``md_code(spec)``).
        auto: when False, or when the user cancelled this job before, start only on a button press
            (the button starts the job in its callback, so it is gone when the result shows).
        fresh: a timing: a finished result is handed out once, and the next call measures again.

    Returns the result, or ``None`` when it failed (message shown), was cancelled, or waits for
    a click. Pages test for ``None`` and stop or skip the dependent part.
    """
    board = state.job_board()
    kwargs_ = dict(kwargs)
    current = board.get(job)
    if current is not None and current.ident != jobs.identity(fn, args, kwargs_):
        current = None                               # made for other arguments: not this request
    if current is None or state.is_cancelled(job):
        if state.is_cancelled(job) or not auto:
            note = "Cancelled. " if state.is_cancelled(job) else ""
            st.button(f"{note}Run: {label}", key=state.widget_key("job", f"run_{job}"), on_click=start_job,
                      args=(job, label, fn, args, kwargs_, progress))
            return None
        current = board.start(job, label, fn, args, kwargs_, progress)

    current.wait(QUICK_S)
    if current.running:
        holder = st.empty()
        with holder.container():
            fraction, text = _describe(current.latest, label)
            bar = st.progress(fraction or 0.0, text=text)
            if progress:             # without a progress callback the work cannot be stopped midway
                st.button("Cancel", key=state.widget_key("job", f"cancel_{job}"), on_click=_cancel,
                          args=(job,), icon=":material/cancel:")
        # a page change or a click stops this loop (Streamlit raises in the script thread), not the job
        shown = (fraction, text)
        while current.running:
            current.wait(POLL_S)
            now = _describe(current.latest, label)
            if now != shown:    # an unchanged bar is not sent again: each send makes the browser redraw, and a
                shown = now     # class's sessions queued for the CPU would each send one per poll
                bar.progress(now[0] if now[0] is not None else 0.0, text=now[1])
        holder.empty()

    log.debug("job %s (%s) took %.3f s", job, label, (current.finished or time.time()) - current.started)
    error = current.error
    if fresh or (error is not None and not isinstance(error, Cancelled)):
        board.forget(job)            # a timing is shown once; a failure is tried again on the next run
    if error is None:
        return current.result
    if isinstance(error, Cancelled):
        st.info(f"{label}: cancelled.")
    elif isinstance(error, Exception):
        show_error(error, label)
    else:
        raise error
    return None


def start_job(job: str, label: str, fn: Callable[..., Any], args: tuple, kwargs: dict, progress: bool) -> None:
    """Start ``fn`` as this session's job ``job`` (a button's callback: before the page runs)."""
    state.clear_cancelled(job)
    state.job_board().start(job, label, fn, args, kwargs, progress)


def _cancel(job: str) -> None:
    state.job_board().cancel(job)
    state.mark_cancelled(job)


def _updating_text(what: str) -> str:
    return f":material/hourglass_top: {what}: updating…"


def updating(what: str):
    """A placeholder (``st.empty``) that says "<what>: updating…" until :func:`filling` draws the new
    value into it, so a value of the previous mask is never left on screen unmarked."""
    slot = st.empty()
    slot.caption(_updating_text(what))
    return slot


@contextlib.contextmanager
def filling(slot, what: str):
    """Draw into ``slot`` (from :func:`updating`): the "updating…" line stays on top (with any progress
    bar below it) while the block computes, and goes when the block has drawn the new values."""
    with slot.container():
        note = st.empty()
        note.caption(_updating_text(what))
        yield
        note.empty()


METRIC_GAP = "medium"


def metric_row(gap: str = METRIC_GAP):
    """A row of metrics that wraps onto the next line when the page is narrow (a projector at
    1024 x 768) instead of cutting values to '70.…': put ``st.metric(..., width="content")`` in it."""
    return st.container(horizontal=True, wrap=True, gap=gap)


def metric_label(name: str) -> str:
    """The metric's label from the registry: 'BLEU', 'MCC', 'F1', 'accuracy'."""
    return get_metric(name).label


def metric_text(name: str, value: float) -> str:
    """The metric's display format: accuracy-like metrics as percentages, BLEU as points."""
    return get_metric(name).format(value)


def is_zero_text(delta: str) -> bool:
    """Whether a formatted change ('+0.0 points', '-0.0000', '+0.0 %') shows no change at its precision."""
    number = delta.split(" ")[0]
    return any(ch.isdigit() for ch in number) and not any(ch in "123456789" for ch in number)


def delta_kwargs(delta: str | None, color: str = "normal", *, within_noise: bool = False) -> dict:
    """``st.metric`` keyword arguments for a change: a change of zero at display precision gets no arrow and
    no colour (a '+0.0' is not an improvement), nor does one whose paired 95 % interval covers zero
    (``within_noise``: it says so); ``color`` ('normal' / 'inverse') otherwise."""
    if delta is None:
        return {"delta": None}
    if is_zero_text(delta):
        return {"delta": f"{delta.lstrip('+-')} (no change)", "delta_color": "off", "delta_arrow": "off"}
    if within_noise:
        return {"delta": f"{delta} (within noise)", "delta_color": "off", "delta_arrow": "off"}
    return {"delta": delta, "delta_color": color}


def count_text(n: int) -> str:
    """1234567 -> '1.23 M'."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return str(n)


def remembered(key: str, default: Any) -> dict:
    """``key`` and ``on_change`` for a widget whose choice must survive runs in which it is not drawn
    (Streamlit forgets such a widget's value, and the browser can then show one choice while the
    page draws another). The choice is kept under a second session key."""
    store = f"{key}__kept"
    st.session_state[key] = st.session_state.get(store, default)

    def keep() -> None:
        st.session_state[store] = st.session_state[key]
    return {"key": key, "on_change": keep}


def bind(key: str, value: Any) -> str:
    """Give the widget ``key`` the value held in :mod:`app.state` before it is drawn; returns ``key``.

    Widgets bound this way write back through their ``on_change`` callback (which runs before the
    page), so the state module stays the one source of truth even when a shared link or a
    loaded analysis changes a choice.
    """
    st.session_state[key] = value
    return key


def known_scorer() -> str:
    """The session's scorer; an unknown one (from a link or a file) is replaced by the first registered
    scorer, with a message on the next page. ``dashboard.py`` calls it before the sidebar shows it."""
    from app import cache

    names = cache.scorer_names()
    current = state.scorer_name()
    if current not in names:
        fallback = state.DEFAULT_SCORER if state.DEFAULT_SCORER in names else names[0]
        state.add_notice("error", f"Unknown scorer {md_code(current)}; available: {', '.join(names)}. "
                                  f"Using {md_code(fallback)}.")
        state.set_scorer(current := fallback)
    return current


def scorer_picker(page: str) -> str:
    """The scorer select box (all registered scorers), bound to the session's scorer."""
    from app import cache

    names = cache.scorer_names()
    current = known_scorer()
    key = bind(state.widget_key(page, "scorer"), current)
    st.selectbox("Importance score", names, key=key, format_func=lambda n: n,
                 help="\n\n".join(f"**{n}**: {cache.scorer_description(n)}" for n in names),
                 on_change=lambda: state.set_scorer(st.session_state[key]))
    if current == "smp":                 # no pruner yet: offer to train it here, with a time estimate
        from app import smp_training
        smp_training.ready()
    return current


def eval_limit(spec: str, task_name: str) -> int:
    """The session's evaluation size: the user's choice, else the model's own (:mod:`app.workload`)."""
    from app import workload

    return state.eval_limit() or workload.own_size(spec, task_name)[0]


def eval_size_picker(page: str, narrow: bool = False) -> int:
    """The evaluation-subset size, bound to the session's value (``narrow``: in a third of the width).
    Its help says what the size buys and what the model's own size is."""
    from app import workload

    if narrow:
        with st.columns([1, 2])[0]:
            return eval_size_picker(page)
    spec, task_name = state.model_spec(), state.task_spec()
    n = eval_limit(spec, task_name)
    key = bind(state.widget_key(page, "eval_limit"), n)

    def changed() -> None:
        try:
            state.set_eval_limit(st.session_state[key])
        except HeadpruneError as exc:
            state.add_notice("error", str(exc))

    own, unit = workload.own_size(spec, task_name)
    st.number_input("Examples evaluated", min_value=1, max_value=state.MAX_EVAL_LIMIT, step=max(1, own // 2),
                    key=key, on_change=changed,
                    help=f"The first N {unit}s of the task's evaluation split. This model's own size is {own}: a "
                         f"click in about 5 s on 2 CPU cores. {workload.interval_note(n, unit)} Ask for more "
                         "for a tighter interval.")
    return n


def load_architecture(spec: str):
    """The model's ArchSummary (loading it if needed); None (message shown) when it cannot be loaded."""
    from app import cache

    if cache.not_prepared(spec):
        st.warning(f"The prepared model {md_code(spec)} is not prepared on this machine yet. Prepare it on the "
                   f"**Model & data** page (or run {md_code(zoo.get(spec).command())}), or choose another model "
                   "there.")
        return None
    return run_job(f"load_{spec}", f"Loading model {md_code(spec)}", cache.architecture, spec, progress=False)


# -- model and task pickers (Model & data page) -------------------------------------------------
MODEL_SOURCES = {"prepared": "prepared model", "local": "local folder", "hub": "Hugging Face hub id"}
UPLOAD_TYPES = ["csv", "tsv", "tab", "jsonl", "ndjson"]


def _source_of(spec: str) -> str:
    from pathlib import Path

    if spec in zoo.names():
        return "prepared"
    return "local" if spec.startswith(("/", ".", "~")) or Path(spec).expanduser().exists() else "hub"


def zoo_label(name: str) -> str:
    """A prepared model's name, title and (when not built here) the command that builds it."""
    entry = zoo.get(name)
    return f"{name}: {entry.title}" + ("" if entry.is_prepared() else " (not prepared yet)")


def _apply_model() -> None:
    from pathlib import Path

    source = st.session_state[state.widget_key("model", "source")]
    where = (st.session_state[state.widget_key("model", "where")] or "").strip()
    if source == "prepared":
        name = st.session_state[state.widget_key("model", "prepared")]
        state.set_model_spec(name)
        # the task that suits a prepared model follows it (movie-sentiment for the classifier, movie-text for
        # an LLM) unless the user picked a task of their own
        suited = zoo.get(name).task
        if state.task_spec() != suited and state.task_spec() in {zoo.get(n).task for n in zoo.names()}:
            state.set_task_spec(suited)
            state.add_notice("info", f"Task switched to {md_code(suited)}, the one {md_code(name)} is prepared for.")
    elif not where:
        example = "/path/to/model-folder" if source == "local" else "textattack/bert-base-uncased-SST-2"
        state.add_notice("error", f"Enter a {MODEL_SOURCES[source]} first (e.g. {md_code(example)}).")
    else:
        state.set_model_spec(str(Path(where).expanduser().absolute()) if source == "local" else where)


def model_picker() -> None:
    """A prepared model (the embedded default and the others ``headprune prepare --model`` builds), a local
    folder or a hub id, applied with one button."""
    spec = state.model_spec()
    prepared = spec in zoo.names()
    with st.form(state.widget_key("model", "form")):
        st.markdown("**Model**")
        st.radio("Source", list(MODEL_SOURCES), format_func=MODEL_SOURCES.get, horizontal=True,
                 key=bind(state.widget_key("model", "source"), _source_of(spec)))
        st.selectbox("Prepared model", zoo.names(), format_func=zoo_label,
                     key=bind(state.widget_key("model", "prepared"), spec if prepared else zoo.DEFAULT))
        st.text_input("Folder or hub id (not needed for a prepared model)", placeholder="/path/to/model or org/name",
                      key=bind(state.widget_key("model", "where"), "" if prepared else spec))
        st.form_submit_button("Use this model", on_click=_apply_model, type="primary")
    st.caption(f"In use: {md_code(spec)}. Supported: BERT, RoBERTa, ELECTRA, DistilBERT (classification), "
               "BART, Marian (translation), Whisper (speech recognition), Llama, Qwen2, Mistral, Gemma, GPT-2 "
               "(language models); weights as safetensors.")


def _apply_upload() -> None:
    from app import cache

    upload = st.session_state.get(state.widget_key("model", "upload"))
    if upload is None:
        return
    path = store_upload(upload.name, upload.getvalue())
    try:
        cache.task(f"file:{path}")            # parses the whole file: errors name the line
    except HeadpruneError as exc:
        state.add_notice("error", f"The uploaded file {md_code(upload.name)} cannot be used: "
                                  f"{md_escape(upload_message(exc, path, upload.name))}")
        return
    state.set_task_spec(f"file:{path}")
    state.add_notice("success", f"Using the uploaded file {md_code(upload.name)} as the task.")


def upload_message(exc: BaseException, path, name: str) -> str:
    """``exc``'s message with the upload's server path (and its folder) replaced by the file's name."""
    text = str(exc)
    for where in (str(path), repr(str(path)), str(path.parent)):
        text = text.replace(where, repr(name) if where.startswith("'") else name)
    return text


def task_picker() -> None:
    """A registered task name (or any name typed in), or an uploaded CSV / TSV / JSONL file."""
    from app import cache

    names = cache.task_names()
    current = state.task_spec()
    options = names if current in names else [current, *names]
    key = bind(state.widget_key("model", "task"), current)
    st.markdown("**Task**")
    st.selectbox("Task name (type `file:PATH` for a file on the server)", options, key=key, format_func=task_label,
                 accept_new_options=True, on_change=lambda: state.set_task_spec(st.session_state[key] or current))
    st.file_uploader("... or upload a data file", type=UPLOAD_TYPES, key=state.widget_key("model", "upload"),
                     on_change=_apply_upload,
                     help="Columns `text,label` (classification), `text_a,text_b,label` (pairs) or "
                          "`source,target` (translation); CSV/TSV with a header row, or JSON lines.")


# -- tables and downloads ------------------------------------------------------------------------
def rows_frame(rows):
    """A DataFrame of result rows (dataclasses such as ``experiments.AblationRow``)."""
    import dataclasses

    import pandas as pd

    return pd.DataFrame([dataclasses.asdict(r) for r in rows])


def curves_frame(curves: dict):
    """One row per (scorer, point) of ``experiments.CurveResult`` curves, without the masks."""
    import pandas as pd

    return pd.DataFrame([{"scorer": name, "fraction_removed": p.fraction_removed, "heads_removed": p.heads_removed,
                          c.metric_name: p.metric, "loss": p.loss}
                         for name, c in curves.items() for p in c.points])


def downloads(name: str, frame, data: dict, show_table: bool | str = True) -> None:
    """A sortable table plus CSV and headprune-JSON download buttons.

    ``show_table``: True shows the table, a string shows it in a collapsed expander of that title.
    """
    import json

    if isinstance(show_table, str):
        with st.expander(show_table):
            st.dataframe(frame, hide_index=True, height=min(420, 38 + 35 * len(frame)))
    elif show_table:
        st.dataframe(frame, hide_index=True, height=min(420, 38 + 35 * len(frame)))
    row = st.container(horizontal=True, wrap=True)     # buttons as wide as their labels, wrapping when narrow
    row.download_button("Download CSV", frame.to_csv(index=False).encode(), f"headprune-{name}.csv", "text/csv",
                       key=state.widget_key("download", f"{name}_csv"), icon=":material/download:")
    row.download_button("Download JSON", json.dumps(data, indent=1).encode(), f"headprune-{name}.json",
                       "application/json", key=state.widget_key("download", f"{name}_json"),
                       icon=":material/download:")
