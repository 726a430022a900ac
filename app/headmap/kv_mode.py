"""The Head map's "KV cache" mode, for decoder language models: which key/value heads keep their whole cache and
which stream (keep ``sink`` + ``window`` tokens: DuoAttention), what that does to a long-context task, and the KV
memory it saves.

A click switches a key/value head (:mod:`app.headmap.kv_figures`) between full and streaming. The panel shows the
policy on screen only: its KV memory beside the full cache's (:func:`pruning_core.modeling.kv.kv_policy.memory_report`)
and, on a button with its estimate, the task's exact-match accuracy with its interval under the policy and the full
cache (:func:`app.headmap.cache.kv_evaluation`, as ``headprune evaluate --context --kv-policy``), as jobs whose
identity is their policy. "Fill from scores" is ``headprune kv-policy``; the policy downloads as the file the CLI
reads. Every head is kept in this mode: the session's mask belongs to the other mode (docs/DASHBOARD.md).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

import streamlit as st

from app.core import reruns, ui, uncertainty
from app.core.progress_text import about
from app.core.session import session_results, state
from app.core.session.selection import Selection
from app.headmap import cache as cache_headmap
from app.headmap import kv_curve
from app.headmap.kv_figures import curve_figure, figure_width, kv_figure, legend_text, memory_help, memory_text, mib
from app.model import cache
from app.headmap import roles as role_ui
from app.runtime.work import PENDING, Work, job_board, start_button, wait_for_change
from pruning_core.bench import budget
from pruning_core.core.heads import group_scores
from pruning_core.evaluation.metrics import get_metric
from pruning_core.evaluation.results import provenance
from pruning_core.evaluation.significance import compare
from pruning_core.modeling.kv import kv_policy
from pruning_core.tasks.data import ruler

KIND = kv_policy.KIND
HEADS, KV = "heads", "kv"
MODES = {HEADS: "Heads (pruning)", KV: "KV cache"}
TASKS = (*ruler.RULER_KINDS, *ruler.ICL_FAR_KINDS)   # long prompts (the short in-context ones fit in a sink)
CONTEXTS = (1024, 2048)
EVAL_SIZES = (5, 10, 20, 50)
DEFAULT_SINK, DEFAULT_WINDOW = 128, 256     # DuoAttention's
POLICY = "kv_policy"                        # session_results name: (streaming rows, source) of the policy on screen
COMPARED = "kv_policy_compared"             # session_results name: (streaming rows, source) kept for comparison
JOB, FULL_JOB = "kv_eval", "kv_eval_full"
WHAT = {JOB: "this policy", FULL_JOB: "the full cache"}
GRID_KEY = state.widget_key("headmap", "kvgrid")      # not under the head map's grid prefix: its click log skips it
REDRAW_S = 5.0
MAP_PX, PANEL_PX = 380, 480     # the map with its controls, and the panel beside it (below it on narrow windows):
                                # the panel's four figures in one row and the curve under them, in the first screen
WIDGETS = "kv_widgets"          # session_results name: the mode's widget values, for a return from another page
DEFAULTS = {"mode": HEADS, "task": TASKS[0], "context": CONTEXTS[0], "n": 10, "sink": DEFAULT_SINK,
            "window": DEFAULT_WINDOW}

INTRO = """
Each square is one key/value head (rows are layers, 0 at the top), shared by a group of query heads: **click a
square** to switch it between the **full cache** (a filled square: it keeps every token) and **streaming** (a hollow
orange square with a dot: it keeps only the first S tokens, the attention sinks, and the last W tokens). The panel
gives the KV cache's memory for one sequence at the chosen context length at once and, when you press *Evaluate*,
the long-context task's exact-match accuracy with its 95 % interval under this policy and under the full cache (a
job, with its time estimate on the button, then progress and Cancel). Every attention head is kept in this mode:
removing heads is the *Heads (pruning)* mode's work. *Download the policy* gives the file that
`headprune evaluate MODEL --task niah-single --context 1024 --kv-policy policy.json` reads."""


def _key(name: str) -> str:
    return state.widget_key("headmap", f"kv_{name}")


@dataclass(frozen=True)
class KVSettings:
    """What the KV panel evaluates: the long-context task, its context length in tokens, the examples evaluated
    and the streaming heads' sink and window."""

    task: str = TASKS[0]
    context: int = CONTEXTS[0]
    eval_size: int = 10
    sink: int = DEFAULT_SINK
    window: int = DEFAULT_WINDOW


