"""Fine-tune a sequence classifier: a plain PyTorch AdamW loop.

Used by ``prepare`` and by the SMP comparison (physically pruned models), so it takes any ``nn.Module`` whose
forward accepts ``input_ids`` / ``attention_mask`` (and ``token_type_ids`` when its signature names it) and
returns ``.logits`` ``[B, num_labels]``; the cross-entropy is computed here. Batches are length-bucketed
within seeded shuffled chunks; the learning rate warms up linearly, then decays linearly to 0. Memory: on
CUDA the peak allocated tensors; on CPU the peak resident set size of the process, sampled in a background
thread, so ``memory_increase_bytes`` (peak minus the start) is what training added. None where /proc is missing.
"""
from __future__ import annotations

import math
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from pruning_core.core.errors import DataError, HeadpruneError
from pruning_core.core.io.codec import OMIT, JsonRecord
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.tasks import accepts_argument, collate_classification, tokenize_classification


@dataclass(frozen=True)
class FinetuneConfig(JsonRecord):
    """How to fine-tune. Defaults suit MiniLM-sized encoders on short texts."""

    epochs: int = 2                     # passes over the training examples
    lr: float = 5e-5                    # peak AdamW learning rate (2e-5..5e-5 is usual for BERTs)
    batch_size: int = 32
    max_length: int = 64                # tokens per example, longer ones truncated
    warmup_fraction: float = 0.06       # share of the steps with linearly rising learning rate
    weight_decay: float = 0.01          # AdamW decay, not applied to biases and LayerNorm weights
    max_grad_norm: float = 1.0          # gradient clipping; 0 = off
    seed: int = 0                       # shuffling and dropout
    device: str | None = "cpu"          # "cpu", "cuda", or None for CUDA when present
    max_steps: int | None = None        # stop after this many optimiser steps (overrides epochs)

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise HeadpruneError(f"epochs must be at least 1, got {self.epochs}.")
        if not 0 < self.lr < 1e-2:
            raise HeadpruneError(f"lr {self.lr} is outside (0, 0.01); fine-tuning uses about 2e-5..5e-5.")
        if self.batch_size < 1 or self.max_length < 2:
            raise HeadpruneError(f"batch_size ({self.batch_size}) must be >= 1 and max_length "
                                 f"({self.max_length}) >= 2.")
        if not 0 <= self.warmup_fraction < 1:
            raise HeadpruneError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction}.")
        if self.max_steps is not None and self.max_steps < 1:
            raise HeadpruneError(f"max_steps must be at least 1 (or None), got {self.max_steps}.")


@dataclass(frozen=True)
class FinetuneStats(JsonRecord):
    """What a fine-tuning run did and cost."""

    steps: int
    epochs: float                       # epochs completed (fractional when max_steps stopped early)
    n_examples: int
    final_train_loss: float             # mean loss over the last min(50, steps) steps
    first_train_loss: float             # mean loss over the first min(50, steps) steps
    seconds: float                      # wall time of the training loop (tokenisation included)
    cpu_seconds: float                  # CPU time of the process meanwhile, all threads (a second view of
                                        # the cost when other work shares the machine and inflates wall time)
    peak_memory_bytes: int | None       # see the module docstring for what is measured
    memory_increase_bytes: int | None
    memory_measure: str                 # "cuda_max_allocated" | "process_rss_peak" | "unavailable"
    device: str
    losses: tuple[float, ...] = field(repr=False, default=(), metadata=OMIT)   # loss of every step (not written)


# -- memory ----------------------------------------------------------------------------------------

def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class _PeakMemory:
    """Peak memory while the block runs (see the module docstring)."""

    def __init__(self, device: torch.device, interval_s: float = 0.02) -> None:
        self.device, self.interval = device, interval_s
        self.start: int | None = None
        self.peak: int | None = None
        self.measure = "unavailable"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "_PeakMemory":
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.start = self.peak = torch.cuda.memory_allocated(self.device)
            self.measure = "cuda_max_allocated"
        else:
            self.start = self.peak = _rss_bytes()
            if self.start is not None:
                self.measure = "process_rss_peak"
                self._thread = threading.Thread(target=self._sample, daemon=True)
                self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            rss = _rss_bytes()
            if rss is not None and rss > (self.peak or 0):
                self.peak = rss

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device)
        elif self._thread is not None:
            self._stop.set()
            self._thread.join()
            rss = _rss_bytes()
            if rss is not None and rss > (self.peak or 0):
                self.peak = rss

    @property
    def increase(self) -> int | None:
        return None if self.peak is None or self.start is None else self.peak - self.start


# -- batching and schedule -------------------------------------------------------------------------

