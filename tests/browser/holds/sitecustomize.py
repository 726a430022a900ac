"""Imported at start by a dashboard server a browser test launches (its PYTHONPATH begins with this folder):
with ``HEADPRUNE_TEST_HOLDS`` naming a folder, the server holds the work a test armed there until the test
releases it, so a test can act while the server is mid-work instead of hoping to catch a passing state.

A test arms a hold by writing ``<what>.hold`` holding one mask's link text (``encode_mask``); ``what`` is one of
:data:`HOLDS`. When the server reaches that point for that mask it writes ``<what>.held`` (its record that it is
there) and waits, reporting progress as the real work does (so a click can still cancel it, and a timing lets
evaluations through the CPU queue), until the test deletes ``<what>.hold``. ``Holds`` in tests/browser_helpers.py is
the test's side. The app itself has no hook: the wrapped functions are replaced here, after their module loads.
"""
import functools
import importlib.abc
import importlib.util
import os
import sys
import time
from pathlib import Path

FOLDER = os.environ.get("HEADPRUNE_TEST_HOLDS")
STEP_S = 0.05


def _held(what: str, mask, progress, inside=None) -> None:
    """Wait here while ``<what>.hold`` names ``mask``; ``inside(progress)`` is called at every step."""
    from pruning_core.core.io.share_link import encode_mask
    from pruning_core.core.progress import report

    hold = Path(FOLDER) / f"{what}.hold"
    try:
        armed = hold.read_text(encoding="utf-8").strip()
    except OSError:
        return
    if mask is None or armed != encode_mask(mask):
        return
    (Path(FOLDER) / f"{what}.held").write_text(armed, encoding="utf-8")
    while hold.exists():
        report(progress, "queued", 0, None, f"held by the test ({what})")      # a cancel raises here
        if inside is not None:
            inside(progress)
        time.sleep(STEP_S)


def _evaluation(fn):
    """``app.model.cache.evaluate``: held before it starts ("evaluation"), or after it reported its metric and
    before its loss is computed ("loss")."""
    @functools.wraps(fn)
    def evaluate(sel, mask, _progress=None):
        _held("evaluation", mask, _progress)

        def progress(event):
            if _progress is not None:
                _progress(event)
            if event.partial is not None:
                _held("loss", mask, _progress)
        return fn(sel, mask, progress if _progress is not None else None)
    return evaluate


def _latency(fn):
    """``app.headmap.cache.latency``: held as a timing holds the CPU queue (non-urgent, letting evaluations
    through between its steps), then timed as usual."""
    @functools.wraps(fn)
    def latency(spec, mask, _progress=None):
        from app.runtime import board

        with board.GATE.hold(urgent=False, progress=_progress, what="latency"):
            _held("latency", mask, _progress, inside=lambda p: board.GATE.yield_to_urgent(p, "latency"))
        return fn(spec, mask, _progress)
    return latency


PATCHES = {"app.model.cache": ("evaluate", _evaluation), "app.headmap.cache": ("latency", _latency)}
HOLDS = ("evaluation", "loss", "latency")


class _Patcher(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Loads the modules of :data:`PATCHES` as usual, then wraps their function."""

    def find_spec(self, name, path, target=None):
        if name not in PATCHES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self._loaders = {**getattr(self, "_loaders", {}), name: spec.loader}
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loaders[spec.name].create_module(spec)

    def exec_module(self, module):
        self._loaders[module.__name__].exec_module(module)
        attr, wrap = PATCHES[module.__name__]
        setattr(module, attr, wrap(getattr(module, attr)))


if FOLDER:
    sys.meta_path.insert(0, _Patcher())