def offered(arch) -> bool:
    """Whether the model of ``arch`` (an ``ArchSummary``) is a decoder language model with key/value heads."""
    return arch.task_type == "language_model" and bool(arch.kv_groups.get(KIND))


def mode_picker(arch) -> str:
    """The map's mode (:data:`HEADS` or :data:`KV`); the switch is drawn only for a decoder language model."""
    if not offered(arch):
        return HEADS
    mode = st.radio("Map shows", list(MODES), list(MODES).index(_last("mode")), format_func=MODES.get,
                    horizontal=True, key=_key("mode"),
                    help="Heads: click heads to prune them. KV cache: click key/value heads to keep their whole "
                         "cache or only a sink and a recent window (DuoAttention), and see the memory and "
                         "long-context accuracy.")
    _remember()
    return mode


def scorer_hidden() -> bool:
    """Whether the Head map shows the KV mode in this run (the sidebar then leaves out the pruning scorer, which the
    mode does not use)."""
    return st.session_state.get(_key("mode"), _last("mode")) == KV


def _last(name: str):
    """The value the mode's widget ``name`` had in this session's last run of it (for this model and task), the
    default it is drawn with: Streamlit forgets a widget's state on a page that does not draw it, and a student back
    from the Attention page finds the map as they left it."""
    return (session_results.get_result(WIDGETS) or {}).get(name, DEFAULTS[name])


def _remember() -> None:
    """Note the values of the mode's widgets drawn so far in this run (the others keep theirs)."""
    kept = dict(session_results.get_result(WIDGETS) or {})
    kept.update({name: st.session_state[_key(name)] for name in DEFAULTS if _key(name) in st.session_state})
    session_results.set_result(WIDGETS, kept)


def kv_heads(arch) -> tuple[int, ...]:
    return tuple(len(row) for row in arch.kv_groups[KIND])


def current_policy(arch, sink: int, window: int) -> kv_policy.KVPolicy:
    """The session's policy for this model (every head full at first), with ``sink`` and ``window``."""
    kept = session_results.get_result(POLICY)
    heads = kv_heads(arch)
    rows, source = kept if kept is not None and tuple(map(len, kept[0])) == heads else (
        tuple((False,) * n for n in heads), {"method": "full"})
    return kv_policy.KVPolicy(rows, sink, window, source)


def _set(rows: tuple, source: dict) -> None:
    session_results.set_result(POLICY, (tuple(tuple(bool(x) for x in r) for r in rows), dict(source)))


def toggle(arch, layer: int, j: int) -> None:
    """Switch key/value head ``j`` of ``layer`` between full and streaming in the session's policy."""
    rows = [list(r) for r in current_policy(arch, DEFAULT_SINK, DEFAULT_WINDOW).streaming]
    rows[layer][j] = not rows[layer][j]
    _set(tuple(map(tuple, rows)), {"method": "by hand"})


def _on_select(arch, key: str, drawn: tuple) -> None:
    """The map's selection callback: switch each clicked key/value head once, only if the figure clicked shows the
    policy on screen (a selection the browser sends again from a replaced figure is skipped)."""
    if current_policy(arch, DEFAULT_SINK, DEFAULT_WINDOW).streaming != drawn:
        return
    points = ((st.session_state.get(key) or {}).get("selection") or {}).get("points", [])
    for point in points:
        layer, j = point.get("customdata") or (point.get("y"), point.get("x"))
        if layer is not None and j is not None:
            toggle(arch, int(layer), int(j))


def _fill(arch, report, fraction: float) -> None:
    policy = kv_policy.from_scores(report.head_scores("retrieval"), {KIND: arch.kv_groups[KIND]}, fraction,
                                   source={"score_method": "role:retrieval",
                                           "score_task": report.provenance.get("task")})
    _set(policy.streaming, policy.source)


def _reset(arch) -> None:
    _set(tuple((False,) * n for n in kv_heads(arch)), {"method": "full"})


