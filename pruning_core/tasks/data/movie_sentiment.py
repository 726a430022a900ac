"""The embedded default data: movie review snippets with human sentiment ratings.

Source: Hutto & Gilbert (ICWSM 2014), 10,605 snippets (Pang & Lee 2005's) with the mean of about 20
human ratings on a -4..+4 scale, inside the ``vaderSentiment==3.3.2`` sdist on PyPI, which
``headprune prepare`` fetches with pip and checks by SHA-256.

Labels (sign of the rating, ``|rating| < 0.5`` dropped) and the split by ``sha256(id)`` are fixed:
changing them changes every published number (docs/MODELS.md, "Data movie-sentiment"). The other
ground-truth files of the tarball are kept as unlabeled text for :func:`snippet_texts` (SMP).

Cache: ``headprune_home()/data/movie-sentiment/`` with a manifest of SHA-256s, written last; a hash
that differs raises :class:`CacheError` naming ``headprune prepare --force``.
"""
from __future__ import annotations

import io
import json
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from pruning_core.core.io.codec import DATA_FORMAT
from pruning_core.core.errors import CacheError, DataError, did_you_mean
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.core.io import storage
from pruning_core.core.io.storage import sha256_bytes, write_jsonl

NAME = "movie-sentiment"
SDIST_REQUIREMENT = "vaderSentiment==3.3.2"
SDIST_FILENAME = "vaderSentiment-3.3.2.tar.gz"
SDIST_SHA256 = "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9"
INNER_TARBALL = "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
INNER_FOLDER = "hutto_ICWSM_2014"
MOVIE_FILE = "movieReviewSnippets_GroundTruth.txt"
# snippet_texts(name) -> the texts of these files (unlabeled use)
SNIPPET_FILES: dict[str, str] = {
    "movie": MOVIE_FILE,
    "amazon": "amazonReviewSnippets_GroundTruth.txt",
    "nyt": "nytEditorialSnippets_GroundTruth.txt",
    "tweets": "tweets_GroundTruth.txt",
}
SPLITS: tuple[str, ...] = ("train", "validation", "test")
LABEL_NAMES: tuple[str, str] = ("negative", "positive")
MIN_ABS_RATING = 0.5
MANIFEST = "manifest.json"
SPLIT_RULE = "int(sha256(id).hexdigest(), 16) % 10: 0 -> test, 1 -> validation, else train"


@dataclass(frozen=True)
class Snippet:
    """One row of a ``*_GroundTruth.txt`` file."""

    id: str
    rating: float       # mean human rating, -4 (very negative) .. +4 (very positive)
    text: str


def data_dir() -> Path:
    from pruning_core.modeling.sources.loading import headprune_home
    return headprune_home() / "data" / NAME


def split_of(snippet_id: str) -> str:
    """The fixed split of a snippet: see the module docstring."""
    bucket = int(sha256_bytes(snippet_id.encode("utf-8")), 16) % 10
    return "test" if bucket == 0 else "validation" if bucket == 1 else "train"


def label_of(rating: float) -> int | None:
    """1 = positive, 0 = negative, None = no clear polarity (dropped)."""
    if abs(rating) < MIN_ABS_RATING:
        return None
    return 1 if rating > 0 else 0


# -- archives ---------------------------------------------------------------------------------------

def read_member(archive: bytes, name: str, where: str = "archive") -> bytes:
    """The bytes of member ``name`` of a tar (any compression) or zip archive given as bytes."""
    try:
        if zipfile.is_zipfile(io.BytesIO(archive)):
            with zipfile.ZipFile(io.BytesIO(archive)) as zf:
                return zf.read(name)
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tf:
            member = tf.getmember(name)
            f = tf.extractfile(member)
            if f is None:
                raise KeyError(name)
            return f.read()
    except KeyError:
        raise DataError(f"{where} has no member {name!r}; it is not the expected vaderSentiment sdist. "
                        "Run `headprune prepare --force` to fetch it again.") from None
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise DataError(f"{where} is not a readable archive ({exc}). "
                        "Run `headprune prepare --force` to fetch it again.") from None


