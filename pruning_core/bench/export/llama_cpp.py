"""llama.cpp itself, through its Python binding ``llama-cpp-python``: installed on request, never by a test.

PyPI ships ``llama-cpp-python`` as source only, so installing it compiles llama.cpp (:data:`BUILD_TIME`).
``headprune prepare --runtime llama-cpp`` does it once, into ``<headprune home>/llama-cpp-python`` (``pip
install --target``; built in a temporary folder and renamed when complete, so an interrupted build
leaves nothing half-installed). :func:`import_llama_cpp` finds the binding there or in the environment,
and otherwise says which command installs it.
"""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pruning_core.core.errors import HeadpruneError
from pruning_core.modeling.sources.catalog import headprune_home

VERSION = "0.3.36"                  # the llama-cpp-python release installed (its vendored llama.cpp)
# installed with it, without dependencies: its other requirements (numpy, typing-extensions, jinja2) are
# already in requirements.txt's environment; diskcache is imported by llama_cpp at import time
EXTRA = ("diskcache==5.6.3",)
BUILD_TIME = "about 6 minutes on two quiet cores, 25 under heavy load"
INSTALL_COMMAND = "headprune prepare --runtime llama-cpp"
# what llama.cpp's build does not need for loading and generating (examples, tests, server, tools)
CMAKE_ARGS = "-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF"


def install_folder() -> Path:
    return headprune_home() / "llama-cpp-python"


def import_llama_cpp():
    """The ``llama_cpp`` module, from the environment or :func:`install_folder`; HeadpruneError naming
    :data:`INSTALL_COMMAND` when neither has it."""
    try:
        return importlib.import_module("llama_cpp")
    except ImportError:
        pass
    folder = install_folder()
    if not (folder / "llama_cpp").is_dir():
        raise HeadpruneError(f"llama.cpp's Python binding (llama-cpp-python) is not installed; run "
                             f"`{INSTALL_COMMAND}` (it compiles llama.cpp: {BUILD_TIME}).")
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return importlib.import_module("llama_cpp")


def install(force: bool = False, timeout_s: float | None = None) -> str:
    """Compile and install llama-cpp-python :data:`VERSION` into :func:`install_folder`; returns a summary.

    Already there and not ``force``: nothing is done. The build runs in a temporary folder beside the
    target and is renamed into place only when pip succeeds; a failure raises with pip's last lines.
    """
    target = install_folder()
    if (target / "llama_cpp").is_dir() and not force:
        return f"llama-cpp-python is already installed in {target}"
    target.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".llama-cpp-python-", dir=target.parent))
    env = {**os.environ, "CMAKE_ARGS": f"{os.environ.get('CMAKE_ARGS', '')} {CMAKE_ARGS}".strip(),
           "CMAKE_BUILD_PARALLEL_LEVEL": os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))}
    started = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(build / "t"),
                               f"llama-cpp-python=={VERSION}", *EXTRA], capture_output=True, text=True, env=env,
                              timeout=timeout_s)
        if proc.returncode != 0:
            raise HeadpruneError(f"Installing llama-cpp-python failed (pip exited {proc.returncode}); it needs a C++ "
                                 f"compiler and cmake. pip said: {proc.stderr.strip()[-600:]}")
        if target.exists():
            shutil.rmtree(target)
        (build / "t").rename(target)
    except subprocess.TimeoutExpired:
        raise HeadpruneError(f"Compiling llama-cpp-python ran past {timeout_s:.0f} s; run `{INSTALL_COMMAND}` "
                             "again on a quieter machine.") from None
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return f"llama-cpp-python {VERSION} installed in {target} ({time.perf_counter() - started:.0f} s)"
