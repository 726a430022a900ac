"""The docs cannot drift: every backticked repository path in the Markdown files and module docstrings
exists; module docstrings stay short; the code carries no issue numbers, dates or timing figures (they
belong in docs/FIGURES.md with the command that reproduces them); DESIGN's checkable claims hold."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".venv", "node_modules", "__pycache__", ".git", "vendor", "reference"}
MARKDOWN = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.md")
                  if not SKIP_DIRS & set(p.relative_to(ROOT).parts) and not p.name.startswith("."))
CODE = ("pruning_core", "app")                  # no history in these: issue numbers, dates, timings
DOCSTRING_FOLDERS = ("pruning_core", "app", "app_pages", "benchmarks", "tests")
MAX_MODULE_DOCSTRING = 12                       # lines

TOP = r"(?:pruning_core|app|app_pages|benchmarks|docs|tests|assets|shared)"
PATH = re.compile(rf"`{{1,2}}({TOP}/[\w./-]*)`{{1,2}}")                  # `app/core/session/state.py`, ``docs/X.md``
# any other backticked file path (`scoring/gradient.py`): it must resolve from the root or its document's folder
FILE = re.compile(r"`{1,2}([\w.-]+(?:/[\w.-]+)+\.(?:py|md|json|toml|txt|js|css|html|cfg|sh|yml|yaml))`{1,2}")
DOTTED = re.compile(r"`{1,2}:?\w*:?`?((?:pruning_core|app)(?:\.\w+)+)")  # `pruning_core.bench.budget`, :mod:`app.x`
RELATIVE = re.compile(r":\w+:`~?(\.+\w[\w.]*)`")                          # :mod:`.common`, :func:`..kv.x` in a module
ISSUE = re.compile(r"\bissues?\s+#?\d+|(?<![\w&/])#\d+\b", re.IGNORECASE)
DATE = re.compile(r"\b20\d\d-[01]\d(?:-[0-3]\d)?\b")
# a measured time: a decimal one ("0.67 s", "1.5 ms"), or any time on a line that says it was measured
# ("measured ... 12 ms"); a specification ("30 s of audio", "a 20 ms hop") and a quoted example pass
TIMING = re.compile(r"\b\d+\.\d+\s?(?:ms|s|min)\b|(?i:\bmeasured\b.*?\b\d+\s?(?:ms|s|min)\b)")
QUOTED = re.compile(r"'[^']*(?:'|$)|\"[^\"]*(?:\"|$)")


def python_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py") if "__pycache__" not in p.parts)


def module_docstrings(*folders: str) -> dict[Path, str]:
    out = {}
    for path in python_files(*folders):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
        if doc:
            out[path] = doc
    return out


def prose_of(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring in ``source``."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                start = node.body[0].lineno
                out += [(start + i, line) for i, line in enumerate(doc.splitlines())]
    return out


def written_by_a_benchmark(path: str) -> bool:
    """A result file a benchmark writes when run (a ``benchmarks/results/`` file named in its source)."""
    name = Path(path).name
    return path.startswith("benchmarks/results/") and any(
        f'"{name}"' in p.read_text(encoding="utf-8") for p in (ROOT / "benchmarks").glob("*.py"))


def missing_path(text: str, here: Path = ROOT) -> list[str]:
    """The backticked repository paths in ``text`` that do not exist from the root (or, for a path that does not
    start at a top folder, from ``here``, the document's folder); globs, placeholders such as ``MODEL`` and the
    result files a benchmark writes skipped."""
    bad = []
    for path in dict.fromkeys(PATH.findall(text) + FILE.findall(text)):
        if any(c in path for c in "*<>{}") or path.endswith("...") or re.search(r"[A-Z]{4,}", path):
            continue
        found = (ROOT / path.rstrip("/.")).exists() or (here / path).exists()
        if not found and not written_by_a_benchmark(path):
            bad.append(path)
    return bad


def missing_module(dotted: str) -> bool:
    """Whether ``pruning_core.a.b.name`` names no module, package or name a package exports."""
    here = ROOT
    for part in dotted.split("."):
        if (here / part).is_dir():
            here = here / part
        elif (here / f"{part}.py").is_file():
            return False                        # a module; what follows is an attribute of it
        else:
            init = here / "__init__.py"
            return not (init.is_file() and re.search(rf"\b{part}\b", init.read_text(encoding="utf-8")))
    return False


def absolute(relative: str, here: Path) -> str:
    """``.common`` (or ``..kv.x``) written in a module of the folder ``here``, as an absolute dotted name."""
    dots = len(relative) - len(relative.lstrip("."))
    package = here.relative_to(ROOT).parts[: len(here.relative_to(ROOT).parts) - (dots - 1)]
    return ".".join((*package, relative.lstrip(".")))


def stale_references(text: str, here: Path = ROOT, module: bool = False) -> list[str]:
    """Paths and dotted names in ``text`` (written in ``here``; ``module``: a docstring, so relative names count)
    that name nothing."""
    dotted = DOTTED.findall(text) + ([absolute(r, here) for r in RELATIVE.findall(text)] if module else [])
    return missing_path(text, here) + [d for d in dotted if missing_module(d)]


def all_docstrings(path: Path) -> list[str]:
    """Every docstring of ``path``: its module's, its classes' and its functions'."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [d for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                        ast.AsyncFunctionDef))
            and (d := ast.get_docstring(n, clean=False))]


