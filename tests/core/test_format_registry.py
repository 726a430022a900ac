"""Every ``headprune.*`` JSON format is named once, in pruning_core/io/codec.py's registry."""
from __future__ import annotations

import ast
import re

import pytest

from browser_helpers import ROOT
from pruning_core.io import codec

FORMAT_STRING = re.compile(r"headprune\.[a-z_]+/\d+")


def format_literals(source: str) -> list[tuple[str, int]]:
    """The string constants in ``source`` that are a whole format name (``"headprune.mask/1"``), with lines."""
    return [(n.value, n.lineno) for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and FORMAT_STRING.fullmatch(n.value)]


def test_every_format_name_is_spelled_only_in_the_codec():
    spelled = []
    for folder in ("pruning_core", "app", "app_pages"):
        for path in (ROOT / folder).rglob("*.py"):
            if path != ROOT / "pruning_core" / "io" / "codec.py":
                spelled += [f"{path.relative_to(ROOT)}:{line} {name}"
                            for name, line in format_literals(path.read_text(encoding="utf-8"))]
    assert not spelled, "name these formats with pruning_core.io.codec's constants:\n" + "\n".join(spelled)


def test_the_checker_sees_a_spelled_format():
    assert format_literals('X = "headprune.mask/1"\ndef f():\n    """Writes headprune.mask/1."""\n') == \
        [("headprune.mask/1", 1)]


def test_the_registry_holds_each_format_once_with_what_it_holds():
    assert len(codec.FORMATS) == 28
    assert all(FORMAT_STRING.fullmatch(f) and holds for f, holds in codec.FORMATS.items())
    families = [codec.format_family(f) for f in codec.FORMATS]
    assert len(set(families)) == len(families)
    assert codec.MASK_FORMAT == "headprune.mask/1" and codec.format_family(codec.MASK_FORMAT) == "headprune.mask/"
    with pytest.raises(ValueError, match="registered twice"):
        codec._format("mask", 2, "a second version beside the first")
