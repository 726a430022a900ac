"""One factory per shared job: the Head map, the Curves, Share, Model & data and Attention pages and the Tour ask
for the same scores, curves, tables, evaluations, examples and runs of one selection, and get the same job (same
name, same identity), so a page finds the job another page started instead of starting a second one; no page
spells a shared job itself, and no job name is built in two places."""
from __future__ import annotations

import ast

import pytest

from app.core.session.selection import Selection
from app.runtime import board, work
from app.model import cache, jobs, workload
from app.curves import jobs as curve_jobs
from browser_helpers import ROOT, build_tiny_app, ok, open_app
from pruning_core.core.heads import HeadMask

# the cached calls that are shared jobs, and the only modules that may wrap them in a Work
LONG_CALLS = {"scores", "curve", "ablation", "one_per_layer", "kind_sensitivity", "evaluate", "examples",
              "unigram_baseline", "example_outputs", "roles", "attention_run"}
FACTORY_MODULES = {"app/model/jobs.py", "app/curves/jobs.py", "app/attention/jobs.py"}
AD_HOC_WORKS = 11       # Work(...) built outside the factories: each a page's or a feature's own single job
EVAL_SIZE = 12


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_app(tmp_path_factory.mktemp("factories-bert"), "bert")


def _fn_name(node: ast.expr) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


