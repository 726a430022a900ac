"""Checks of command-line option values, run before a command loads anything.

argparse converts an option's text; the checks here say whether the value can be used (``--batch-size 0``,
``--step 2`` or an ``--out`` inside a file are refused with a :class:`UsageError` naming the option, the value
and what to give instead; the CLI prints one line and exits 2). A parser declares a check with
:func:`checked`; the CLI calls :func:`run_checks` before the command runs. Output paths: a missing parent is
created on writing; a parent that is a file, or a folder nobody can create files in (tested by creating a
temporary file, which also works for root), is an error.
"""
from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pruning_core.core.errors import UsageError

CHECKS = "option_checks"          # the namespace attribute that lists a command's checks

Check = Callable[[str, Any], None]

# --dtype choices, spelled here so that parsing imports no torch; pruning_core.modeling.sources.loading.DTYPES is the
# same tuple (a test checks) and says what each means
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")


def checked(p: argparse.ArgumentParser, *flags: str, check: Check, **kwargs) -> argparse.Action:
    """``p.add_argument(*flags, **kwargs)``, with ``check(option, value)`` run on a value that is not None."""
    action = p.add_argument(*flags, **kwargs)
    p.set_defaults(**{CHECKS: [*(p.get_default(CHECKS) or []), (action.dest, action.option_strings[0], check)]})
    return action


def run_checks(args: argparse.Namespace) -> None:
    """Run every check the parsed command declared. Raises UsageError at the first bad value."""
    for dest, option, check in getattr(args, CHECKS, None) or []:
        value = getattr(args, dest, None)
        if value is not None:
            check(option, value)


# -- numbers ---------------------------------------------------------------------------------------

def positive_int(option: str, value: int) -> None:
    """A count that must be 1 or more (``--batch-size``, ``--limit``, ``--beams`` ...)."""
    if value < 1:
        raise UsageError(f"{option} must be a whole number of at least 1; got {value}.")


def positive_number(option: str, value: float) -> None:
    if not value > 0:
        raise UsageError(f"{option} must be a number above 0; got {value:g}.")


def fraction(option: str, value: float) -> None:
    """A share in (0, 1] (``--step``, ``--keep``)."""
    if not 0 < value <= 1:
        raise UsageError(f"{option} must be a fraction in (0, 1], e.g. 0.1 for 10 %; got {value:g}.")


def int_list(option: str, value: str) -> None:
    """Comma-separated whole numbers of at least 1, like ``1,8,32``."""
    parts = [s.strip() for s in value.split(",")]
    if not all(s.isdigit() and int(s) >= 1 for s in parts):
        raise UsageError(f"{option} must be whole numbers of at least 1 separated by commas, like 1,8,32; "
                         f"got {value!r}.")


# -- output paths ----------------------------------------------------------------------------------

def output_file(option: str, value: str) -> None:
    """A result file to (over)write: not a folder; its folder can be created and written to."""
    path = Path(value)
    if path.is_dir():
        raise UsageError(f"{option} {value!r} is a folder; give a file name, e.g. {str(path / 'result.json')!r}.")
    _check_creatable(option, value, path.parent)


def output_folder(option: str, value: str) -> None:
    """A folder to save a model to: new or empty, not a file, in a place that can be written to."""
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {value!r} is a file; a model is saved as a folder: give a new folder name.")
    if path.is_dir() and any(path.iterdir()):
        raise UsageError(f"Output folder {value!r} exists and is not empty; choose a new folder.")
    _check_creatable(option, value, path if path.is_dir() else path.parent)


def _check_creatable(option: str, value: str, folder: Path) -> None:
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option} {value!r} cannot be created: {str(existing)!r} is a file, not a folder. "
                         "Choose another path.")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".headprune-check.", dir=existing)
    except OSError as exc:
        raise UsageError(f"{option} {value!r} cannot be written: no file can be created in {str(existing)!r} "
                         f"({exc.strerror}). Choose a folder you can write to.") from None
    os.close(fd)
    os.unlink(tmp)


def write_output(option: str, path: str, data: dict) -> Path:
    """``results.write_json`` for a command's output option; a failed write is a UsageError, not a traceback."""
    from pruning_core.evaluation.results import write_json
    try:
        return write_json(path, data)
    except OSError as exc:
        raise UsageError(f"Could not write {option} {path!r}: {exc.strerror or exc}. "
                         "Choose a folder you can write to.") from None


# -- models across devices -------------------------------------------------------------------------

DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")


def parse_device_map(value: str) -> str | dict:
    """``--device-map``: a strategy name, a single device ('cpu', 'cuda:1'), or {module name: device}
    given as a JSON object or a ``.json`` file."""
    import json
    text = value.strip()
    if text in DEVICE_MAP_STRATEGIES or text == "cpu" or text.startswith("cuda"):
        return text
    if text.endswith(".json"):
        try:
            text = Path(text).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--device-map file {value!r} cannot be read ({exc.strerror}).") from None
    try:
        mapping = json.loads(text)
    except ValueError:
        mapping = None
    if not isinstance(mapping, dict) or not mapping:
        raise UsageError(f"--device-map must be one of {', '.join(DEVICE_MAP_STRATEGIES)}, a device such as cpu or "
                         f"cuda:0, or a JSON object {{module name: device}} (inline or a .json file); got {value!r}.")
    return mapping


def device_map(option: str, value: str) -> None:
    parse_device_map(value)
