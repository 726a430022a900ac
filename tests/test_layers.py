"""Imports point one way: ``app_pages``/``dashboard.py`` -> ``app`` -> ``pruning_core``, and inside
the library no module imports one from a higher layer (function-level imports included)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The library's layers, lowest first; a module may import its own layer and the ones below.
LAYERS = [
    {"errors", "registry", "progress", "storage", "heads", "metrics", "share_link", "children", "serving",
     "stats", "zoo", "distributed", "__version__"},
    {"architectures"},
    {"masking", "pruning", "layer_cache"},
    {"models", "results", "cli_args", "significance", "weight_files"},
    {"data", "presets", "experiments"},
    {"tasks", "attention_maps", "bench", "budget", "per_example", "speech_attention", "export"},
    {"finetune", "scoring", "roles"},
    {"prepare", "dynamics", "zoo_prepare", "repair"},
    {"smp"},
    {"cli", "cli_analysis", "cli_common", "cli_compress", "cli_export", "cli_model", "cli_roles", "cli_setup",
     "dynamics_cli", "__main__"},
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}
NEVER_IN_LIBRARY = {"streamlit", "plotly", "bertviz", "app", "app_pages", "dashboard"}


def _imports(path: Path, package: list[str]) -> list[tuple[str, int]]:
    """Absolute dotted names imported anywhere in ``path`` (top level or in functions), with line numbers."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                out.append((node.module or "", node.lineno))
                continue
            base = package[:len(package) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
            out += [(f"{target}.{a.name}" if not node.module else target, node.lineno) for a in node.names]
    return out


def _top(path: Path) -> str:
    parts = path.relative_to(ROOT / "pruning_core").with_suffix("").parts
    return "__version__" if parts == ("__init__",) else parts[0]


def test_every_library_module_is_in_a_layer():
    tops = {_top(p) for p in (ROOT / "pruning_core").rglob("*.py")}
    assert tops <= set(LAYER_OF), f"add {sorted(tops - set(LAYER_OF))} to LAYERS in this test"


def test_library_imports_point_down_and_never_reach_the_app():
    bad = []
    for path in (ROOT / "pruning_core").rglob("*.py"):
        me = _top(path)
        package = list(path.relative_to(ROOT).parent.parts)
        for name, line in _imports(path, package):
            head = name.split(".")[0]
            if head in NEVER_IN_LIBRARY:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
            if head == "pruning_core" and "." in name:
                target = name.split(".")[1]
                if target != me and LAYER_OF.get(target, 0) > LAYER_OF[me]:
                    bad.append(f"{path.relative_to(ROOT)}:{line} ({me}) imports {name} from a higher layer")
    assert not bad, "\n".join(sorted(set(bad)))


def test_app_never_imports_pages_or_the_shell():
    bad = []
    for path in (ROOT / "app").rglob("*.py"):
        for name, line in _imports(path, list(path.relative_to(ROOT).parent.parts)):
            if name.split(".")[0] in {"app_pages", "dashboard", "pages"}:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_the_checker_sees_an_upward_import(tmp_path):
    fake = ROOT / "pruning_core" / "heads.py"
    tree = _imports(fake, ["pruning_core"])
    assert all(n.split(".")[1] in LAYERS[0] for n, _ in tree if n.startswith("pruning_core."))
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ..smp import scorer\n")
    assert _imports(probe, ["pruning_core", "scoring"]) == [("pruning_core.smp", 2)]


def test_the_public_api_is_exactly_what_the_package_exports():
    import pruning_core

    missing = [n for n in pruning_core.__all__ if not hasattr(pruning_core, n)]
    assert not missing, missing
    assert {"load_model", "apply_mask", "prune_heads", "get_task", "get_metric", "get_scorer",
            "adapter_for", "benchmark"} <= set(pruning_core.__all__)
