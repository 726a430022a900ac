"""The folder tree is the architecture: imports point one way, ``app_pages``/``dashboard.py`` -> ``app`` ->
``pruning_core``, and inside the library no folder imports one from a higher layer (function-level imports
included), so the import map has no cycle between folders."""
from __future__ import annotations

import ast
from pathlib import Path

from import_map import LAYER_OF, LAYERS, MAX_TOP_LEVEL, NESTED, imported_names

NEVER_IN_LIBRARY = {"streamlit", "plotly", "bertviz", "app", "app_pages", "dashboard"}

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "pruning_core"


def imports_of(path: Path, package: list[str]) -> list[tuple[str, int]]:
    """Absolute dotted names imported anywhere in ``path`` (tests/import_map.py), with line numbers."""
    return imported_names(path.read_text(encoding="utf-8"), package)


def unit_of(parts: tuple[str, ...]) -> str:
    """The layer unit of a module below ``pruning_core`` given as path parts: its top folder, or
    "parent/child" for a folder in NESTED."""
    if parts == ("__init__",):
        return "__version__"
    return f"{parts[0]}/{parts[1]}" if len(parts) > 1 and parts[1] in NESTED.get(parts[0], ()) else parts[0]


def folder_of(path: Path) -> str:
    return unit_of(path.relative_to(LIBRARY).with_suffix("").parts)


def test_every_library_folder_is_in_a_layer():
    folders = {folder_of(p) for p in LIBRARY.rglob("*.py")}
    assert folders <= set(LAYER_OF), f"add {sorted(folders - set(LAYER_OF))} to LAYERS in this test"


def test_library_imports_point_down_and_never_reach_the_app():
    bad = []
    for path in LIBRARY.rglob("*.py"):
        me = folder_of(path)
        package = list(path.relative_to(ROOT).parent.parts)
        for name, line in imports_of(path, package):
            head = name.split(".")[0]
            if head in NEVER_IN_LIBRARY:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
            if head == "pruning_core" and "." in name:
                target = unit_of(tuple(name.split(".")[1:]))
                if target != me and LAYER_OF.get(target, 0) > LAYER_OF[me]:
                    bad.append(f"{path.relative_to(ROOT)}:{line} ({me}) imports {name} from a higher layer")
    assert not bad, "\n".join(sorted(set(bad)))


def test_app_never_imports_pages_or_the_shell():
    bad = []
    for path in (ROOT / "app").rglob("*.py"):
        for name, line in imports_of(path, list(path.relative_to(ROOT).parent.parts)):
            if name.split(".")[0] in {"app_pages", "dashboard"}:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_each_package_top_level_is_a_short_list_of_concepts():
    for package in ("pruning_core", "app"):
        entries = [p.name for p in (ROOT / package).iterdir() if p.name != "__pycache__"]
        assert len(entries) <= MAX_TOP_LEVEL, (package, sorted(entries))
        assert all(p.is_dir() or p.name in {"__init__.py", "__main__.py"} for p in (ROOT / package).iterdir()
                   if p.name != "__pycache__"), sorted(entries)


def test_the_checker_sees_an_upward_import(tmp_path):
    tree = imports_of(LIBRARY / "core" / "heads.py", ["pruning_core", "core"])
    assert all(unit_of(tuple(n.split(".")[1:])) in LAYERS[0] for n, _ in tree if n.startswith("pruning_core."))
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ..scoring import smp\n")
    assert imports_of(probe, ["pruning_core", "core"]) == [("pruning_core.scoring", 2), ("pruning_core.scoring.smp", 2)]
    probe.write_text("from .io import storage\n")       # core itself reaching its nested io: one layer up
    names = [n for n, _ in imports_of(probe, ["pruning_core", "core"])]
    assert [unit_of(tuple(n.split(".")[1:])) for n in names] == ["core/io", "core/io"]
    assert LAYER_OF["core/io"] > LAYER_OF["core"] and unit_of(("bench", "export", "to_onnx")) == "bench/export"