def evaluation(spec: str, settings: KVSettings, policy: kv_policy.KVPolicy, full: bool = False) -> Work:
    """The job of :func:`app.headmap.cache.kv_evaluation` for ``policy`` (its source left out of the key), or with
    ``full`` for the full cache; started by the panel's button."""
    sel = Selection(spec, settings.task, settings.eval_size)
    rows = tuple((False,) * len(r) for r in policy.streaming) if full else policy.streaming
    what = WHAT[FULL_JOB if full else JOB]
    label = (f"Evaluating {what} on {settings.task} at {settings.context:,} tokens, {settings.eval_size} examples "
             f"(estimate: {about(seconds(spec, settings))} on 2 CPU cores)")
    return Work(FULL_JOB if full else JOB, label, cache_headmap.kv_evaluation,
                (sel, settings.context, kv_policy.KVPolicy(rows, settings.sink, settings.window)), start="button")


def seconds(spec: str, settings: KVSettings) -> float:
    """Estimated seconds of one evaluation: a prefill of ``context`` tokens and the answer's greedy tokens per
    example (multiply-adds from the shapes, :mod:`pruning_core.bench.budget`)."""
    loaded = cache.load(spec)
    new_tokens = ruler.KINDS[settings.task].new_tokens
    prefill = budget.example_cost(loaded, "language_model", settings.context).seconds(settings.eval_size)
    decode = budget.example_cost(loaded, "language_model", 1).seconds(settings.eval_size * new_tokens)
    return prefill + decode


def _drop_stale(work: Work) -> None:
    """Stop this session's evaluation of another policy, still running: its figure would never be shown."""
    board = job_board()
    running = board.get(work.job)
    if running is not None and running.running and not work.started():
        board.cancel(work.job)
        board.forget(work.job)


def show(spec: str, arch, task_name: str) -> None:
    """The KV-cache mode: the controls, the map of key/value heads and the panel (a fragment: a click reruns it)."""
    _kv(spec, arch, task_name)


@st.fragment
def _kv(spec: str, arch, task_name: str) -> None:
    wait = not reruns.fragment_rerun()
    c1, c2, c3, c4, c5 = st.columns([3, 2, 2, 2, 2])
    settings = KVSettings(
        task=c1.selectbox("Long-context task", TASKS, TASKS.index(_last("task")), key=_key("task")),
        context=c2.selectbox("Context (tokens)", CONTEXTS, CONTEXTS.index(_last("context")),
                             format_func=lambda n: f"{n:,}", key=_key("context")),
        eval_size=c3.selectbox("Examples", EVAL_SIZES, EVAL_SIZES.index(_last("n")), key=_key("n")),
        sink=int(c4.number_input("Sink S", 0, 4096, _last("sink"), 16, key=_key("sink"),
                                 help="S: the first tokens of the text a streaming head keeps (attention sinks: "
                                      "heads attend to them whatever they say)")),
        window=int(c5.number_input("Window W", 1, 8192, _last("window"), 32, key=_key("window"),
                                   help="W: the most recent tokens a streaming head keeps")))
    _remember()
    policy = current_policy(arch, settings.sink, settings.window)
    report = role_ui.ready(Selection(spec, task_name))
    scores = None
    if report is not None and "retrieval" in report.scores:
        per_group = group_scores(report.head_scores("retrieval"), {KIND: arch.kv_groups[KIND]})
        scores = per_group.kinds[KIND]
    row = st.container(horizontal=True, wrap=True, gap="small")
    left, right = row.container(width=max(figure_width(max(policy.kv_heads)), MAP_PX)), row.container(width=PANEL_PX)
    pending: list[Work] = []
    with left:
        st.caption("Key/value heads, layer 0 at the top: **click a square** to switch it between the full cache and "
                   "streaming (the hover names its query heads).")
        key = f"{GRID_KEY}_{''.join('1' if s else '0' for r in policy.streaming for s in r)}"
        st.plotly_chart(kv_figure(policy, arch.kv_groups[KIND], scores), key=key, width="content",
                        on_select=lambda: _on_select(arch, key, policy.streaming), selection_mode="points",
                        config={"displayModeBar": False, "scrollZoom": False, "doubleClick": False},
                        alt="Key/value heads: filled squares keep the full cache, hollow dotted squares stream")
        st.caption(legend_text(policy, settings.context))
        pending += _fill_controls(spec, arch, task_name, report, wait)
    with right:
        pending += _panel(spec, arch, settings, policy, wait)
    while pending and wait_for_change(pending, REDRAW_S, reruns.user_waiting):
        st.rerun(scope="fragment")


