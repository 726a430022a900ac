"""The dashboard's layers: the app's folders sit on floors and import only their own floor and the ones below
(function-level imports included), with no cycle between folders; the pure modules of ``app`` import no Streamlit,
and the page scripts live outside Streamlit's auto-discovered ``pages/`` folder (no private Streamlit API needed)."""
from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest

from browser_helpers import ROOT
from import_map import imported_names

# The app's folders, lowest first; a module may import its own floor and the ones below (docs/DESIGN.md).
FLOORS = [
    {"__init__", "core"},                  # conventions: session state, the mask, text, widgets, the page list
    {"runtime"},                           # long work: Work and the job board; no feature
    {"model"},                             # the model: its cached calls, the shared jobs, their sizing
    {"headmap", "curves", "attention", "roles", "speed"},                                  # features
    {"share"},                             # the analysis bundle, links, report: reads the features' results
    {"sidebar"},                           # the pickers, the SMP pruner's training, the warm-up
    {"tour"},                              # walks through every page
]
FLOOR_OF = {name: i for i, names in enumerate(FLOORS) for name in names}
FEATURES = FLOORS[3]
SIZING = "app.model.workload"              # the click-sizing policy: the model floor, the features and the sidebar
JOB_SIZING = ("app.model.jobs", "app.curves.jobs")    # each job's estimate and label, beside its factory
SIZED = re.compile(r"_seconds$|_label$|_for_click$|_evaluations$")   # the names of those sizing functions

PURE = ["app", "app.core.colouring", "app.share.analysis", "app.share.links", "app.share.report", "app.curves.figures",
        "app.headmap.figures", "app.headmap.kv_figures", "app.speed.figures", "app.attention.figures", "app.curves.dynamics",
        "app.core.webassets", "app.core.text", "app.core.access", "app.core.uncertainty", "app.tour.steps",
        "app.roles.probe", "app.curves.words", "app.headmap.examples",
        "pruning_core.analysis.attention_maps", "pruning_core.core.io.share_link"]


