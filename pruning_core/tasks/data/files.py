"""Local data files: CSV, TSV, JSONL or plain text, in one of four shapes (see :mod:`pruning_core.tasks.data`).

Columns (others ignored): ``text`` + ``label`` (classification), ``text_a`` + ``text_b`` + ``label`` (pairs),
``source`` + ``target`` (translation), ``text`` alone (documents for a language model). Format by extension:
``.csv``, ``.tsv`` / ``.tab`` (with a header row), ``.jsonl`` / ``.ndjson``, ``.txt`` (one document a line);
UTF-8, a BOM accepted. Labels that are all non-negative integers are class ids as they stand; others are
mapped to ids in sorted order and their names recorded. A file is evaluated whole: its one split is
``test`` (``validation`` and ``train`` name the same examples). A malformed file raises :class:`DataError`
naming the file, the line and the problem; nothing is half-loaded.
"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from pruning_core.tasks.data import SHAPE_TASK_TYPES, SHAPES
from pruning_core.core.errors import DataError

SPLITS: tuple[str, ...] = ("test", "validation", "train")
DELIMITERS = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
JSONL = (".jsonl", ".ndjson")
TEXT = (".txt",)
_INT = re.compile(r"^[+-]?\d+$")
MAX_CLASS_ID = 9_999          # class ids as they stand run 0..max: a larger id is a typo or not a class


@dataclass(frozen=True)
class FileData:
    """A loaded data file."""

    path: Path
    shape: str                        # "text" | "pair" | "translation" | "document"
    examples: tuple[dict, ...]        # raw examples, in file order
    label_names: tuple[str, ...] | None   # id -> name; None for translation and documents
    lines: tuple[int, ...]            # the line each example starts on (for messages)

    @property
    def task_type(self) -> str:
        return SHAPE_TASK_TYPES[self.shape]

    @property
    def num_labels(self) -> int | None:
        return None if self.label_names is None else len(self.label_names)


def _fail(path: Path, line: int | None, problem: str) -> DataError:
    where = f"{path}" + (f" line {line}" if line is not None else "")
    return DataError(f"{where}: {problem}")


def _short(value: object, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters, for a message about a value read from the file."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _shape_of(columns: list[str], path: Path, line: int) -> str:
    cols = set(columns)
    for shape in ("pair", "text", "translation", "document"):
        if set(SHAPES[shape]) <= cols:
            return shape
    wanted = " or ".join("+".join(c) for c in SHAPES.values())
    raise _fail(path, line, f"has columns {sorted(cols)}; it needs {wanted}. Rename the columns to one of these.")


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise _fail(path, line, f"is not UTF-8 (byte {raw[exc.start:exc.start + 1]!r} at offset {exc.start}). "
                                "Save the file as UTF-8 and try again.") from None


def _read_delimited(path: Path, text: str, delimiter: str) -> tuple[list[dict], list[int], str]:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise _fail(path, None, "is empty. Give it a header row and at least one example.") from None
    except csv.Error as exc:
        raise _fail(path, reader.line_num, f"cannot be parsed ({exc}). Check the quoting.") from None
    header = [h.strip() for h in header]
    shape = _shape_of(header, path, 1)
    rows, lines = [], []
    prev_end = reader.line_num
    while True:
        start = prev_end + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise _fail(path, start, f"cannot be parsed ({exc}). Check the quoting.") from None
        prev_end = reader.line_num
        if not row or all(not c.strip() for c in row):
            continue                                      # blank line
        if len(row) != len(header):
            raise _fail(path, start, f"has {len(row)} columns but the header has {len(header)} "
                                     f"({delimiter!r}-separated). Quote fields that contain the separator.")
        rows.append(dict(zip(header, row)))
        lines.append(start)
    return rows, lines, shape


def _read_jsonl(path: Path, text: str) -> tuple[list[dict], list[int], str]:
    rows, lines, shape = [], [], None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _fail(path, lineno, f"is not valid JSON ({exc.msg} at column {exc.colno}). Fix that line.") from None
        except (ValueError, RecursionError):          # a number past int()'s 4,300 digits, nesting past the stack
            raise _fail(path, lineno, "holds a number or nesting too large to read. Fix that line.") from None
        if not isinstance(obj, dict):
            raise _fail(path, lineno, f"is a JSON {type(obj).__name__}, not an object with named fields. Write one "
                                      "object per line, like {\"text\": \"...\", \"label\": 1}.")
        if shape is None:
            shape = _shape_of(list(obj), path, lineno)
        missing = [c for c in SHAPES[shape] if c not in obj]
        if missing:
            raise _fail(path, lineno, f"lacks field {missing[0]!r} (the first example has "
                                      f"{'+'.join(SHAPES[shape])}). Give every example the same fields.")
        rows.append(obj)
        lines.append(lineno)
    return rows, lines, shape or "text"


def _read_text(text: str) -> tuple[list[dict], list[int], str]:
    rows = [({"text": line}, n) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    return [r for r, _ in rows], [n for _, n in rows], "document"


def _label_ids(path: Path, raw_labels: list, lines: list[int]) -> tuple[list[int], tuple[str, ...]]:
    values = []
    for lab, line in zip(raw_labels, lines):
        if isinstance(lab, bool) or lab is None or isinstance(lab, (list, dict)):
            raise _fail(path, line, f"label {_short(lab)} is not a class (use an integer or a name).")
        if isinstance(lab, float):
            if not lab.is_integer():
                raise _fail(path, line, f"label {_short(lab)} is not a class id; regression is not supported. "
                                        "Use whole numbers or names as labels.")
            lab = int(lab)
        if isinstance(lab, str):
            lab = lab.strip()
            if not lab:
                raise _fail(path, line, "has an empty label. Give every example a label.")
            if _INT.match(lab):
                lab = int(lab) if len(lab) <= 20 else MAX_CLASS_ID + 1
        if isinstance(lab, int) and lab > MAX_CLASS_ID:
            raise _fail(path, line, f"label {_short(lab)} is past the largest class id, {MAX_CLASS_ID:,}. Number "
                                    "the classes from 0, or use names as labels.")
        values.append(lab)
    if all(isinstance(v, int) for v in values):
        distinct = sorted(set(values))
        if distinct[0] >= 0:                              # class ids as they stand
            return list(values), tuple(str(i) for i in range(max(2, distinct[-1] + 1)))
        names = [str(v) for v in distinct]                # e.g. -1 / 1: map in numeric order
    else:
        names = sorted({str(v) for v in values})
    ids = {name: i for i, name in enumerate(names)}
    return [ids[str(v)] for v in values], tuple(names)


def load_file(path: str | Path) -> FileData:
    """Read and validate a CSV / TSV / JSONL data file (see the module docstring)."""
    path = Path(path).expanduser()
    suffix = path.suffix.lower()
    if suffix not in DELIMITERS and suffix not in JSONL and suffix not in TEXT:
        raise DataError(f"{path}: unknown file type {suffix or '(no extension)'!r}. "
                        "Use .csv, .tsv or .jsonl (or .txt: one document per line).")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"Data file {path} does not exist. Check the path after 'file:'.") from None
    except OSError as exc:
        raise DataError(f"Data file {path} cannot be read ({exc.strerror}).") from None
    text = _decode(path, raw)
    if not text.strip():
        raise _fail(path, None, "is empty. Give it at least one example.")
    if suffix in JSONL:
        rows, lines, shape = _read_jsonl(path, text)
    elif suffix in TEXT:
        rows, lines, shape = _read_text(text)
    else:
        rows, lines, shape = _read_delimited(path, text, DELIMITERS[suffix])
    if not rows:
        raise _fail(path, None, "has a header but no examples. Add examples below the header.")
    text_cols = [c for c in SHAPES[shape] if c != "label"]
    examples = []
    for row, line in zip(rows, lines):
        ex = {}
        for col in text_cols:
            value = row[col]
            if not isinstance(value, str):
                raise _fail(path, line, f"{col!r} is {type(value).__name__} {_short(value)}, not text. Quote it "
                                        "as a string.")
            if not value.strip():
                raise _fail(path, line, f"has an empty {col!r}. Fill it in or remove the example.")
            ex[col] = value.strip()
        examples.append(ex)
    label_names = None
    if "label" in SHAPES[shape]:
        ids, label_names = _label_ids(path, [r["label"] for r in rows], lines)
        for ex, i in zip(examples, ids):
            ex["label"] = i
    return FileData(path=path, shape=shape, examples=tuple(examples), label_names=label_names, lines=tuple(lines))


def load_split(path: str | Path, split: str) -> FileData:
    """The file's examples for ``split`` (every split name is the whole file)."""
    if split not in SPLITS:
        raise DataError(f"A data file has the splits {', '.join(SPLITS)} (all the whole file), not {split!r}.")
    return load_file(path)
