"""The project's errors: each says what went wrong, with the offending value, and what to do.

All of them derive from :class:`HeadpruneError` (itself a ``ValueError``), so callers such as the
CLI and the dashboard can catch one type and show the message instead of a traceback.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable


class HeadpruneError(ValueError):
    """Base class of every error a user can cause and fix."""


class ModelLoadError(HeadpruneError):
    """A model could not be found or loaded (unknown id, missing files, unsafe weights)."""


class UnsupportedArchitectureError(HeadpruneError):
    """The model's architecture has no adapter in the architecture registry."""


class DataError(HeadpruneError):
    """A data set or data file is missing, malformed or unsuitable for the task."""


class FormatError(HeadpruneError):
    """A JSON file (mask, scores, results, pruner) has the wrong format, version or shape."""


class CacheError(HeadpruneError):
    """The headprune cache is missing, incomplete or corrupt."""


class UsageError(HeadpruneError):
    """A command-line option has a value the command cannot use (0 examples, an output path in a file)."""


class BudgetError(HeadpruneError):
    """A budget that cannot be met: a compression target out of reach, or work past the memory budget; the
    message gives what can be reached or what to change."""


class Cancelled(HeadpruneError):
    """Long work was cancelled through its progress callback."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """A ' Did you mean ...?' suffix for an unknown ``name``, or '' when nothing is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""