def read_nested(archive: bytes, path: list[str], where: str = "archive") -> bytes:
    """Follow ``path`` through archives inside archives: ``[inner.tar.gz, file.txt]``."""
    data = archive
    for name in path:
        data = read_member(data, name, where)
        where = f"{where}:{name}"
    return data


# -- parsing ----------------------------------------------------------------------------------------

def parse_ground_truth(data: bytes, where: str) -> list[Snippet]:
    """Parse a ``*_GroundTruth.txt`` file: ``id <TAB> mean rating <TAB> text`` per line, UTF-8."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise DataError(f"{where} line {line}: not UTF-8 ({exc.reason}). "
                        "Run `headprune prepare --force` to fetch the data again.") from None
    out: list[Snippet] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise DataError(f"{where} line {lineno}: expected 3 tab-separated columns (id, rating, text), "
                            f"found {len(parts)}.")
        sid, rating, body = parts[0].strip(), parts[1].strip(), parts[2].strip()
        try:
            value = float(rating)
        except ValueError:
            raise DataError(f"{where} line {lineno}: rating {rating!r} is not a number.") from None
        if not sid or not body:
            raise DataError(f"{where} line {lineno}: empty id or text.")
        out.append(Snippet(sid, value, body))
    if not out:
        raise DataError(f"{where} has no rows.")
    return out


def labelled_splits(snippets: list[Snippet]) -> dict[str, list[dict]]:
    """Apply the fixed label rule and split; each split is ordered by sha256(id), not file order.

    The source file groups snippets by polarity, so file order would make every "first N examples"
    subset (the dashboard's evaluation subset, ``--limit``) nearly all one label. The hash order is
    fixed and independent of the label.
    """
    splits: dict[str, list[dict]] = {s: [] for s in SPLITS}
    for sn in sorted(snippets, key=lambda sn: sha256_bytes(sn.id.encode("utf-8"))):
        label = label_of(sn.rating)
        if label is not None:
            splits[split_of(sn.id)].append({"id": sn.id, "text": sn.text, "label": label, "rating": sn.rating})
    return splits


# -- fetching ---------------------------------------------------------------------------------------

def fetch_sdist(dest: Path) -> Path:
    """Download the vaderSentiment sdist into ``dest`` with pip (no install, no dependencies)."""
    return storage.pip_download(SDIST_REQUIREMENT, SDIST_FILENAME, dest, timeout=300,
                                instead="pass its path: prepare_default(sdist=PATH) in Python")


def verified_sdist_bytes(path: Path) -> bytes:
    data = Path(path).read_bytes()
    storage.check_pinned(path, SDIST_SHA256, SDIST_REQUIREMENT, "run `headprune prepare --force`", data=data)
    return data


# -- cache ------------------------------------------------------------------------------------------

def build_cache(sdist_bytes: bytes, folder: Path, progress: ProgressCallback | None = None) -> dict:
    """Parse the (verified) sdist and write every cache file, then the manifest. Returns the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).unlink(missing_ok=True)          # from here on the folder reads as unprepared
    for stale in folder.glob(".*.tmp"):
        stale.unlink(missing_ok=True)
    inner = read_member(sdist_bytes, INNER_TARBALL, SDIST_FILENAME)
    files: dict[str, dict] = {}
    names = list(SNIPPET_FILES)
    for i, name in enumerate(names):
        member = f"{INNER_FOLDER}/{SNIPPET_FILES[name]}"
        snippets = parse_ground_truth(read_member(inner, member, f"{SDIST_FILENAME}:{INNER_TARBALL}"),
                                      where=SNIPPET_FILES[name])
        if name == "movie":
            for split, rows in labelled_splits(snippets).items():
                sha, n = write_jsonl(folder / f"{split}.jsonl", rows)
                files[f"{split}.jsonl"] = {"sha256": sha, "count": n}
            files["movie"] = {"rows": len(snippets)}
        sha, n = write_jsonl(folder / f"snippets-{name}.jsonl", [s.text for s in snippets])
        files[f"snippets-{name}.jsonl"] = {"sha256": sha, "count": n}
        report(progress, "prepare:data", i + 1, len(names), SNIPPET_FILES[name])
    files.pop("movie")
    manifest = storage.Manifest(DATA_FORMAT, {
        "name": NAME,
        "source": {"requirement": SDIST_REQUIREMENT, "sdist_sha256": SDIST_SHA256,
                   "member": f"{INNER_TARBALL}/{INNER_FOLDER}/{MOVIE_FILE}"},
        "label_rule": f"1 if rating > 0 else 0; dropped if |rating| < {MIN_ABS_RATING}",
        "split_rule": SPLIT_RULE,
    }, files=files)
    return storage.write_manifest(folder / MANIFEST, manifest)      # last: its presence means "complete"


