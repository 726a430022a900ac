"""Shared widgets: page intro and notices, error display, "updating…" placeholders, metric rows, the
scorer / size / model / task pickers, tables and downloads.

Anything slow in :mod:`app.jobs.cache` is called through :class:`app.jobs.work.Work` (progress bar, Cancel,
when it starts).
"""
from __future__ import annotations

import contextlib
import logging
from typing import Any

import streamlit as st

from app.core import notices, state
from app.core.access import hide_upload_paths, store_upload, task_label
from app.core.text import md_code, md_escape
from pruning_core.core import catalog as zoo
from pruning_core.core.errors import HeadpruneError
from pruning_core.evaluation.metrics import get_metric

log = logging.getLogger("headprune.app")


def page_intro(title: str, text: str) -> None:
    """The page title, a short explanation of what the reader sees, and any queued notices."""
    st.title(title)
    st.markdown(text)
    show_notices()


def show_notices() -> None:
    """Show (once) the messages queued with ``notices.add_notice``, e.g. by a link's unreadable mask."""
    for level, message in notices.pop_notices():
        getattr(st, level if level in notices.LEVELS else "info")(message)


def show_error(exc: BaseException, what: str = "") -> None:
    """A readable message instead of a traceback (the traceback goes to the server log).

    ``what`` is Markdown (callers pass values in it through :mod:`app.core.text`); the message is shown
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


def updating_text(what: str) -> str:
    """The caption of a value being computed: "<what>: updating…"."""
    return f":material/hourglass_top: {what}: updating…"


def updating(what: str):
    """A placeholder (``st.empty``) that says "<what>: updating…" until :func:`filling` draws the new
    value into it, so a value of the previous mask is never left on screen unmarked."""
    slot = st.empty()
    slot.caption(updating_text(what))
    return slot


@contextlib.contextmanager
def filling(slot, what: str):
    """Draw into ``slot`` (from :func:`updating`): the "updating…" line stays on top (with any progress
    bar below it) while the block computes, and goes when the block has drawn the new values."""
    with slot.container():
        note = st.empty()
        note.caption(updating_text(what))
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
    """Give the widget ``key`` the value held in :mod:`app.core.state` before it is drawn; returns ``key``.

    Widgets bound this way write back through their ``on_change`` callback (which runs before the
    page), so the state module stays the one source of truth even when a shared link or a
    loaded analysis changes a choice.
    """
    st.session_state[key] = value
    return key


def known_scorer() -> str:
    """The session's scorer; an unknown one (from a link or a file) is replaced by the first registered
    scorer, with a message on the next page. ``dashboard.py`` calls it before the sidebar shows it."""
    from app.jobs import cache

    names = cache.scorer_names()
    current = state.scorer_name()
    if current not in names:
        fallback = state.DEFAULT_SCORER if state.DEFAULT_SCORER in names else names[0]
        notices.add_notice("error", f"Unknown scorer {md_code(current)}; available: {', '.join(names)}. "
                                  f"Using {md_code(fallback)}.")
        state.set_scorer(current := fallback)
    return current


def scorer_picker(page: str) -> str:
    """The scorer select box (all registered scorers), bound to the session's scorer."""
    from app.jobs import cache

    names = cache.scorer_names()
    current = known_scorer()
    key = bind(state.widget_key(page, "scorer"), current)
    st.selectbox("Importance score", names, key=key, format_func=lambda n: n,
                 help="\n\n".join(f"**{n}**: {cache.scorer_description(n)}" for n in names),
                 on_change=lambda: state.set_scorer(st.session_state[key]))
    if current == "smp":                 # no pruner yet: offer to train it here, with a time estimate
        from app.smp import training as smp_training
        smp_training.ready()
    return current


def eval_limit(spec: str, task_name: str) -> int:
    """The session's evaluation size: the user's choice, else the model's own (:mod:`app.jobs.workload`)."""
    from app.jobs import workload

    return state.eval_limit() or workload.own_size(spec, task_name)[0]


def eval_size_picker(page: str, narrow: bool = False) -> int:
    """The evaluation-subset size, bound to the session's value (``narrow``: in a third of the width).
    Its help says what the size buys and what the model's own size is."""
    from app.jobs import workload

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
            notices.add_notice("error", str(exc))

    own, unit = workload.own_size(spec, task_name)
    st.number_input("Examples evaluated", min_value=1, max_value=state.MAX_EVAL_LIMIT, step=max(1, own // 2),
                    key=key, on_change=changed,
                    help=f"The first N {unit}s of the task's evaluation split. This model's own size is {own}: a "
                         f"click in about 5 s on 2 CPU cores. {workload.interval_note(n, unit)} Ask for more "
                         "for a tighter interval.")
    return n


def load_architecture(spec: str):
    """The model's ArchSummary (loading it if needed); None (message shown) when it cannot be loaded."""
    from app.jobs import cache

    if cache.not_prepared(spec):
        st.warning(f"The prepared model {md_code(spec)} is not prepared on this machine yet. Prepare it on the "
                   f"**Model & data** page (or run {md_code(zoo.get(spec).command())}), or choose another model "
                   "there.")
        return None
    from app.jobs.work import Work  # app.work draws its errors with show_error above

    return Work(f"load_{spec}", f"Loading model {md_code(spec)}", cache.architecture, (spec,), progress=False).show()


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
            notices.add_notice("info", f"Task switched to {md_code(suited)}, the one {md_code(name)} is prepared for.")
    elif not where:
        example = "/path/to/model-folder" if source == "local" else "textattack/bert-base-uncased-SST-2"
        notices.add_notice("error", f"Enter a {MODEL_SOURCES[source]} first (e.g. {md_code(example)}).")
    else:
        _use_if_it_loads(str(Path(where).expanduser().absolute()) if source == "local" else where, where)


def _use_if_it_loads(spec: str, typed: str) -> None:
    """Switch the session to ``spec`` only once it has loaded (then cached for the pages): a model that
    fails to load never replaces the one in use; the error says why and which model stays."""
    from app.jobs import cache

    try:
        cache.architecture(spec)
    except HeadpruneError as exc:
        notices.add_notice("error", f"{md_code(typed)} could not be loaded, so {md_code(state.model_spec())} stays "
                                    f"in use: {md_escape(hide_upload_paths(str(exc)))}")
        return
    state.set_model_spec(spec)


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
    from app.jobs import cache

    upload = st.session_state.get(state.widget_key("model", "upload"))
    if upload is None:
        return
    path = store_upload(upload.name, upload.getvalue())
    try:
        cache.task(f"file:{path}")            # parses the whole file: errors name the line
    except HeadpruneError as exc:
        notices.add_notice("error", f"The uploaded file {md_code(upload.name)} cannot be used: "
                                  f"{md_escape(upload_message(exc, path, upload.name))}")
        return
    state.set_task_spec(f"file:{path}")
    notices.add_notice("success", f"Using the uploaded file {md_code(upload.name)} as the task.")


def upload_message(exc: BaseException, path, name: str) -> str:
    """``exc``'s message with the upload's server path (and its folder) replaced by the file's name."""
    text = str(exc)
    for where in (str(path), repr(str(path)), str(path.parent)):
        text = text.replace(where, repr(name) if where.startswith("'") else name)
    return text


def task_picker() -> None:
    """A registered task name (or any name typed in), or an uploaded CSV / TSV / JSONL file."""
    from app.jobs import cache

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
