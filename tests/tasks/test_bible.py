"""Bible verse pairs: read from a small bible.db written here, split by book, tasks registered."""
from __future__ import annotations

import sqlite3

import pytest

from pruning_core.tasks.data import bible
from pruning_core.core.errors import CacheError
from pruning_core.tasks import get_task


def _db(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE bible (id INTEGER, bbName TEXT, bNumber INTEGER, cNumber INTEGER, vNumber INTEGER, "
                "vText TEXT)")
    rows = [("4", 43, 1, 2, "The same was  in the beginning."), ("a", 43, 1, 2, "Ele estava no princípio."),
            ("4", 43, 1, 1, "In the beginning was the Word."), ("a", 43, 1, 1, "No princípio era o Verbo."),
            ("4", 1, 1, 1, "In the beginning God created."), ("a", 1, 1, 1, "No princípio criou Deus."),
            ("2", 1, 1, 1, "another English version"), ("4", 41, 1, 1, "only English"), ("a", 41, 1, 1, " ")]
    con.executemany("INSERT INTO bible VALUES (0, ?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    return path


def test_pairs_join_the_two_versions_in_canonical_order_and_skip_empty_verses(tmp_path):
    pairs = bible.verse_pairs(_db(tmp_path / "bible.db"))
    assert [p["ref"] for p in pairs] == ["1:1:1", "43:1:1", "43:1:2"]
    assert pairs[2] == {"ref": "43:1:2", "en": "The same was in the beginning.", "pt": "Ele estava no princípio."}


def test_the_split_keeps_books_together():
    assert bible.split_of(43) == "test" and bible.split_of(41) == "validation"
    assert {bible.split_of(b) for b in range(1, 67) if b not in (41, 43)} == {"train"}


def test_tasks_before_preparing_name_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADPRUNE_HOME", str(tmp_path))
    for name in ("bible-en-pt", "bible-pt-en"):
        task = get_task(name)
        assert task.task_type == "translation" and task.default_split == "test"
        with pytest.raises(CacheError, match="headprune prepare --model bergamot-en-pt"):
            task._loader("test", 5)


def test_the_book_task_reads_one_book_as_one_document(monkeypatch):
    pairs = {"train": [{"ref": "45:1:1", "en": "Paul, a servant.", "pt": "x"}, {"ref": "46:1:1", "en": "Other.", "pt": "y"},
                       {"ref": "45:1:2", "en": "Called to be an apostle.", "pt": "z"}]}
    monkeypatch.setattr(bible, "load_pairs", lambda split: pairs.get(split, []))
    assert bible.book_text(45) == "Paul, a servant. Called to be an apostle."
    task = get_task("bible-book-lm")
    assert task.task_type == "language_model" and task.splits == ("test",)
    assert task._loader("test", None) == [{"text": "Paul, a servant. Called to be an apostle."}]
    with pytest.raises(Exception, match="no verses of book 44"):
        bible.book_text(44)
