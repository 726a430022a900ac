"""Every ``headprune.*`` JSON format is named once, in pruning_core/core/io/codec.py's registry, and written by one
mechanism: a JsonRecord, or a ``to_json`` written by hand that says why."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from browser_helpers import ROOT
from pruning_core.core.io import codec

FORMAT_STRING = re.compile(r"headprune\.[a-z0-9_.-]+(/[a-z_]+)?/\d+")      # headprune.data/ruler/1 too


def format_literals(source: str) -> list[tuple[str, int]]:
    """The string constants in ``source`` that are a whole format name (``"headprune.mask/1"``), with lines."""
    return [(n.value, n.lineno) for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and FORMAT_STRING.fullmatch(n.value)]


def document_literals(source: str) -> list[int]:
    """Lines of the dict literals in ``source`` that build a headprune document (a ``"format"`` key), outside a
    function whose first lines say ``# by hand:`` and outside a ``metadata=`` argument (a safetensors header)."""
    tree, lines = ast.parse(source), source.splitlines()
    exempt: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "metadata":
            exempt |= {id(n) for n in ast.walk(node.value)}
        head = lines[node.lineno - 1:min(node.lineno + 6, node.end_lineno)] if isinstance(node, ast.FunctionDef) else []
        if "# by hand:" in "\n".join(head):
            exempt |= {id(n) for n in ast.walk(node)}
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Dict) and id(n) not in exempt
            and any(isinstance(k, ast.Constant) and k.value == "format" for k in n.keys)]


def sources(*folders: str, root: Path = ROOT):
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            yield path.relative_to(root), path.read_text(encoding="utf-8")


def test_every_format_name_is_spelled_only_in_the_codec():
    spelled = [f"{path}:{line} {name}" for path, text in sources("pruning_core", "app", "app_pages")
               if path != Path("pruning_core/core/io/codec.py") for name, line in format_literals(text)]
    assert not spelled, "name these formats with pruning_core.core.io.codec's constants:\n" + "\n".join(spelled)


def test_no_headprune_document_is_built_as_a_dict_literal():
    found = [f"{path}:{line}" for path, text in sources("pruning_core", "app", "app_pages")
             for line in document_literals(text)]
    assert not found, ("write these documents with a JsonRecord (a manifest with "
                       "pruning_core.core.io.storage.Manifest), or in a to_json that says why by hand:\n"
                       + "\n".join(found))


def test_the_checkers_see_a_spelled_format_and_a_document_literal():
    assert format_literals('X = "headprune.mask/1"\ndef f():\n    """Writes headprune.mask/1."""\n') == \
        [("headprune.mask/1", 1)]
    assert [name for name, _ in format_literals('A = "headprune.data/ruler/1"\nB = "headprune.qwen2.5-0.5b/1"')] == \
        ["headprune.data/ruler/1", "headprune.qwen2.5-0.5b/1"]
    source = ('def f():\n    return {"format": F, "x": 1}\n'
              'def g():\n    # by hand: a custom wire form\n    return {"format": F}\n'
              'save(s, metadata={"format": F})\n')
    assert document_literals(source) == [2]


def test_the_registry_holds_each_format_once_with_what_it_holds():
    assert len(codec.FORMATS) == 32
    assert all(FORMAT_STRING.fullmatch(f) and holds for f, holds in codec.FORMATS.items())
    families = [codec.format_family(f) for f in codec.FORMATS]
    assert len(set(families)) == len(families)
    assert codec.MASK_FORMAT == "headprune.mask/1" and codec.format_family(codec.MASK_FORMAT) == "headprune.mask/"
    assert codec.format_family(codec.RULER_FORMAT) == "headprune.data/ruler/" != codec.format_family(codec.DATA_FORMAT)
    with pytest.raises(ValueError, match="registered twice"):
        codec._format("mask", 2, "a second version beside the first")