def test_the_public_api_is_exactly_what_the_package_exports():
    import pruning_core

    missing = [n for n in pruning_core.__all__ if not hasattr(pruning_core, n)]
    assert not missing, missing
    assert {"load_model", "apply_mask", "prune_heads", "get_task", "get_metric", "get_scorer",
            "adapter_for", "benchmark"} <= set(pruning_core.__all__)


def _module_graph(package: str, skip_typing: bool = True, root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` (a folder of ``root``) it imports (anywhere; under
    ``if TYPE_CHECKING:`` too when not ``skip_typing``)."""
    mods = {}
    for p in (root / package).rglob("*.py"):
        parts = p.relative_to(root).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p

    def resolve(name: str) -> str:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for name, path in mods.items():
        package_parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets = set()
        for dotted, _ in imported_names(path.read_text(encoding="utf-8"), package_parts, skip_typing=skip_typing):
            target = resolve(dotted)
            if target and target != name and not name.startswith(target + "."):
                targets.add(target)
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_library_has_no_import_cycle():
    assert _cycles(_module_graph("pruning_core")) == []


def test_the_library_has_no_type_only_import_cycle():
    """The imports under ``if TYPE_CHECKING:`` close no cycle either: a type two modules share lives below both
    (``AttentionSite`` in ``pruning_core/modeling/architectures/slicing.py``), and a lower module declares what it
    needs of a higher one's type (``BatchingTask`` in ``pruning_core/tasks/batching.py``)."""
    assert _cycles(_module_graph("pruning_core", skip_typing=False)) == []


def test_the_cycle_finder_sees_a_type_only_cycle(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "low.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                             "    from pkg.high import Task\n")
    (tmp_path / "pkg" / "high.py").write_text("from pkg.low import EncodedData\n")
    assert _cycles(_module_graph("pkg", skip_typing=False, root=tmp_path)) == [["pkg.high", "pkg.low"]]
    assert _cycles(_module_graph("pkg", root=tmp_path)) == []


def test_modeling_is_sorted_by_concern():
    """``pruning_core/modeling/`` and its folders keep about ten entries each; inference, KV-cache policies and the
    model's sources have their own folder."""
    modeling = LIBRARY / "modeling"
    for folder in (modeling, modeling / "inference", modeling / "kv", modeling / "sources"):
        entries = sorted(p.name for p in folder.iterdir() if p.name != "__pycache__")
        assert len(entries) <= MAX_TOP_LEVEL - 1, (folder.name, entries)


def test_the_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_app_has_no_import_cycle():
    assert _cycles(_module_graph("app")) == []


def shadowed_imports(source: str) -> list[tuple[str, int]]:
    """Function-level ``import a.b`` (no ``as``) of a package the module imports at its top level: it makes
    ``a`` local to the whole function, so a use of ``a`` above that line fails (UnboundLocalError)."""
    tree = ast.parse(source)
    top = {a.asname or a.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for a in node.names}
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    out += [(a.name, node.lineno) for a in node.names
                            if a.asname is None and "." in a.name and a.name.split(".")[0] in top]
    return out


def test_no_function_shadows_a_module_level_import():
    bad = [f"{p.relative_to(ROOT)}:{line} import {name}"
           for folder in ("pruning_core", "app", "app_pages", "benchmarks")
           for p in (ROOT / folder).rglob("*.py") for name, line in shadowed_imports(p.read_text(encoding="utf-8"))]
    assert not bad, f"write `import {{name}} as alias` or importlib.import_module instead: {bad}"


def test_the_shadow_checker_sees_the_torchrun_bug():
    source = "import torch\ndef init(cuda):\n    if cuda:\n        torch.cuda.set_device(0)\n    import torch.distributed.nn\n"
    assert shadowed_imports(source) == [("torch.distributed.nn", 5)]
