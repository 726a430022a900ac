"""The pickers every page shares: scorer, evaluation size, model and task, the session's
:class:`app.core.session.selection.Selection`, and loading the model's architecture. They read the cached calls of
:mod:`app.model.cache`; the plain widgets are :mod:`app.core.ui`."""
from __future__ import annotations

import streamlit as st

from app.core.session import notices, state
from app.core.access import hide_upload_paths, store_upload, task_label
from app.core.session.selection import Selection
from app.core.text import md_code, md_escape
from app.core.ui import bind
from app.model import cache, workload
from app.sidebar import smp_training
from app.runtime.work import Work
from pruning_core.modeling.sources import catalog
from pruning_core.core.errors import HeadpruneError


def known_scorer() -> str:
    """The session's scorer; an unknown one (from a link or a file) is replaced by the first registered
    scorer, with a message on the next page. ``dashboard.py`` calls it before the sidebar shows it."""
    names = cache.scorer_names()
    current = state.scorer_name()
    if current not in names:
        fallback = state.DEFAULT_SCORER if state.DEFAULT_SCORER in names else names[0]
        notices.add_notice("error", f"Unknown scorer {md_code(current)}; available: {', '.join(names)}. "
                                  f"Using {md_code(fallback)}.")
        state.set_scorer(current := fallback)
    return current


def known_model() -> str:
    """The session's model. A link's model that cannot be loaded here (an unknown name or hub id, a missing
    folder) is replaced by the default model and task, with a message on the page, as the model form keeps the
    model in use; a prepared model not built yet stays (its pages offer to prepare it). ``dashboard.py`` calls
    it before the sidebar shows the model."""
    spec = state.take_link_model()
    if spec is None or spec != state.model_spec() or spec in catalog.names():
        return state.model_spec()
    try:
        cache.architecture(spec)
    except HeadpruneError as exc:
        model, task = state.defaults()
        state.set_model_spec(model)
        state.set_task_spec(task)
        notices.add_notice("error", f"The link's model {md_code(spec)} could not be loaded here, so the default model "
                                    f"{md_code(model)} (task {md_code(task_label(task))}) is used instead: "
                                    f"{md_escape(hide_upload_paths(str(exc)))}")
    return state.model_spec()


def scorer_picker(page: str) -> str:
    """The scorer select box (all registered scorers), bound to the session's scorer."""
    names = cache.scorer_names()
    current = known_scorer()
    key = bind(state.widget_key(page, "scorer"), current)
    st.selectbox("Importance score", names, key=key, format_func=lambda n: n,
                 help="\n\n".join(f"**{n}**: {cache.scorer_description(n)}" for n in names),
                 on_change=lambda: state.set_scorer(st.session_state[key]))
    if current == "smp":                 # no pruner yet: offer to train it here, with a time estimate
        smp_training.ready()
    return current


def selection() -> Selection:
    """The session's selection: its model and task, and the evaluation size the user chose, else the model's
    own (:func:`app.model.workload.default_eval_size`). Every page asks this one function."""
    spec, task_name = state.model_spec(), state.task_spec()
    return Selection(spec, task_name, state.eval_size() or workload.default_eval_size(spec, task_name)[0])


