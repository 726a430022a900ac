"""Cache manifests: the JSON file a cache writes last, so its presence means "complete"."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from .errors import CacheError


def read_manifest_file(path: Path, fmt: str, fix: str, require: Sequence[str] = ()) -> dict | None:
    """The manifest at ``path``; None when absent (not prepared, or a run was interrupted).

    Raises CacheError, ending with ``fix`` (what to run), when it is not JSON, not of format
    ``fmt``, or lacks a key in ``require``.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise CacheError(f"{path} is corrupt (not JSON). {fix}") from None
    if not isinstance(data, dict) or data.get("format") != fmt or any(k not in data for k in require):
        raise CacheError(f"{path} is not a {fmt} manifest. {fix}")
    return data