def bucketed_batches(lengths: Sequence[int], batch_size: int, rng: random.Random,
                     chunk_batches: int = 50) -> list[list[int]]:
    """Shuffled, length-bucketed batches of example positions; every example exactly once."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches = []
    chunk = batch_size * chunk_batches
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=lambda i: lengths[i])
        batches.extend(part[j:j + batch_size] for j in range(0, len(part), batch_size))
    rng.shuffle(batches)
    return batches


def linear_schedule(step: int, total: int, warmup: int) -> float:
    """Learning-rate factor: 0 -> 1 over ``warmup`` steps, then 1 -> 0 at ``total``."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "LayerNorm" in name or "layer_norm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


# -- the loop --------------------------------------------------------------------------------------

def finetune_classifier(model: nn.Module, tokenizer, train_examples: Sequence[dict], config: FinetuneConfig,
                        progress: ProgressCallback | None = None,
                        on_step: Callable[[int, nn.Module], bool | None] | None = None) -> FinetuneStats:
    """Fine-tune ``model`` in place on ``train_examples`` and leave it in eval mode.

    Args:
        model: a sequence classifier (``outputs.logits`` ``[B, num_labels]``), e.g. any
            ``AutoModelForSequenceClassification`` model, physically pruned or not. Moved to
            ``config.device``.
        tokenizer: its tokenizer.
        train_examples: raw examples ``{"text", "label"}`` or ``{"text_a", "text_b", "label"}``.
        config: see :class:`FinetuneConfig`.
        progress: called after every step with stage ``"finetune"``; raise ``Cancelled`` to stop.
        on_step: ``on_step(step, model)`` is called once before the first update (step 0) and after
            every optimiser step (1, 2, ...), e.g. to measure the model during training. It may switch
            the model to eval mode (train mode is restored after it); returning True stops training
            there (the learning-rate schedule stays that of the whole run).
    """
    from pruning_core.modeling.sources.loading import resolve_device

    if not train_examples:
        raise DataError("No training examples: fine-tuning needs at least one.")
    num_labels = getattr(getattr(model, "config", None), "num_labels", None)
    labels = [ex.get("label") for ex in train_examples]
    if any(not isinstance(y, int) or y < 0 or (num_labels is not None and y >= num_labels) for y in labels):
        bad = next(y for y in labels if not isinstance(y, int) or y < 0 or (num_labels is not None and y >= num_labels))
        raise DataError(f"Training label {bad!r} is not a class id of this model (0..{(num_labels or 0) - 1}).")
    device = resolve_device(config.device)
    start_time, start_cpu = time.perf_counter(), time.process_time()
    features = tokenize_classification(tokenizer, train_examples, config.max_length,
                                       accepts_argument(model, "token_type_ids"))
    lengths = [len(f["input_ids"]) for f in features]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    steps_per_epoch = math.ceil(len(features) / config.batch_size)
    total_steps = config.max_steps or steps_per_epoch * config.epochs
    warmup = int(total_steps * config.warmup_fraction)

    model.to(device)
    optimizer = torch.optim.AdamW(_param_groups(model, config.weight_decay), lr=config.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: linear_schedule(s, total_steps, warmup))
    rng = random.Random(config.seed)
    losses: list[float] = []
    step = 0
    devices = [device.index or 0] if device.type == "cuda" else []
    model.train()

    def hook() -> bool:
        stop = on_step is not None and bool(on_step(step, model))
        model.train()
        return stop

    try:
        with torch.random.fork_rng(devices=devices), _PeakMemory(device) as memory:
            torch.manual_seed(config.seed)                   # dropout, without touching the caller's RNG
            stopped = hook()
            while step < total_steps and not stopped:
                for idx in bucketed_batches(lengths, config.batch_size, rng):
                    inputs = collate_classification([features[i] for i in idx], pad_id)
                    inputs = {k: v.to(device) for k, v in inputs.items()}
                    target = torch.tensor([labels[i] for i in idx], dtype=torch.long, device=device)
                    logits = model(**inputs).logits
                    loss = F.cross_entropy(logits.float(), target)
                    loss.backward()
                    if config.max_grad_norm:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                    losses.append(loss.detach().item())
                    step += 1
                    report(progress, "finetune", step, total_steps, f"loss {losses[-1]:.3f}")
                    stopped = hook()
                    if step >= total_steps or stopped:
                        break
    finally:
        model.eval()
        optimizer.zero_grad(set_to_none=True)
    window = max(1, min(50, len(losses)))
    return FinetuneStats(steps=step, epochs=step / steps_per_epoch, n_examples=len(features),
                         final_train_loss=sum(losses[-window:]) / window,
                         first_train_loss=sum(losses[:window]) / window,
                         seconds=time.perf_counter() - start_time, cpu_seconds=time.process_time() - start_cpu,
                         peak_memory_bytes=memory.peak,
                         memory_increase_bytes=memory.increase, memory_measure=memory.measure,
                         device=str(device), losses=tuple(losses))