def eval_size_picker(page: str, narrow: bool = False) -> Selection:
    """The evaluation-size box, bound to the session's value (``narrow``: in a third of the width); returns
    the session's :func:`selection`. Its help says what the size buys and what the model's own size is."""
    if narrow:
        with st.columns([1, 2])[0]:
            return eval_size_picker(page)
    sel = selection()
    n = sel.eval_size
    key = bind(state.widget_key(page, "eval_size"), n)

    def changed() -> None:
        try:
            state.set_eval_size(st.session_state[key])
        except HeadpruneError as exc:
            notices.add_notice("error", str(exc))

    own, unit = workload.default_eval_size(sel.model, sel.task)
    st.number_input("Examples evaluated", min_value=1, max_value=state.MAX_EVAL_SIZE, step=max(1, own // 2),
                    key=key, on_change=changed,
                    help=f"The first N {unit}s of the task's evaluation split. This model's own size is {own}: a "
                         f"click in about 5 s on 2 CPU cores. {workload.interval_note(n, unit)} Ask for more "
                         "for a tighter interval.")
    return sel


def load_architecture(spec: str):
    """The model's ArchSummary (loading it if needed); None (message shown) when it cannot be loaded."""
    if cache.not_prepared(spec):
        st.warning(f"The prepared model {md_code(spec)} is not prepared on this machine yet. Prepare it on the "
                   f"**Model & data** page (or run {md_code(catalog.get(spec).command())}), or choose another model "
                   "there.")
        return None
    return Work(f"load_{spec}", f"Loading model {md_code(spec)}", cache.architecture, (spec,), progress=False).show()


# -- model and task pickers (Model & data page) -------------------------------------------------
MODEL_SOURCES = {"prepared": "prepared model", "local": "local folder", "hub": "Hugging Face hub id"}
UPLOAD_TYPES = ["csv", "tsv", "tab", "jsonl", "ndjson"]


def _source_of(spec: str) -> str:
    from pathlib import Path

    if spec in catalog.names():
        return "prepared"
    return "local" if spec.startswith(("/", ".", "~")) or Path(spec).expanduser().exists() else "hub"


def zoo_label(name: str) -> str:
    """A prepared model's name, whether it is built here, and its title: the status before the title, so a
    list too narrow for a long title still shows it."""
    entry = catalog.get(name)
    return f"{name}{'' if entry.is_prepared() else ' (not prepared yet)'}: {entry.title}"


def _apply_model() -> None:
    from pathlib import Path

    source = st.session_state[state.widget_key("model", "source")]
    where = (st.session_state[state.widget_key("model", "where")] or "").strip()
    state.set_model_typed(None)
    if source == "prepared":
        name = st.session_state[state.widget_key("model", "prepared")]
        state.set_model_spec(name)
        # the task that suits a prepared model follows it (movie-sentiment for the classifier, movie-text for
        # an LLM) unless the user picked a task of their own
        suited = catalog.get(name).task
        if state.task_spec() != suited and state.task_spec() in {catalog.get(n).task for n in catalog.names()}:
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
    try:
        cache.architecture(spec)
    except HeadpruneError as exc:
        notices.add_notice("error", f"{md_code(typed)} could not be loaded, so {md_code(state.model_spec())} stays "
                                    f"in use: {md_escape(hide_upload_paths(str(exc)))}")
        state.set_model_typed((st.session_state[state.widget_key("model", "source")], typed))   # fix one letter
        return
    state.set_model_spec(spec)


def model_picker() -> None:
    """A prepared model (the embedded default and the others ``headprune prepare --model`` builds), a local
    folder or a hub id, applied with one button."""
    spec = state.model_spec()
    prepared = spec in catalog.names()
    typed = state.model_typed()             # a model that failed to load stays in the form, to be corrected
    with st.form(state.widget_key("model", "form")):
        st.markdown("**Model**")
        st.radio("Source", list(MODEL_SOURCES), format_func=MODEL_SOURCES.get, horizontal=True,
                 key=bind(state.widget_key("model", "source"), typed[0] if typed else _source_of(spec)))
        st.selectbox("Prepared model", catalog.names(), format_func=zoo_label,
                     key=bind(state.widget_key("model", "prepared"), spec if prepared else catalog.DEFAULT))
        st.text_input("Folder or hub id (not needed for a prepared model)", placeholder="/path/to/model or org/name",
                      key=bind(state.widget_key("model", "where"), typed[1] if typed else "" if prepared else spec))
        st.form_submit_button("Use this model", on_click=_apply_model, type="primary")
    st.caption(f"In use: {md_code(spec)}. Supported: BERT, RoBERTa, ELECTRA, DistilBERT (classification), "
               "BART, Marian (translation), Whisper (speech recognition), Llama, Qwen2, Mistral, Gemma, GPT-2 "
               "(language models); weights as safetensors.")


def _apply_upload() -> None:
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
