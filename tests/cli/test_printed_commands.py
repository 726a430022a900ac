"""Every ``headprune`` command line the dashboard prints is a command the CLI accepts.

The commands are extracted from every string the app and its pages hold (docstrings and comments
left out: they are not shown) and parsed by the CLI's own parser; the one the Share page builds at
run time (:func:`app.share.links.evaluate_command`) is run for real on a tiny pruned model.
"""
from __future__ import annotations

import ast
import io
import re
import shlex
import zipfile
from pathlib import Path

import pytest

from app.share import links as share
from pruning_core.cli.main import build_parser, main
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.sources.loading import load_model
from tiny import WORDS, make_bert_tokenizer, random_words_csv, tiny_model

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("app/**/*.py"), *ROOT.glob("app_pages/*.py"), ROOT / "dashboard.py"])
# "headprune <word>" in prose, not a command: a report title, "headprune adapter `bert`", ...
PROSE = {"analysis", "adapter", "file", "report"}
COMMAND = re.compile(r"\bheadprune ([a-z][a-z-]*)([^`\"'\n)]*)")
PLACEHOLDER = "x"          # stands for an f-string's {value}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _shown_strings(path: Path) -> list[str]:
    """Every string literal of ``path`` except docstrings; an f-string's values become ``x``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "{" + PLACEHOLDER + "}"
                               for v in node.values))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
              and id(node) not in inner):
            out.append(node.value)
    return out


def printed_commands() -> list[tuple[str, str]]:
    """(file, command line) for every ``headprune`` command in a string the dashboard shows."""
    found = []
    for path in SOURCES:
        for text in _shown_strings(path):
            # adjacent literals ("... `headprune " "smp compare ...`") are one constant already
            for m in COMMAND.finditer(text):
                if m.group(1) in PROSE:
                    continue
                line = re.split(r"\.(?:\s|$)|[;,]", m.group(0))[0].replace("{" + PLACEHOLDER + "}", PLACEHOLDER)
                found.append((path.relative_to(ROOT).as_posix(), line.strip()))
    return found


def test_the_dashboard_prints_commands():
    files = {f for f, _ in printed_commands()}
    assert {"app/share/links.py", "app_pages/smp_compare.py", "app_pages/dynamics.py"} <= files


@pytest.mark.parametrize("where,line", printed_commands())
def test_every_printed_command_parses(where, line):
    argv = [a for a in shlex.split(line)[1:] if a != "..."]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{where} prints {line!r}, which the CLI refuses (exit {exc.code})")


def test_the_share_page_command_evaluates_the_pruned_model(tmp_path, monkeypatch, headprune_home):
    model = tiny_model("bert")
    model.save_pretrained(tmp_path / "dense")
    make_bert_tokenizer(tmp_path / "dense")
    random_words_csv(tmp_path / "tiny.csv", rows=8, words_per_row=5, vocab=WORDS[:10])
    loaded = load_model(str(tmp_path / "dense"))
    mask = HeadMask.full(loaded.layout).toggled("encoder_self", 0, 1)
    task_name = f"file:{tmp_path / 'tiny.csv'}"
    data = share.pruned_model_zip(loaded, mask, task_name)
    folder = share.unzip_model(data, tmp_path / "unzipped")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        readme = zf.read(f"{folder.name}/README.txt").decode()
    line = share.evaluate_command(folder.name, task_name)
    assert line in readme
    monkeypatch.chdir(folder.parent)            # the README says: in the folder that holds the model
    assert main(shlex.split(line)[1:]) == 0
