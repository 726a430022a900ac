"""Reading a module's imports from its source (``ast``), and the library's layers, for the tests of the library's
layers and the app's floors (test modules import this helper, never one another)."""
from __future__ import annotations

import ast


# The library's folders, lowest first; a module may import its own folder and the ones below. A folder nested in
# another (NESTED) is a concept of its own with its own layer, named "parent/child": core's own modules stay the
# floor and import neither io nor runtime.
LAYERS = [
    {"core", "__version__"},
    {"core/io", "core/runtime"},
    {"evaluation"},
    {"modeling"},
    {"tasks", "bench", "bench/export"},
    {"zoo"},
    {"scoring"},
    {"compress", "analysis"},
    {"cli", "__main__"},
]
NESTED = {"core": {"io", "runtime"}, "bench": {"export"}}
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}
MAX_TOP_LEVEL = 12        # a package's top level: ten concept folders at most and its __init__/__main__


def imported_names(source: str, package: list[str], skip_typing: bool = False) -> list[tuple[str, int]]:
    """Every dotted name an import anywhere in ``source`` (top level or in functions) reaches, with its line.

    ``import a.b`` gives ``a.b``; ``from m import x`` gives ``m`` and ``m.x`` (``x`` may be a module of ``m``
    or a name defined in it); relative imports are resolved against ``package``, the importing module's package
    (``["pruning_core", "core"]`` for ``pruning_core/core/heads.py``). ``skip_typing``: leave out the imports
    under ``if TYPE_CHECKING:``.
    """
    tree = ast.parse(source)
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and ast.unparse(node.test).endswith("TYPE_CHECKING") for n in ast.walk(node)} if skip_typing else set()
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out += [(module, node.lineno)] + [(f"{module}.{a.name}", node.lineno) for a in node.names]
    return out