def _fill_controls(spec: str, arch, task_name: str, report, wait: bool) -> list[Work]:
    with st.container(border=True):
        fraction = st.slider("Share of key/value heads to stream", 0.0, 1.0, 0.5, 0.05, key=_key("fraction"))
        if report is not None and "retrieval" in report.scores:
            st.button(f"Fill from scores: stream the {fraction:.0%} with the lowest retrieval score",
                      key=_key("fill"), on_click=_fill, args=(arch, report, fraction), width="stretch")
            found = None
        else:
            st.caption("Fill from scores reads the heads' retrieval scores (a group's: the sum over its query "
                       "heads); find the head roles first.")
            found = role_ui.show_roles_job(st.container(), Selection(spec, task_name), True, None, wait)
        st.button("All full", key=_key("reset"), on_click=_reset, args=(arch,))
    return [found] if found is not None else []


def _panel(spec: str, arch, settings: KVSettings, policy: kv_policy.KVPolicy, wait: bool) -> list[Work]:
    """The memory of ``policy`` at once, then its accuracy beside the full cache's when evaluated (in the same row),
    the task's measured curve, then the sentences that say what each figure counts."""
    loaded = cache.load(spec)
    memory = kv_policy.memory_report(policy, loaded, settings.context)
    value, sentence = memory_text(memory)
    row = ui.metric_row("small")
    row.metric(f"KV cache at {settings.context:,} tokens", value, width="content", help=memory_help(memory),
               **({"delta": f"{memory['ratio']:.2f}x smaller", "delta_arrow": "off"} if policy.n_streaming else {}))
    row.metric("full cache", mib(memory["full_kv_bytes"]), width="content", help=memory_help(memory, full=True))
    works = [evaluation(spec, settings, policy, full=True)]
    if policy.n_streaming:
        works.insert(0, evaluation(spec, settings, policy))
    for w in works:
        _drop_stale(w)
    start_button(f"Evaluate on {settings.task}: {settings.eval_size} examples at {settings.context:,} tokens "
                 f"(estimate: {about(seconds(spec, settings) * sum(not w.started() for w in works))} on "
                 "2 CPU cores)", "kv_evaluate", works, icon=":material/play_arrow:",
                 help=f"Runs {' and '.join(WHAT[w.job] for w in works if not w.started())} as a job with progress "
                      "and Cancel; the estimate is counted from the model's shapes, not measured.")
    results, pending = [], []
    for w in works:
        result = w.show(wait) if w.started() else None
        if result is PENDING:
            pending.append(w)
            result = None
        results.append(result)
    evaluated = all(r is not None for r in results)
    diff = None
    if evaluated:
        diff = _accuracy(row, results[0], results[-1], bool(policy.n_streaming))
    _curve(spec, settings, policy, results[0].metric if evaluated else None)
    if evaluated:
        _accuracy_caption(settings, results[0], results[-1], diff)
    st.caption(sentence)
    _compare(spec, loaded, settings, policy, memory)
    _download(loaded, policy, memory)
    return pending


def _curve(spec: str, settings: KVSettings, policy: kv_policy.KVPolicy, current: float | None) -> None:
    """The task's measured curve with the map's policy on it, or how to measure it."""
    points = kv_curve.curve_points(kv_curve.read_curves(), spec, settings.task, settings.context)
    share = policy.n_streaming / policy.n_heads
    if not points:
        st.caption(f"No measured curve of this model on {settings.task} at {settings.context:,} tokens yet (accuracy "
                   "against the share of key/value heads streaming, per policy, on 100 examples). Measure it with "
                   f"`{kv_curve.command(spec, settings.task, settings.context)}`; it then shows here.")
        return
    n = max(p.examples for pts in points.values() for p in pts)
    st.plotly_chart(curve_figure(points, kv_curve.TITLES, share, current, width=PANEL_PX - 20), key=_key("curve"),
                    config={"displayModeBar": False}, width="content",
                    alt=f"Accuracy on {settings.task} against the share of key/value heads streaming")
    st.caption(f"Measured curve ({n} examples a point, `benchmarks/long_context_curves.py`): the dashed line is the "
               f"map's share, {share:.0%} of key/value heads streaming"
               + (f", the star its accuracy on the first {settings.eval_size} examples." if current is not None
                  else "; evaluate to place it."))


