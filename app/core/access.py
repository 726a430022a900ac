"""Which server files a dashboard session may read, by the address the server listens on.

On the loopback address (``headprune app``'s default) the user is the operator: any ``file:`` task and any
local model folder opens. A server exposed on purpose (``headprune app --host ADDR``) reads local paths given
through the UI or a link only inside the folders its operator listed (``--data-dir DIR``, passed as
:data:`DATA_DIRS_ENV`) and inside the private upload folder; uploads, hub ids and the embedded default keep
working. A refused path gets the same message whether it exists or not, never a resolved server path; paths
are resolved (symlinks, ``..``) before the check, so neither leads out of an allowed folder.

Pure: no Streamlit. The dashboard reads the environment and the address in :func:`app.model.cache.data_access`.
"""
from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pruning_core.core.io import storage
from pruning_core.modeling.sources import catalog
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.runtime.serving import DATA_DIRS_ENV, is_loopback

FILE_PREFIX = "file:"

class PathNotAllowedError(HeadpruneError):
    """A local path outside the folders an exposed server may read."""


def upload_root() -> Path:
    """The private folder uploaded data files are written to (always readable by the app)."""
    return Path(tempfile.gettempdir()) / "headprune-uploads"


_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def store_upload(name: str, content: bytes) -> Path:
    """Write an uploaded data file to a private folder of :func:`upload_root` named by its hash; return
    its path. The extension (.csv / .tsv / .jsonl) is kept because it tells the file reader the format."""
    folder = upload_root() / storage.sha256_bytes(content)[:16]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (_SAFE_NAME.sub("_", Path(name).name) or "data.csv")
    if not path.is_file():
        storage.write_bytes(path, content)
    return path


def is_within(path: str | Path, roots: Iterable[str | Path]) -> bool:
    """Whether ``path``, with symlinks and ``..`` resolved, lies inside one of ``roots`` (also resolved)."""
    try:
        target = Path(path).expanduser().resolve()
    except (OSError, RuntimeError):        # a symlink loop, an unreadable component
        return False
    for root in roots:
        try:
            if target.is_relative_to(Path(root).expanduser().resolve()):
                return True
        except (OSError, RuntimeError):
            continue
    return False


def _looks_like_path(spec: str) -> bool:
    """A model spec that ``pruning_core.modeling.sources.loading.load_model`` would open as a local folder."""
    return (spec.startswith((".", "/", "~")) or (os.sep in spec and spec.count("/") > 1)
            or Path(spec).expanduser().exists())


@dataclass(frozen=True)
class DataAccess:
    """``restricted`` False: any local path. True: only paths inside ``roots``."""

    restricted: bool = False
    roots: tuple[Path, ...] = ()

    def _refuse(self, what: str, given: str) -> PathNotAllowedError:
        return PathNotAllowedError(
            f"{what} {given!r} is not allowed: this dashboard is reachable from other machines, so it opens "
            "local files only inside the folders its operator allowed (headprune app --data-dir DIR). "
            "Upload a data file instead, or ask the operator to allow its folder.")

    def check_task(self, name: str) -> None:
        """Refuse a ``file:PATH`` task outside the allowed folders (other task names pass)."""
        if self.restricted and name.startswith(FILE_PREFIX):
            if not is_within(name[len(FILE_PREFIX):], self.roots):
                raise self._refuse("The data file", name[len(FILE_PREFIX):])

    def check_model(self, spec: str) -> None:
        """Refuse a local model folder outside the allowed folders (prepared models and hub ids pass)."""
        if self.restricted and spec not in catalog.names() and _looks_like_path(spec) and not is_within(spec, self.roots):
            raise self._refuse("The model folder", spec)


def data_access_from(env: Mapping[str, str], server_address: str | None) -> DataAccess:
    """The policy for a server listening on ``server_address`` with environment ``env``.

    Restricted when :data:`DATA_DIRS_ENV` is set (``headprune app --host`` sets it) or when the
    address is set and not loopback; the allowed folders are those listed plus :func:`upload_root`.
    An unset address counts as loopback: ``.streamlit/config.toml`` binds 127.0.0.1.
    """
    listed = env.get(DATA_DIRS_ENV)
    restricted = listed is not None or (bool(server_address) and not is_loopback(server_address))
    if not restricted:
        return DataAccess()
    dirs = [Path(d) for d in (listed or "").split(os.pathsep) if d.strip()]
    return DataAccess(True, (*dirs, upload_root()))


__all__ = ["DATA_DIRS_ENV", "DataAccess", "PathNotAllowedError", "data_access_from", "is_loopback", "is_within",
           "upload_root"]


def task_label(spec: str) -> str:
    """How a task is shown: an uploaded file by its own name, ``mine.csv (uploaded)``, never by the
    server's temp path; every other name as it is. (Links and bundles keep the full name.)"""
    if spec.startswith("file:") and is_within(spec[len("file:"):], [upload_root()]):
        return f"{Path(spec[len('file:'):]).name} (uploaded)"
    return spec


def hide_upload_paths(text: str) -> str:
    """``text`` (an error message) with every uploaded file's server path replaced by its own name
    ("file:/tmp/headprune-uploads/ab12…/mine.csv" -> "mine.csv (uploaded)")."""
    root = re.escape(str(upload_root()))
    text = re.sub(rf"(?:file:)?{root}/[0-9a-f]+/([^\s'\"`,;:)]+)", r"\1 (uploaded)", text)
    return re.sub(rf"{root}\S*", "(the upload folder)", text)