def read_manifest(folder: Path | None = None) -> dict | None:
    """The cache manifest, or None when the data is not prepared (or a run was interrupted)."""
    return storage.read_manifest((folder or data_dir()) / MANIFEST, DATA_FORMAT,
                                 "Run `headprune prepare --force`.", require=("files",))


def verify(folder: Path | None = None) -> dict:
    """Check every cached file against the manifest; return the manifest or raise CacheError."""
    folder = folder or data_dir()
    manifest = read_manifest(folder)
    if manifest is None:
        raise CacheError(f"The movie-sentiment data is not prepared (no {folder / MANIFEST}). "
                         "Run `headprune prepare`.")
    storage.verify_files(folder, {name: entry.get("sha256") for name, entry in manifest["files"].items()},
                         "Run `headprune prepare --force`.")
    return manifest


def prepare(force: bool = False, progress: ProgressCallback | None = None, sdist: str | Path | None = None,
            folder: Path | None = None) -> dict:
    """Fetch, verify, parse and cache the data; a no-op when the cache already verifies.

    Args:
        force: rebuild even when the cache verifies.
        sdist: a local copy of ``vaderSentiment-3.3.2.tar.gz`` to use instead of downloading.
        folder: the cache folder (default ``data_dir()``).
    Returns the manifest. A corrupt or interrupted cache is rebuilt.
    """
    folder = folder or data_dir()
    if not force:
        try:
            return verify(folder)
        except CacheError:
            pass                                          # missing, interrupted or corrupt: rebuild
    report(progress, "prepare:data", 0, len(SNIPPET_FILES), f"fetching {SDIST_REQUIREMENT}")
    if sdist is not None:
        data = verified_sdist_bytes(Path(sdist))
    else:
        with tempfile.TemporaryDirectory(prefix="headprune-sdist-") as tmp:
            data = verified_sdist_bytes(fetch_sdist(Path(tmp)))
    return build_cache(data, folder, progress)


def _read_cached(folder: Path | None, name: str) -> list:
    """The rows of cache file ``name``, after verifying the whole cache against its manifest."""
    folder = folder or data_dir()
    verify(folder)
    with open(folder / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_split(split: str, folder: Path | None = None) -> list[dict]:
    """Raw examples ``{"id", "text", "label", "rating"}`` of ``split`` (train / validation / test)."""
    if split not in SPLITS:
        raise DataError(f"movie-sentiment has no split {split!r}.{did_you_mean(split, SPLITS)} "
                        f"Splits: {', '.join(SPLITS)}.")
    return _read_cached(folder, f"{split}.jsonl")


def snippet_texts(name: str, folder: Path | None = None) -> list[str]:
    """The texts of one ground-truth file (``movie``, ``amazon``, ``nyt``, ``tweets``), unlabeled."""
    if name not in SNIPPET_FILES:
        raise DataError(f"Unknown snippet source {name!r}.{did_you_mean(name, SNIPPET_FILES)} "
                        f"Sources: {', '.join(SNIPPET_FILES)}.")
    return _read_cached(folder, f"snippets-{name}.jsonl")