def spelled_long_jobs(source: str) -> list[int]:
    """Lines of ``source`` that build a ``Work`` around one of :data:`LONG_CALLS` (its third argument or ``fn=``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _fn_name(node.func) == "Work":
            fn = node.args[2] if len(node.args) > 2 else next((k.value for k in node.keywords if k.arg == "fn"), None)
            if fn is not None and _fn_name(fn) in LONG_CALLS:
                found.append(node.lineno)
    return found


def test_only_the_factories_build_a_long_job():
    found = {}
    for path in [*ROOT.joinpath("app").rglob("*.py"), *ROOT.joinpath("app_pages").glob("*.py"), ROOT / "dashboard.py"]:
        name = path.relative_to(ROOT).as_posix()
        if name not in FACTORY_MODULES and (lines := spelled_long_jobs(path.read_text(encoding="utf-8"))):
            found[name] = lines
    assert not found, f"build these through a factory ({', '.join(sorted(FACTORY_MODULES))}): {found}"


def _works() -> list[tuple[str, int, str | None]]:
    """Every ``Work(...)`` of the dashboard: (module, line, its job name's literal start: "curve_" for
    ``f"curve_{scorer}"``, None when the name is not written out)."""
    out = []
    for path in [*ROOT.joinpath("app").rglob("*.py"), *ROOT.joinpath("app_pages").glob("*.py"), ROOT / "dashboard.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _fn_name(node.func) == "Work" and node.args:
                name = node.args[0]
                start = name.value if isinstance(name, ast.Constant) else (
                    name.values[0].value if isinstance(name, ast.JoinedStr) and name.values
                    and isinstance(name.values[0], ast.Constant) else None)
                out.append((path.relative_to(ROOT).as_posix(), node.lineno, start))
    return out


def test_each_job_name_is_built_in_one_module_and_few_jobs_are_ad_hoc():
    works = _works()
    homes: dict[str, set[str]] = {}
    for module, _, start in works:
        if start is not None:
            homes.setdefault(start, set()).add(module)
    assert {s: sorted(m) for s, m in homes.items() if len(m) > 1} == {}
    ad_hoc = [f"{m}:{line}" for m, line, _ in works if m not in FACTORY_MODULES]
    assert len(ad_hoc) <= AD_HOC_WORKS, ad_hoc


def test_the_checker_sees_a_long_job_spelled_at_a_call_site():
    assert spelled_long_jobs("w = Work('score_x', 'S', cache.scores, (req,))") == [1]
    assert spelled_long_jobs("w = Work('a', 'A', fn=cache_curves.ablation, args=(sel,))") == [1]
    assert spelled_long_jobs("w = Work('t', 'T', cache.latency, (spec, mask))") == []


@pytest.fixture
def built(monkeypatch):
    """Every Work built while the test runs, as (job, identity); no long job runs (its ``show`` returns None)."""
    seen: list[tuple[str, str]] = []
    show = work.Work.show
    long = lambda self: getattr(self.fn, "__name__", "").lstrip("_") in LONG_CALLS    # noqa: E731
    monkeypatch.setattr(work.Work, "__post_init__", lambda self: seen.append((self.job, self._ident())))
    monkeypatch.setattr(work.Work, "show", lambda self, wait=True: None if long(self) else show(self, wait))
    monkeypatch.setattr(work.Work, "begin", lambda self: None)
    return seen


def _keys(seen: list, since: int = 0) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for job, ident in seen[since:]:
        out.setdefault(job, set()).add(ident)
    return out


def test_head_map_curves_share_and_tour_get_the_same_job_for_one_selection(monkeypatch, tmp_path, tiny, built):
    from types import SimpleNamespace

    from app.headmap import latency as latency_ui
    from app.share import ui as share_ui
    from app.tour import ui as tour_ui

    at = ok(open_app(monkeypatch, tmp_path / "home", tiny, "app_pages/head_map.py", eval_limit=EVAL_SIZE))
    head_map = _keys(built)
    start = len(built)
    ok(at.switch_page("app_pages/curves.py").run())
    curves = _keys(built, start)
    sel = Selection(str(tiny.model), tiny.task, EVAL_SIZE)
    arch = cache.architecture(sel.model)
    mask = HeadMask.full(arch.layout)            # the session's mask on the pages above

    start = len(built)
    monkeypatch.setattr(latency_ui, "measurement", lambda *a, **k: None)    # a timing is no long job here
    share_ui.gather_analysis(sel, "gradient", mask, curve_scorers=["gradient", "random"], with_ablation=True,
                             with_one_per_layer=True)
    share = _keys(built, start)
    start = len(built)
    ctx = tour_ui.Ctx(SimpleNamespace(spec=sel.model, task=sel.task), sel, arch)
    for step in (tour_ui._scores, tour_ui._one_head, tour_ui._one_per_layer, tour_ui._curve):
        step(ctx)
    tour = _keys(built, start)

    pages = {"head map": head_map, "curves": curves, "share": share, "tour": tour}
    for job in ("score_gradient", "curve_gradient", "curve_random", "ablation", "one_gradient", "eval", "eval_dense"):
        asking = {page: keys[job] for page, keys in pages.items() if job in keys}
        assert len(asking) >= 2, (job, sorted(asking))               # several pages ask for it ...
        assert len(set().union(*asking.values())) == 1, (job, asking)   # ... and all get one job
    assert {"score_gradient", "eval", "eval_dense"} <= set(head_map) and {"curve_gradient", "ablation"} <= set(curves)


def test_a_drifted_argument_is_another_call_under_the_same_job_name(tiny):
    """A job is named by what it is; its identity holds every argument: another evaluation size makes another
    identity under the same name, so the new request replaces the old job (never a second job beside it)."""
    sel = Selection(str(tiny.model), tiny.task, EVAL_SIZE)
    other = Selection(sel.model, sel.task, 2 * workload.SCORE_SIZE)    # scored on more examples too
    heads = cache.architecture(sel.model).total_heads
    for make in (lambda s: jobs.scores(s, "gradient", heads), lambda s: curve_jobs.curve(s, "gradient"),
                 curve_jobs.ablation, lambda s: curve_jobs.one_per_layer(s, "gradient"), jobs.dense_evaluation):
        a, b, again = make(sel), make(other), make(Selection(sel.model, sel.task, EVAL_SIZE))
        assert a.job == b.job and a._ident() != b._ident() and a._ident() == again._ident()
        assert a.estimate_s >= 0 and a.label
    assert board.identity(cache.evaluate, (sel, None), {}) == jobs.dense_evaluation(sel)._ident()
    other_start = curve_jobs.ablation(sel, start="button")
    assert (other_start.job, other_start._ident()) == (curve_jobs.ablation(sel).job, curve_jobs.ablation(sel)._ident())
    assert jobs.examples(sel.task, 5).job != jobs.examples(sel.task, 20).job      # two pages, two jobs


def test_a_selection_is_a_frozen_hashable_key():
    sel = Selection("m", "t", 8)
    assert hash(sel) == hash(Selection("m", "t", 8)) and sel != Selection("m", "t", 9)
    with pytest.raises(AttributeError):
        sel.eval_size = 9
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(ValueError, match="eval_size"):
            Selection("m", "t", bad)