def _keep_for_comparison(policy: kv_policy.KVPolicy) -> None:
    session_results.set_result(COMPARED, (policy.streaming, dict(policy.source)))


def compared_rows(spec: str, loaded, settings: KVSettings, policies: list) -> list[dict]:
    """One row per policy of ``policies`` ((name, KVPolicy) pairs): its streaming heads, KV memory and, where it was
    evaluated at ``settings`` (this session's job or the server's cache), its exact match as the panel rounds it."""
    rows = []
    for name, policy in policies:
        memory = kv_policy.memory_report(policy, loaded, settings.context)
        work = evaluation(spec, settings, policy)
        result = work.ready() or (work.fn(*work.args) if work.cached() else None)
        rows.append({"policy": name, "streaming key/value heads": f"{policy.n_streaming} of {memory['kv_heads']}",
                     f"KV cache at {settings.context:,} tokens": mib(memory["kv_bytes"]),
                     "exact match": uncertainty.shown(result).value if result is not None else "not evaluated"})
    return rows


def _compare(spec: str, loaded, settings: KVSettings, policy: kv_policy.KVPolicy, memory: dict) -> None:
    """Two policies side by side: the one on screen and one kept for comparison (a button keeps the one on screen)."""
    st.button("Keep this policy for comparison", key=_key("keep"), on_click=_keep_for_comparison, args=(policy,),
              icon=":material/compare_arrows:",
              help="Keeps this policy's heads; change the map and the two are compared side by side below.")
    kept = session_results.get_result(COMPARED)
    if kept is None or tuple(map(len, kept[0])) != tuple(map(len, policy.streaming)):
        return
    other = kv_policy.KVPolicy(kept[0], settings.sink, settings.window, kept[1])
    if other.streaming == policy.streaming:
        st.caption("The kept policy is the one on screen: change the map to compare another with it.")
        return
    ui.table(pd.DataFrame(compared_rows(spec, loaded, settings, [("on screen", policy), ("kept", other)])),
             width="stretch")
    st.caption("Evaluate each with the button above while it is on screen (its figure then stays in this table); the "
               "same task, context, examples, sink and window for both.")


def _accuracy(row, ev, full, streaming: bool):
    """The policy's and the full cache's exact match in the panel's row; the change (None without streaming)."""
    metric = get_metric(ev.metric_name)
    now, base = uncertainty.shown(ev), uncertainty.shown(full)
    diff = uncertainty.change(full, ev, compare(metric, full, ev, None)) if streaming else None
    row.metric("exact match, this policy", now.value, width="content",
               help=f"{now.interval}." + (f" Change: {diff.detail}." if diff else ""),
               **ui.delta_kwargs(diff.text if diff else None, "normal", within_noise=bool(diff and diff.within_noise)))
    row.metric("exact match, full cache", base.value, width="content", help=f"{base.interval}.")
    return diff


def _accuracy_caption(settings: KVSettings, ev, full, diff) -> None:
    now, base = uncertainty.shown(ev), uncertainty.shown(full)
    st.caption(f"{settings.task} at {settings.context:,} tokens, the first {ev.n_examples} examples of the test "
               f"split, every head kept, greedy answers (what the command line's `evaluate` computes "
               f"with `--context` and `--kv-policy`): this policy {now.value} ({now.interval}); full cache "
               f"{base.value} ({base.interval})." + (f" Change: {diff.detail}." if diff else ""))


def policy_file(loaded, policy: kv_policy.KVPolicy, memory: dict) -> str:
    """``policy`` as the ``headprune.kv_policy/1`` text ``headprune kv-policy`` writes, its memory in the provenance."""
    return json.dumps(policy.to_json(provenance(loaded, method="kv-policy", settings={"memory": memory})), indent=1)


def _download(loaded, policy: kv_policy.KVPolicy, memory: dict) -> None:
    st.download_button("Download the policy (JSON)", policy_file(loaded, policy, memory), file_name="kv-policy.json",
                       mime="application/json", key=_key("download"), icon=":material/download:",
                       help="A headprune.kv_policy/1 file: `headprune evaluate MODEL --task niah-single --context 1024 "
                            "--kv-policy kv-policy.json` reads it.")

