"""The Curves page's "Attention kinds" tab: Michel et al. §5, which kind of attention the task needs most."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.core import ui
from app.core.session import state
from app.core.session.selection import Selection
from app.model import cache
from app.core.progress_text import count_text
from app.core.text import md_code, md_escape
from app.curves import figures, tables, words
from app.curves import jobs
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.io.codec import read_document
from pruning_core.core.heads import KIND_LABELS
from pruning_core.evaluation.kinds import FRACTIONS, KindSensitivity, borrow, missing_note, source_label

SEEDS = jobs.KIND_SEEDS
# saved `headprune kinds` runs a model that lacks a kind can borrow it from (docs/MODELS.md says how each was made)
REFERENCE_RUNS = Path(__file__).resolve().parents[2] / "assets" / "reference"


def show(sel: Selection, arch) -> None:
    """Run (on its button) and draw the kind sensitivity of the session's model and task."""
    present = [k for k, rows in arch.layout.kinds.items() if sum(rows) > 0]
    missing = [k for k in KIND_LABELS if k not in present]
    if len(present) < 2:
        st.info(f"This model has only {KIND_LABELS[present[0]]} heads: there is no other kind to compare. "
                "Choose a translation or speech model (Model & data) to see which kind a task needs most.")
        return
    scorer = state.scorer_name()
    runs = jobs.kinds_evaluations(len(present), len(FRACTIONS), SEEDS)
    examples = count_text(sel.eval_size, cache.example_unit(sel.model, sel.task))
    st.caption(f"Remove {', '.join(f'{100 * f:g}' for f in FRACTIONS)} % of ONE kind's heads, the least important "
               f"first by {md_code(scorer)} and in {SEEDS} random orders, the other kinds untouched (Michel et al. "
               f"2019, §5): {runs} evaluations of {examples}. " + missing_note(missing))
    result = jobs.kinds(sel, scorer, FRACTIONS, SEEDS, start="button").show()
    if result is None:
        return
    shown = st.container()                  # the figure above, the upload that may add to it below
    borrowed = _borrowed(result)
    with shown:
        st.plotly_chart(figures.kinds_figure(result, borrowed, run_unit), key="kinds_figure",
                        alt="Metric against the share of one attention kind's heads removed, one colour per kind")
        st.caption(f"{words.kinds_headline(result)} Error bars: 95 % intervals over the "
                   f"{count_text(result.n_examples, run_unit(result))}; dashed: the mean of {SEEDS} random "
                   "orders, shaded their range.")
        borrowed_caption(borrowed)
        ui.downloads("kinds", tables.kinds_frame(result), result.to_json())


def bundled_runs() -> list[KindSensitivity]:
    """The saved runs shipped in ``assets/reference/`` that a model lacking a kind borrows it from."""
    return [read_document(p.read_bytes(), KindSensitivity.from_json, f"File {p.name!r}") for p in sorted(REFERENCE_RUNS.glob("kinds-*.json"))]


def borrowed_caption(borrowed) -> None:
    """Which kinds of the figure come from which other model (one caption per run borrowed from)."""
    for run, kinds in borrowed:
        unit = run_unit(run)
        st.caption(f"{' and '.join(KIND_LABELS[k].capitalize() for k in kinds)}: borrowed from "
                   f"{md_escape(source_label(run, unit))} (right-hand panel), a different model, task and metric, "
                   f"measured once when that run was saved (so on its own {count_text(run.n_examples, unit)}, "
                   "not the number chosen here): compare how steeply each kind falls, not the values.")


def run_unit(run: KindSensitivity) -> str:
    """What one example of ``run`` is, from its task: "utterance" (speech), "window" (a language model), else
    "example"."""
    try:
        task_type = cache.task(run.provenance["task"]).task_type
    except (HeadpruneError, KeyError, TypeError):
        return "example"
    return {"asr": "utterance", "language_model": "window"}.get(task_type, "example")


def _borrowed(result: KindSensitivity) -> tuple:
    """The kinds this model lacks, from a saved run of another model: the bundled ones or one uploaded here."""
    if not result.missing:
        return ()
    names = " and ".join(KIND_LABELS[k] for k in result.missing)
    runs = bundled_runs()
    upload = st.file_uploader(f"Borrow {names} from another model's saved run of the kinds comparison (JSON)",
                              type=["json"], key=state.widget_key("curves", "kinds_borrow"),
                              help="Write one with `headprune kinds MODEL --task TASK --out FILE.json`. Without one, "
                                   "the runs bundled with headprune (assets/reference/) are used.")
    if upload is not None:
        try:
            runs.insert(0, read_document(upload.getvalue(), KindSensitivity.from_json, f"Upload {upload.name!r}"))
        except HeadpruneError as exc:
            st.error(md_escape(exc))
    return borrow(result, runs)[1:]
