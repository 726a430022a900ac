"""The house rules that are counts, measured one way in one test: the longest file, the longest module docstring,
the largest package folder, and test modules importing test modules. Each bound is the rule; the failure prints
every count, so a change that breaks one rule shows where the others stand."""
from __future__ import annotations

import ast
from pathlib import Path

from import_map import imported_names

ROOT = Path(__file__).resolve().parents[1]
CODE = ("pruning_core", "app", "app_pages")
BOUNDS = {
    "longest file (lines)": 450,
    "longest module docstring (lines)": 12,
    "largest package folder (entries)": 13,    # cli/ (13); every other folder 12 at most, the aim for all
    "test modules importing a test module": 0,
}


def _py(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py") if "__pycache__" not in p.parts)


def house_counts() -> dict[str, tuple[int, str]]:
    """Each count of :data:`BOUNDS` with where it is reached."""
    lines = max((len(p.read_text(encoding="utf-8").splitlines()), str(p.relative_to(ROOT))) for p in _py(*CODE))
    docs = max((len((ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")), clean=False) or "").splitlines()),
                str(p.relative_to(ROOT))) for p in _py(*CODE))
    folders = max((sum(1 for e in d.iterdir() if e.name != "__pycache__"), str(d.relative_to(ROOT)))
                  for f in CODE[:2] for d in [ROOT / f, *(ROOT / f).rglob("*")]
                  if d.is_dir() and (d / "__init__.py").is_file())
    tests = {p.stem for p in _py("tests") if p.stem.startswith("test_")}
    importing = [str(p.relative_to(ROOT)) for p in _py("tests")
                 if any(n.split(".")[0] in tests for n, _ in imported_names(p.read_text(encoding="utf-8"), []))]
    return {"longest file (lines)": lines, "longest module docstring (lines)": docs,
            "largest package folder (entries)": folders,
            "test modules importing a test module": (len(importing), ", ".join(importing))}


def test_the_house_counts_stay_within_their_bounds():
    counts = house_counts()
    over = {k: v for k, v in counts.items() if v[0] > BOUNDS[k]}
    assert not over, f"over: {over}; all counts: {counts}"
