"""What a piece of work costs a model, and what this machine can afford: scoring batches that fit a
memory budget, the layer-input cache's size, time estimates (the dashboard sizes its clicks from these:
:mod:`app.model.workload`).

Cost comes from the architecture (:func:`pruning_core.bench.flop_ceiling`'s multiply-add count of one
dense forward pass) and from how long an example is: text classifiers read their tokens, a language
model one window, a speech model all its audio frames plus the text it writes. Activation memory of a
gradient pass (:func:`example_cost`): per layer, the hidden states kept for the backward pass and the
attention probabilities and their gradients; the output logits 3 times over. float32.

The memory budget (:func:`memory_budget`) is half the machine's memory unless ``HEADPRUNE_MEMORY_BUDGET``
says otherwise: the one place the library reads the environment for it.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pruning_core.core.errors import BudgetError, HeadpruneError, ModelLoadError

MACS_PER_SECOND = 3e10         # dense float32 multiply-adds per second assumed for 2 quiet CPU cores (docs/FIGURES.md)
SPEECH_TEXT_TOKENS = 32        # text tokens of one utterance (a sentence), decoded or teacher-forced
BUDGET_ENV = "HEADPRUNE_MEMORY_BUDGET"
# Cached layer inputs (pruning_core.modeling.inference.layer_cache), for all sessions together: at most this, and at most
# LAYER_CACHE_SHARE of the memory budget; the default's whole evaluation holds a few MB per layer, so this keeps
# many evaluations, and Whisper-base's all-heads evaluation of 8 utterances (445 MiB with the cross-attention keys
# and values) beside what an encoder click adds (its new encoder inputs, keys and values) (docs/FIGURES.md).
LAYER_CACHE_MAX = 2**30
LAYER_CACHE_SHARE = 1 / 8
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


@dataclass(frozen=True)
class ExampleCost:
    """What one example costs ``model`` (dense, float32)."""

    macs: int                      # multiply-adds of one forward pass
    activation_bytes: int          # memory one example adds to a gradient (forward + backward) pass
    unit: str                      # what one example is: "example", "window", "utterance"
    tokens: int                    # encoder (or only) stack's positions per example
    decoder_tokens: int | None     # decoder positions (encoder-decoder models)

    def seconds(self, n: int, passes: int = 1, rate: float = MACS_PER_SECOND) -> float:
        """Estimated seconds for ``passes`` forward passes over ``n`` examples."""
        return passes * n * self.macs / rate


def example_cost(model_or_config, task_type: str, tokens: int = 128, decoder_tokens: int | None = None) -> ExampleCost:
    """The cost of one example of ``task_type`` for the model (a ``LoadedModel``, a model or a config).

    ``tokens``: text tokens per example (the mean of the real data when known, else the maximum
    length); a language model's example is a window of that many tokens; a speech model reads its
    fixed audio frames and writes :data:`SPEECH_TEXT_TOKENS` text tokens. ``decoder_tokens``: an
    encoder-decoder's target tokens when known (a translation's), else ``tokens``.
    """
    from pruning_core.modeling.architectures import adapter_for
    from pruning_core.bench import audio_frames, flop_ceiling

    config = getattr(model_or_config, "config", None) or getattr(getattr(model_or_config, "model", None),
                                                                    "config", None) or model_or_config
    dims = adapter_for(config).flop_dims(config)
    frames = audio_frames(config)
    enc = frames if frames is not None else max(1, int(tokens))
    text = tokens if decoder_tokens is None else decoder_tokens
    dec = (SPEECH_TEXT_TOKENS if frames is not None else max(1, int(text))) if dims.is_encoder_decoder else None
    macs = flop_ceiling(config, None, enc, decoder_len=dec).total_macs
    length = {"encoder": enc, "decoder": dec if dec is not None else enc}
    floats = 0
    for name, stack in dims.stacks.items():
        t = length[name]
        per_token = 16 * dims.hidden + 2 * stack.ffn_dim
        attention = 3 * stack.heads * t * t
        if name == "decoder" and dims.is_encoder_decoder:
            attention += 3 * stack.heads * t * enc              # cross-attention
        floats += stack.layers * (t * per_token + attention)
    out_tokens = length[dims.output_stack] if dims.head_kind == "lm_head" else 1
    floats += 3 * out_tokens * dims.head_size
    unit = "utterance" if frames is not None else "window" if task_type == "language_model" else "example"
    return ExampleCost(int(macs), 4 * floats, unit, enc, dec)


def layer_cache_bytes(cost: ExampleCost, hidden: int, n: int, layers: int, padding: float = 0.5) -> int:
    """Bytes of the cached inputs of ``layers`` layers of one evaluation of ``n`` examples (float32 hidden
    states of ``hidden`` values per position; positions padded by ``padding`` above the mean length)."""
    return int(layers * n * cost.tokens * (1 + padding) * hidden * 4)


def layer_cache_budget(environ: Mapping[str, str] = os.environ) -> int:
    """Bytes the shared layer-input cache may hold: :data:`LAYER_CACHE_MAX`, less on a machine whose memory
    budget (:func:`memory_budget`) is under 8 times that."""
    budget = memory_budget(environ)
    return LAYER_CACHE_MAX if budget is None else int(min(LAYER_CACHE_MAX, budget * LAYER_CACHE_SHARE))


def parse_bytes(text: str) -> int:
    """``"12GB"``, ``"8 GiB"``, ``"500000000"`` -> bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise HeadpruneError(f"{BUDGET_ENV}={text!r} is not a size: give bytes or a number with KB, MB, GB, "
                             "KiB, MiB or GiB, e.g. 8GiB.")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def machine_memory() -> int | None:
    """Physical memory of this machine in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def memory_budget(environ: Mapping[str, str] = os.environ) -> int | None:
    """The most memory this process may use: ``HEADPRUNE_MEMORY_BUDGET``, else half the machine's
    memory; None when neither is known."""
    if environ.get(BUDGET_ENV):
        return parse_bytes(environ[BUDGET_ENV])
    total = machine_memory()
    return None if total is None else total // 2


def available_memory() -> int | None:
    """Memory free now in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_weights_fit(folder: Path, spec: str, headroom: float) -> None:
    """Raise :class:`ModelLoadError` when the weight files in ``folder`` exceed ``headroom`` times the free
    memory (nothing when ``folder`` is not a local folder)."""
    if not folder.is_dir():
        return
    size = (sum(p.stat().st_size for p in folder.glob("*.safetensors"))
            or sum(p.stat().st_size for p in folder.glob("pytorch_model*.bin")))
    free = available_memory()
    if free is not None and size > headroom * free:
        raise ModelLoadError(f"Model {spec!r} has {size / 2**30:.1f} GiB of weights but only {free / 2**30:.1f} GiB "
                             "of memory is free. Choose a smaller model, or free memory and try again.")


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux ``/proc/self/statm``), or None."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def gradient_batch_size(cost: ExampleCost, wanted: int, budget: int | None = None,
                        in_use: int | None = None) -> int:
    """The largest batch (at most ``wanted``) whose gradient pass fits in what ``budget`` leaves
    after ``in_use`` bytes (default: the budget and this process's resident memory now).

    Raises:
        BudgetError: not even one example fits; the message says what to do.
    """
    budget = memory_budget() if budget is None else budget
    in_use = (resident_bytes() or 0) if in_use is None else in_use
    if budget is None:
        return wanted
    free = budget - in_use
    if free < cost.activation_bytes:
        raise BudgetError(
            f"Scoring needs about {cost.activation_bytes / 2**30:.1f} GiB for one {cost.unit} but only "
            f"{max(free, 0) / 2**30:.1f} GiB of the {budget / 2**30:.1f} GiB memory budget is left. Use shorter "
            f"inputs or a smaller model, close other work on this server, or raise {BUDGET_ENV} (e.g. 16GiB) "
            "if the machine has the memory.")
    return max(1, min(int(wanted), int(free // cost.activation_bytes)))