def test_every_backticked_path_in_every_markdown_file_exists():
    bad = [f"{name}: {ref}" for name in MARKDOWN
           for ref in stale_references((ROOT / name).read_text(encoding="utf-8"), (ROOT / name).parent)]
    assert not bad, "these paths or modules do not exist:\n" + "\n".join(bad)


def test_every_backticked_path_in_every_docstring_exists():
    paths = [*python_files(*DOCSTRING_FOLDERS), ROOT / "dashboard.py"]
    bad = [f"{path.relative_to(ROOT)}: {ref}" for path in paths for doc in all_docstrings(path)
           for ref in stale_references(doc, path.parent, module=True)]
    assert not bad, "these paths or modules do not exist:\n" + "\n".join(bad)


def test_module_docstrings_are_short():
    lengths = {str(path.relative_to(ROOT)): len(doc.strip().splitlines())
               for path, doc in module_docstrings(*DOCSTRING_FOLDERS).items()}
    long = [f"{name}: {n} lines" for name, n in lengths.items() if n > MAX_MODULE_DOCSTRING]
    assert not long, f"module docstrings over {MAX_MODULE_DOCSTRING} lines (say what and why; details to docs/):\n" \
        + "\n".join(long)


def history_in(path: Path) -> list[str]:
    """Issue numbers, dates and measured times in the comments and docstrings of ``path``."""
    return [f"{path.relative_to(ROOT)}:{line}: {what} {m.group(0)!r}"
            for line, text in prose_of(path.read_text(encoding="utf-8"))
            for what, pattern in (("issue", ISSUE), ("date", DATE), ("timing", TIMING))
            if (m := pattern.search(QUOTED.sub("", text)))]


def test_no_issue_numbers_dates_or_timings_in_the_code():
    bad = [hit for path in python_files(*CODE) for hit in history_in(path)]
    assert not bad, "history and measurements belong in docs/FIGURES.md or the commit message:\n" + "\n".join(bad)


def test_the_checks_see_what_they_look_for():
    assert missing_path("see `pruning_core/core/no_such.py` and ``app/core/text.py``") == ["pruning_core/core/no_such.py"]
    assert missing_path("``smp/scorer.py`` moved; ``scoring/gradient.py`` too") == ["smp/scorer.py", "scoring/gradient.py"]
    assert missing_path("`results/x.json`", ROOT / "benchmarks") == ["results/x.json"]
    assert missing_module("pruning_core.core.no_such") and not missing_module("pruning_core.core.heads.HeadMask")
    assert not missing_module("pruning_core.load_model") and missing_module("pruning_core.no_such_name")
    cli = ROOT / "pruning_core" / "cli"
    assert stale_references(":mod:`.cli_analysis` and :mod:`.analysis`, :func:`..kv.nothing`", cli, True) == [
        "pruning_core.cli.cli_analysis", "pruning_core.kv.nothing"]
    prose = prose_of('"""Fixed in issue 38."""\nx = 1  # 0.67 s on 2 cores (2026-12-04), see #12\n'
                     'def f():\n    """Reads 30 s of audio; shows \'2.3 s per step\'."""\n'
                     'y = 2  # Measured on SmolLM2: 55 s\n')
    hits = [(line, m.group(0)) for line, text in prose for p in (ISSUE, DATE, TIMING)
            if (m := p.search(QUOTED.sub("", text)))]
    assert sorted(hits) == [(1, "issue 38"), (2, "#12"), (2, "0.67 s"), (2, "2026-12-04"), (5, "Measured on SmolLM2: 55 s")]


# -- DESIGN's claims that a test can check -------------------------------------------------------------

