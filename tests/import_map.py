"""Reading a module's imports from its source (``ast``), for the tests of the library's layers and the app's
floors."""
from __future__ import annotations

import ast


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
