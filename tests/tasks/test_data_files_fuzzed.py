"""Any CSV, TSV, JSONL or text data file (``--task file:PATH``), however broken, is loaded or refused with a
:class:`HeadpruneError` that names the file and says what to do: never ``csv``'s, ``json``'s or ``int()``'s own
error, and never a class list as long as a stray huge label."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bad_inputs import EDGE_TEXT, FUZZ, assert_clear, json_values, mutated_json, mutated_text, write
from pruning_core.tasks import get_task
from pruning_core.tasks.data import files

ROWS = {"text": [{"text": "a fine film", "label": 1}, {"text": "dull, and long", "label": 0}],
        "pair": [{"text_a": "A man.", "text_b": "A person.", "label": "yes"},
                 {"text_a": "A cat.", "text_b": "A dog.", "label": "no"}],
        "translation": [{"source": "bonjour", "target": "hello"}, {"source": "merci", "target": "thanks"}]}
DELIMITED = {".csv": ",", ".tsv": "\t"}


def _delimited(rows: list[dict], sep: str) -> str:
    cols = list(rows[0])
    return "\n".join([sep.join(cols)] + [sep.join(f'"{r[c]}"' for c in cols) for r in rows]) + "\n"


cells = st.sampled_from(EDGE_TEXT + ['"', '""', 'a,b', 'a\tb', 'x\ny', "9" * 5000, "1" + "0" * 30, "-1", "2.5",
                                     "1e999", "nan", "\ufeff", "\x00"]) | st.text(max_size=10)


@st.composite
def delimited_files(draw) -> tuple[str, str]:
    """(suffix, text): a CSV or TSV file with a cell, a header or the text itself broken."""
    suffix = draw(st.sampled_from(sorted(DELIMITED)))
    rows = [dict(r) for r in ROWS[draw(st.sampled_from(sorted(ROWS)))]]
    row, col = draw(st.sampled_from(range(len(rows)))), draw(st.sampled_from(list(rows[0])))
    if draw(st.booleans()):
        rows[row][col] = draw(cells)
        text = "\n".join([DELIMITED[suffix].join(rows[0])] + [DELIMITED[suffix].join(str(r[c]) for c in rows[0])
                                                               for r in rows]) + "\n"
    else:
        text = draw(mutated_text(_delimited(rows, DELIMITED[suffix])))
    return suffix, text


@st.composite
def jsonl_files(draw) -> tuple[str, str]:
    """(".jsonl", text): one row broken as data (a field dropped or retyped, a huge label) or the text broken."""
    rows = ROWS[draw(st.sampled_from(sorted(ROWS)))]
    i = draw(st.sampled_from(range(len(rows))))
    lines = [json.dumps(r) for r in rows]
    lines[i] = json.dumps(draw(mutated_json(rows[i]) | json_values), allow_nan=True, ensure_ascii=False)
    text = "\n".join(lines) + "\n"
    return ".jsonl", draw(st.just(text) | mutated_text(text))


@st.composite
def text_files(draw) -> tuple[str, str]:
    return draw(st.sampled_from([".txt", ".csv", ".jsonl", ".tsv"])), draw(st.text(max_size=80) | cells)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@FUZZ
@given(delimited_files() | jsonl_files() | text_files())
def test_any_data_file_is_loaded_or_refused_clearly(folder, file):
    suffix, text = file
    path = write(folder / f"data{suffix}", text)
    assert_clear(lambda: files.load_file(path), path)
    assert_clear(lambda: get_task(f"file:{path}"), path)


@pytest.mark.parametrize("label", ["12345678901234567890123", "9" * 5000, "10000", "1e300"])
def test_a_huge_label_is_refused_at_once(folder, label):
    path = write(folder / "huge.jsonl", "\n".join([json.dumps({"text": "a", "label": 0}),
                                                   '{"text": "b", "label": %s}' % label]) + "\n")
    message = assert_clear(lambda: files.load_file(path), path)
    assert message is not None and "line 2" in message