DESIGN = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
NUMBERS = {"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14}


def test_design_counts_the_library_folders():
    words = re.search(r"`pruning_core/` holds (\w+) concept folders", DESIGN).group(1)
    folders = [p for p in (ROOT / "pruning_core").iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert NUMBERS[words] == len(folders), sorted(p.name for p in folders)


def test_design_lists_the_library_folders_in_its_layer_order():
    from import_map import LAYERS

    table = re.findall(r"^\| (\d) \| ([^|]+) \|", DESIGN, re.M)
    assert [{*re.findall(r"`([\w/]+)/`", folders)} for _, folders in table] == \
        [layer - {"__version__", "__main__"} for layer in LAYERS]


def test_design_names_every_adapter_method_a_family_must_write():
    from pruning_core.modeling.architectures.base import ArchitectureAdapter

    section = DESIGN[DESIGN.index("- **Architecture**"):DESIGN.index("- **Metric**")]
    named = set(re.findall(r"`(\w+)\(", section))
    assert set(ArchitectureAdapter.__abstractmethods__) <= named, sorted(ArchitectureAdapter.__abstractmethods__)


def test_design_names_every_registered_metric():
    from pruning_core.evaluation.metrics import METRICS

    named = re.search(r"Registered: ([\w, ]+)\.", DESIGN).group(1).split(", ")
    assert sorted(named) == sorted(METRICS.names())


def test_every_family_has_a_tiny_config():
    """"A new family is one file plus one entry in tests/tiny.py's CONFIGS"."""
    from pruning_core.modeling.architectures import ARCHITECTURES
    from tiny import CONFIGS

    families: dict[str, set[str]] = {}
    for model_type in ARCHITECTURES.names():
        families.setdefault(ARCHITECTURES.get(model_type).name, set()).add(model_type)
    assert not [f for f, types in families.items() if not types & set(CONFIGS)]


def test_design_names_the_formats_the_codec_writes():
    """The formats DESIGN says JsonRecord writes are those whose record declares a ``format`` field."""
    from pruning_core.core.io import codec

    declared = set()
    for path in python_files("pruning_core"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "format" and node.value is not None:
                default = next((k.value for k in getattr(node.value, "keywords", ()) if k.arg == "default"), None)
                if isinstance(default, ast.Name):
                    declared.add(getattr(codec, default.id))
    sentence = DESIGN[DESIGN.index("(`JsonRecord`) writes"):]
    sentence = sentence[:sentence.index(";")]
    assert set(re.findall(r"`(headprune\.\w+/\d+)`", sentence)) == declared
    assert set(re.findall(r"`(headprune\.\w+/\d+)`", DESIGN)) <= set(codec.FORMATS)


def cached_calls() -> dict[str, str]:
    """Every ``st.cache_data`` / ``st.cache_resource`` function of app/: name -> what its first argument is
    ("selection": a ``Selection`` or ``ScoreRequest``; "spec": the model's spec and no task; else the names of
    its first two arguments)."""
    out: dict[str, str] = {}
    for path in python_files("app"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any("st.cache_" in ast.unparse(d) for d in node.decorator_list):
                assert node.name not in out, f"two cached calls named {node.name!r}: the lists below need one each"
                names = [a.arg for a in node.args.args]
                first = node.args.args[0].annotation if names else None
                hint = ast.unparse(first) if first is not None else ""
                out[node.name] = ("selection" if hint in ("Selection", "ScoreRequest") else
                                  "spec" if names[:1] == ["spec"] and "task_name" not in names else
                                  ", ".join(names[:2]) or "nothing")
    return out


def design_names(lead: str, end: str) -> set[str]:
    """The backticked names in DESIGN between ``lead`` and the next ``end`` (line breaks read as spaces)."""
    flat = " ".join(DESIGN.split())
    text = flat[flat.index(lead) + len(lead):]
    return set(re.findall(r"`(\w+)`", text[:text.index(end)]))


def test_design_says_what_each_cached_call_takes():
    calls = cached_calls()
    by_selection = design_names("take a `Selection` or a `ScoreRequest`:", ";")
    by_spec = design_names("take its spec, with a mask or an input the user gives:", ";")
    the_rest = design_names("the rest take just what they depend on:", ".")
    assert by_selection == {n for n, k in calls.items() if k == "selection"}
    assert by_spec == {n for n, k in calls.items() if k == "spec"}
    assert the_rest == {n for n, k in calls.items() if k not in ("selection", "spec")}
    assert "data" in by_selection and "pruned_model" in by_spec and len(calls) >= 25