@pytest.mark.heavy
def test_pure_app_modules_do_not_import_streamlit():
    code = (f"import sys\nfor name in {PURE!r}:\n    __import__(name)\n"
            "bad = sorted(m for m in sys.modules if m == 'streamlit' or m.startswith('streamlit.'))\n"
            "assert not bad, bad[:5]\nprint('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def app_imports(source: str, package: list[str]) -> list[tuple[str, int]]:
    """The ``app`` folders a module of ``package`` imports, anywhere in ``source`` (top level or in functions),
    with line numbers, each once."""
    found = [(n.split(".")[1], line) for n, line in imported_names(source, package) if n.startswith("app.")]
    return list(dict.fromkeys(found))


def folder_of(path) -> str:
    return path.relative_to(ROOT / "app").with_suffix("").parts[0]


def imports_of(path) -> list[tuple[str, int]]:
    return app_imports(path.read_text(encoding="utf-8"), list(path.relative_to(ROOT).parent.parts))


def folder_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in ROOT.joinpath("app").rglob("*.py"):
        me = folder_of(path)
        graph.setdefault(me, set()).update(t for t, _ in imports_of(path) if t != me)
    return graph


def folder_cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The folders that reach themselves through others' imports, one sorted list per cycle found."""
    reach = {v: set() for v in graph}
    for v in graph:
        todo = list(graph[v])
        while todo:
            w = todo.pop()
            if w not in reach[v]:
                reach[v].add(w)
                todo += graph.get(w, ())
    return sorted({tuple(sorted(w for w in reach[v] if v in reach.get(w, ()))) for v in graph if v in reach[v]})


def test_every_app_folder_is_on_a_floor():
    folders = {folder_of(p) for p in ROOT.joinpath("app").rglob("*.py")}
    assert folders <= set(FLOOR_OF), f"add {sorted(folders - set(FLOOR_OF))} to FLOORS in this test"


def test_app_imports_point_down():
    bad = []
    for path in ROOT.joinpath("app").rglob("*.py"):
        me = folder_of(path)
        for target, line in imports_of(path):
            if FLOOR_OF.get(target, len(FLOORS)) > FLOOR_OF[me]:
                bad.append(f"{path.relative_to(ROOT)}:{line} ({me}) imports app.{target} from a higher floor")
    assert not bad, "\n".join(sorted(bad))


def test_app_folders_have_no_import_cycle():
    assert folder_cycles(folder_graph()) == []


def test_design_draws_the_app_tree_and_its_floors():
    """docs/DESIGN.md's ``app/`` tree names every folder of ``app/``, in the order of :data:`FLOORS`."""
    text = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    tree = text[text.index("```\napp/\n") + len("```\napp/\n"):]
    drawn = re.findall(r"^  ([a-z_]+)/ ", tree[:tree.index("```")], flags=re.M)
    folders = {p.name for p in ROOT.joinpath("app").iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert sorted(drawn) == sorted(folders), (drawn, sorted(folders))
    assert [FLOOR_OF[f] for f in drawn] == sorted(FLOOR_OF[f] for f in drawn), drawn

def test_the_floor_checker_sees_an_upward_import_and_a_folder_cycle():
    probe = "import os\ndef f():\n    from app.headmap import panel\n    from ..model import cache\n"
    assert app_imports(probe, ["app", "core"]) == [("headmap", 3), ("model", 4)]
    assert folder_cycles({"headmap": {"roles", "core"}, "roles": {"headmap"}, "core": set()}) == [("headmap", "roles")]


# A Head-map click's way to ``Task.evaluate``, as (importer, imported) hops between app modules; docs/DESIGN.md
# lists these modules and counts them.
CLICK_HOPS = [("headmap/panel", "headmap/clicks"), ("headmap/clicks", "core/session/state"),
              ("headmap/panel", "model/jobs"), ("model/jobs", "model/cache"),
              ("model/jobs", "runtime/work"), ("runtime/work", "runtime/board"), ("model/cache", "runtime/board")]


def modules_imported_by(module: str) -> set[str]:
    """The app modules (``folder/name``) that ``app/<module>.py`` imports (none when it does not exist)."""
    path = ROOT / "app" / f"{module}.py"
    if not path.is_file():
        return set()
    source = path.read_text(encoding="utf-8")
    names = {"/".join(n.split(".")[1:]) for n, _ in imported_names(source, ["app", *module.split("/")[:-1]])
             if n.startswith("app.")}
    return {m for m in names if (ROOT / "app" / f"{m}.py").is_file()}


def click_path_problems(design: str, hops: list[tuple[str, str]]) -> list[str]:
    """What is wrong between DESIGN's walk of a click (``design``: the document's text) and ``hops``: a count
    that is not the number of modules listed or on the hops, a module listed that no hop reaches (or the other
    way), a module the hops do not reach from the first one listed, a hop that is not an import of its module."""
    start = design.index("**A head-map click** crosses")
    para = design[start:design.index("\n\n", design.index("\n1. ", start))]
    count = int(re.search(r"crosses (\d+) app modules", para).group(1))
    listed = re.findall(r"^\d+\. `app/([a-z_]+(?:/[a-z_]+)+)\.py`", para, flags=re.M)
    on_path = {m for hop in hops for m in hop}
    problems = [] if count == len(listed) == len(on_path) else [f"count {count}, {len(listed)} listed, "
                                                                f"{len(on_path)} on the hops"]
    problems += [f"listed, on no hop: {m}" for m in listed if m not in on_path]
    problems += [f"on a hop, not listed: {m}" for m in sorted(on_path - set(listed))]
    reached, todo = set(), listed[:1]
    while todo:
        m = todo.pop()
        if m not in reached:
            reached.add(m)
            todo += [b for a, b in hops if a == m]
    problems += [f"not reached from {listed[0]}: {m}" for m in sorted(on_path - reached)]
    return problems + [f"not an import: {a} -> {b}" for a, b in hops if b not in modules_imported_by(a)]


def test_design_counts_the_modules_a_click_crosses():
    assert click_path_problems((ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8"), CLICK_HOPS) == []
    assert "task(sel.task).evaluate(" in (ROOT / "app" / "model" / "cache.py").read_text(encoding="utf-8")


def test_the_click_path_check_sees_a_lost_hop_and_a_wrong_count():
    design = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    gone = [*CLICK_HOPS[:-1], ("model/cache", "core/session/mask_history")]     # a module that is no more
    assert "not an import: model/cache -> core/session/mask_history" in click_path_problems(design, gone)
    assert click_path_problems(design, CLICK_HOPS[1:]) == [                     # the panel's hop forgotten
        f"not reached from headmap/panel: {m}" for m in ("core/session/state", "headmap/clicks")]
    n = len({m for hop in CLICK_HOPS for m in hop})
    wrong = design.replace(f"crosses {n} app modules", f"crosses {n - 1} app modules")
    assert click_path_problems(wrong, CLICK_HOPS) == [f"count {n - 1}, {n} listed, {n} on the hops"]


def _importers(target) -> list[str]:
    """The modules of ``app``, ``app_pages`` and ``dashboard.py`` that import an app module for which
    ``target(name)`` holds (``name``: dotted, e.g. ``app.model.workload``)."""
    found = []
    for path in [*ROOT.joinpath("app").rglob("*.py"), *ROOT.joinpath("app_pages").glob("*.py"), ROOT / "dashboard.py"]:
        rel = path.relative_to(ROOT)
        names = imported_names(path.read_text(encoding="utf-8"), list(rel.parent.parts))
        if any(target(n) for n, _ in names):
            found.append(rel.as_posix())
    return sorted(found)


def test_features_import_no_other_feature():
    """What two features share lives on a floor below both (docs/DESIGN.md): no feature imports another."""
    bad = [f"{p.relative_to(ROOT)}:{line} imports app.{t}" for p in ROOT.joinpath("app").rglob("*.py")
           if folder_of(p) in FEATURES for t, line in imports_of(p) if t in FEATURES and t != folder_of(p)]
    assert not bad, "\n".join(sorted(bad))


def test_the_sidebar_is_imported_by_pages_the_tour_and_dashboard_only():
    found = _importers(lambda n: n == "app.sidebar" or n.startswith("app.sidebar."))
    assert [f for f in found if not f.startswith(("app_pages/", "app/tour/", "app/sidebar/", "dashboard.py"))] == []


def _sizing_names() -> set[str]:
    """``module.name`` of every sizing function of :data:`JOB_SIZING` (what a job's factory says it costs)."""
    found = set()
    for module in JOB_SIZING:
        tree = ast.parse((ROOT / f"{module.replace('.', '/')}.py").read_text(encoding="utf-8"))
        found |= {f"{module}.{n.name}" for n in tree.body if isinstance(n, ast.FunctionDef) and SIZED.search(n.name)}
    return found


def sizing_asked(source: str, package: list[str], sizing: set[str]) -> list[str]:
    """The names of ``sizing`` that ``source`` imports or reads off their module (``jobs.eval_seconds``)."""
    tree = ast.parse(source)
    aliases = {}                                       # a local name -> the dotted name it was imported as
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            aliases |= {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname: a.name for a in node.names if a.asname}
    named = [n for n, _ in imported_names(source, package) if n in sizing]
    read = [f"{aliases[n.value.id]}.{n.attr}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and f"{aliases.get(n.value.id)}.{n.attr}" in sizing]
    return sorted(set(named + read))


def test_pages_and_the_head_map_panel_ask_no_sizing():
    """A job carries its label and time estimate (its factory sizes it): no page, neither the Head-map panel nor
    ``dashboard.py`` imports the sizing policy (:mod:`app.model.workload`) or asks a job's estimate itself."""
    found = _importers(lambda n: n == SIZING or n.startswith(SIZING + "."))
    assert [f for f in found if f.startswith("app_pages/") or f in ("app/headmap/panel.py", "dashboard.py")] == []
    sizing = _sizing_names()
    assert {"app.model.jobs.eval_seconds", "app.curves.jobs.curve_seconds"} <= sizing, sorted(sizing)
    asked = {}
    for path in [*ROOT.joinpath("app_pages").glob("*.py"), ROOT / "app" / "headmap" / "panel.py", ROOT / "dashboard.py"]:
        rel = path.relative_to(ROOT)
        if here := sizing_asked(path.read_text(encoding="utf-8"), list(rel.parent.parts), sizing):
            asked[rel.as_posix()] = here
    assert not asked, asked


def test_the_sizing_check_sees_an_estimate_asked_of_a_factory_module():
    sizing = {"app.model.jobs.eval_seconds", "app.curves.jobs.curve_seconds"}
    probe = ("from app.model import jobs as j\nfrom app.curves.jobs import curve_seconds\n"
             "def f(sel):\n    return j.eval_seconds(sel) + j.evaluation(sel).estimate_s\n")
    assert sizing_asked(probe, ["app_pages"], sizing) == sorted(sizing)
    assert sizing_asked("from app.model import jobs\njobs.evaluation(sel)\n", ["app_pages"], sizing) == []


def _calls_to(tree: ast.AST, names: set[str]) -> int:
    return sum(isinstance(n, ast.Attribute) and n.attr in names for n in ast.walk(tree))


def test_every_streamlit_cache_lives_in_app_cache():
    """Cached calls live in the model floor's app/model/cache.py and each feature's own app/<feature>/cache.py,
    nowhere else."""
    found = {}
    for path in [*ROOT.joinpath("app").rglob("*.py"), *ROOT.joinpath("app_pages").glob("*.py"), ROOT / "dashboard.py"]:
        count = _calls_to(ast.parse(path.read_text(encoding="utf-8")), {"cache_data", "cache_resource"})
        if count:
            found[path.relative_to(ROOT).as_posix()] = count
    assert "app/model/cache.py" in found, found
    assert all(re.fullmatch(r"app/[a-z]+/cache\.py", name) for name in found), found


def test_pages_are_not_in_the_auto_discovered_folder_and_no_private_streamlit_api_is_used():
    """Streamlit 1.67 still runs an app with a ``pages/`` folder beside its main script as an old-style
    multipage app (``PagesManager.uses_pages_directory``): the page scripts live in ``app_pages/``."""
    assert not (ROOT / "pages").exists()
    for path in [*ROOT.joinpath("app").rglob("*.py"), ROOT / "dashboard.py"]:
        text = path.read_text(encoding="utf-8")
        assert "PagesManager" not in text and "streamlit.runtime.pages_manager" not in text, path


def _literal(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant) and isinstance(node.value, str)


def _session_state(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "session_state"


def test_only_app_state_names_session_keys_and_touches_the_url():
    """``app/core/session/state.py`` holds every session-state key and the URL's query parameters: other
    modules index ``st.session_state`` only with its names or widget keys, never a literal, and never touch
    ``st.query_params``."""
    found = []
    for path in [*ROOT.joinpath("app").rglob("*.py"), *ROOT.joinpath("app_pages").glob("*.py"), ROOT / "dashboard.py"]:
        if path == ROOT / "app" / "core" / "session" / "state.py":
            continue
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            literal_key = (isinstance(n, ast.Subscript) and _session_state(n.value) and _literal(n.slice)) or (
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and _session_state(n.func.value)
                and n.args and _literal(n.args[0]))
            if literal_key or (isinstance(n, ast.Attribute) and n.attr == "query_params"):
                found.append(f"{path.relative_to(ROOT).as_posix()}:{n.lineno}")
    assert not found, found


def test_app_state_holds_keys_url_and_mask_only():
    """``app/core/session/state.py`` holds the session's keys, the URL and the mask with its undo history (what
    every page reads); the feature logic that once lived there (jobs, notices, kept results) stays in its
    feature's module: state imports no other app module but the Markdown escaping of :mod:`app.core.text`."""
    tree = ast.parse((ROOT / "app" / "core" / "session" / "state.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert {m for m in imported if m == "app" or m.startswith("app.")} <= {"app.core.text"}, imported
    assert [n.name for n in tree.body if isinstance(n, ast.ClassDef)] == ["HistoryEntry", "MaskHistory"]


def test_app_core_is_a_short_list_of_concepts():
    """``app/core`` keeps about ten entries, as a package's top level does; the session's state is ``session/``."""
    from import_map import MAX_TOP_LEVEL

    entries = sorted(p.name for p in (ROOT / "app" / "core").iterdir() if p.name != "__pycache__")
    assert len(entries) <= MAX_TOP_LEVEL and "session" in entries, entries
