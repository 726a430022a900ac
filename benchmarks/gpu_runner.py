"""The runner of ``benchmarks/gpu_suite.py``: its sizes, the context every section gets (device, deadline,
models, data), and the loop that runs the sections one by one and records each, whatever happens.

The GPU run is one-shot: a section that raises is recorded (type, message, traceback) and the next
one runs; past the global deadline a section stops where it is (``partial``) and the rest are
``skipped``; the caller rewrites the JSON after every section, so a run killed from outside keeps
what it measured.
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import platform
import resource
import subprocess
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

import gpu_models as gm

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Sizes:
    """How much each section measures (the full GPU run; :data:`QUICK` for the CPU test)."""

    seq: int = 128                         # tokens per example for scoring, precision, evaluation
    score_examples: int = 128
    score_batch: int = 32
    score_repeats: int = 3                 # timed passes per method and dtype (after one warm-up)
    batch_sizes: tuple[int, ...] = (1, 8, 32, 128)
    seq_lens: tuple[int, ...] = (128, 512)
    warmup: int = 2
    repeats: int = 10                      # timed rounds per latency point, at least ...
    min_seconds: float = 0.5               # ... and at least this many timed seconds (both variants)
    eval_examples: int = 128
    eval_batch: int = 64                   # app.model.cache.EVAL_BATCH
    eval_repeats: int = 5
    precision_examples: int = 64
    precision_batch: int = 8
    cli_examples: int = 64


QUICK = Sizes(seq=16, score_examples=8, score_batch=4, score_repeats=1, batch_sizes=(1, 2), seq_lens=(16, 32),
              warmup=1, repeats=2, min_seconds=0.0, eval_examples=8, eval_batch=4, eval_repeats=2,
              precision_examples=8, precision_batch=2, cli_examples=6)


class DeadlineReached(Exception):
    """The global deadline passed: the section stops; what it measured so far is kept."""


@dataclass
class Context:
    device: torch.device
    quick: bool
    sizes: Sizes
    deadline_at: float                     # time.perf_counter() value
    work: Path                             # temp folder: tokenizer, data files, saved models
    vocab: int | None = None               # --llama-vocab
    tokenizer: object = None
    measured_bf16: float | None = None     # FLOP/s of the matmul probe
    failures: list[str] = field(default_factory=list)      # the running section's isolated errors
    _saved: dict = field(default_factory=dict)

    def left(self) -> float:
        return self.deadline_at - time.perf_counter()

    def check(self, what: str) -> None:
        if self.left() <= 0:
            raise DeadlineReached(f"global deadline reached before {what}")

    @contextlib.contextmanager
    def isolated(self, row: dict, what: str) -> Iterator[None]:
        """Run one model's (or one point's) measurement: an error is recorded in ``row`` and in the
        section's failures, and the section goes on with the next; the deadline still stops it."""
        try:
            yield
        except DeadlineReached:
            raise
        except Exception as exc:        # noqa: BLE001 -- one-shot run: keep the other models' figures
            row["error"] = _error(exc)
            self.failures.append(f"{what}: {type(exc).__name__}: {str(exc)[:300]}")
            print(f"  {what} failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)

    def each(self, models: dict, names, what: str, measure: Callable[[str, dict], None]) -> None:
        """``measure(name, row)`` for each model name, each :meth:`isolated` and freed after; ``models[name] = row``."""
        for name in names:
            self.check(f"{what} {name}")
            row = models[name] = {}
            with self.isolated(row, f"{what} {name}"):
                measure(name, row)
            free()

    def model(self, name: str, dtype: torch.dtype, attn: str = "eager", device: torch.device | None = None):
        return gm.build(gm.SHAPES[name], self.tokenizer, device or self.device, dtype, quick=self.quick, attn=attn,
                        vocab=self.vocab)

    def files(self, n: int, tokens: int) -> dict[str, Path]:
        return gm.write_data(self.work / "data", n, tokens)

    def saved(self, name: str) -> Path:
        """A float32 copy of ``name`` saved as a Hugging Face folder (for load_model and the CLI)."""
        if name not in self._saved:
            loaded = self.model(name, torch.float32, device=torch.device("cpu"))
            folder = self.work / f"saved-{name}"
            loaded.model.save_pretrained(folder)
            self.tokenizer.save_pretrained(folder)
            self._saved[name] = folder
        return self._saved[name]

    @property
    def device_name(self) -> str | None:
        return torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else None

    @property
    def fast_dtype(self) -> torch.dtype:
        """bfloat16 on CUDA (what a GPU user runs), float32 on CPU (headprune refuses half there)."""
        return torch.bfloat16 if self.device.type == "cuda" else torch.float32


def _error(exc: BaseException) -> dict:
    """An exception as JSON: type, message, the end of its traceback (call inside ``except``)."""
    return {"type": type(exc).__name__, "message": str(exc)[:4000], "traceback": traceback.format_exc()[-4000:]}


def free() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _peak_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024       # Linux: KiB


def run_sections(sections: dict[str, Callable[[Context, dict], None]], ctx: Context, results: dict,
                 write: Callable[[], None]) -> None:
    """Run each section in order, recording its status, seconds, peak memory and data in ``results``.

    An exception is recorded (type, message, traceback) and the next section runs; a section whose
    :meth:`Context.isolated` blocks failed ends as ``error`` with their ``failures``; past the deadline
    the remaining sections are skipped with the reason. ``write()`` after every section.
    """
    for name, fn in sections.items():
        entry: dict = {"status": "skipped"}
        results[name] = entry
        if ctx.left() <= 0:
            entry["reason"] = "global deadline reached before this section started"
            write()
            continue
        if ctx.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(ctx.device)
        data: dict = {}
        ctx.failures = []
        start = time.perf_counter()
        print(f"[{name}] start ({ctx.left():.0f} s left)", flush=True)
        try:
            fn(ctx, data)
            entry["status"] = "error" if ctx.failures else "ok"
        except DeadlineReached as exc:
            entry.update(status="partial", reason=str(exc))
        except Exception as exc:        # noqa: BLE001 -- one-shot run: record and go on
            entry.update(status="error", error=_error(exc))
        if ctx.failures:
            entry["failures"] = list(ctx.failures)
        entry["seconds"] = time.perf_counter() - start
        entry["peak_memory_bytes"] = _peak_memory(ctx.device)
        entry.update(data)
        print(f"[{name}] {entry['status']} in {entry['seconds']:.1f} s"
              + (f": {entry['error']['type']}: {entry['error']['message'][:300]}" if "error" in entry else ""),
              flush=True)
        free()
        write()


def environment(device: torch.device) -> dict:
    import transformers

    env = {"device": str(device), "name": None, "torch": torch.__version__, "cuda": torch.version.cuda,
           "transformers": transformers.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
           "torch_threads": torch.get_num_threads()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(name=props.name, capability=f"{props.major}.{props.minor}", total_memory_bytes=props.total_memory,
                   multiprocessors=props.multi_processor_count, cudnn=torch.backends.cudnn.version())
        try:
            env["nccl"] = str(torch.cuda.nccl.version())
        except Exception as exc:        # noqa: BLE001 -- a build without NCCL: say so, measure the rest
            env["nccl"] = f"unavailable: {exc}"
    return env


def code_identity() -> dict:
    """The git commit when the tree has one, and a hash of the library and suite sources either way."""
    h = hashlib.sha256()
    for p in sorted([*ROOT.glob("pruning_core/**/*.py"), *ROOT.glob("benchmarks/gpu_*.py")]):
        h.update(p.relative_to(ROOT).as_posix().encode())
        h.update(p.read_bytes())
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"git_commit": commit, "sources_sha256": h.hexdigest()}
