"""Whisper-base encoder clicks against the work they cannot avoid, in one run.

    .venv/bin/python benchmarks/encoder_click_floor.py            # about 3 min on 2 quiet cores

A click that removes an encoder head changes every utterance's encoder from the clicked layer up, so its WER needs
at least those layers (from their cached input) and one teacher-forced decoder pass over the previous transcripts
(the all-heads ones: the draft the click checks). This times, for heads spread over the encoder's layers, the click
as the dashboard's server runs it (``Task.evaluate`` with a layer-input cache and a draft store, after the all-heads
evaluation) to its WER, and that floor (the median of ``--repeats`` timings, each the encoder's upper layers plus the
decoder pass, under the click's mask). Before its WER the click also runs the teacher-forced pass over the reference
transcripts (its output layer waits until after the WER, ``Task.metric_first``) and decodes again where the draft stops
matching; ``click_to_loss_seconds`` adds the loss. Writes ``benchmarks/results/encoder_click_floor.json``.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from pathlib import Path

import torch

from draft_decoding import BATCH, RESULTS, _batches, _commit, _cpu_model, _load, _timed
from pruning_core.bench.budget import layer_cache_budget
from pruning_core.core.heads import HeadMask
from pruning_core.core.io.storage import write_json
from pruning_core.modeling.inference.drafts import DraftStore
from pruning_core.modeling.inference.greedy import greedy_decode
from pruning_core.modeling.inference.layer_cache import LayerInputCache
from pruning_core.modeling.masking import apply_mask
from pruning_core.modeling.sources.loading import load_model
from pruning_core.tasks import get_task

FORMAT = "headprune.encoder_click_floor/1"
MODEL, TASK, EXAMPLES = "whisper-base", "movie-speech", 8
KIND = "encoder_self"


def _output(value):
    return value[0] if isinstance(value, tuple) else value


def layer_inputs(lm, features: torch.Tensor) -> list[torch.Tensor]:
    """The all-heads input of each encoder layer (what the layer-input cache holds for a click there), one pass."""
    seen: list[torch.Tensor] = []
    layers = lm.model.get_encoder().layers
    handles = [layer.register_forward_pre_hook(lambda m, args: seen.append(args[0])) for layer in layers]
    try:
        with torch.inference_mode():
            lm.model.get_encoder()(features)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def floor_once(lm, mask: HeadMask, layer: int, hidden: torch.Tensor, drafts: torch.Tensor) -> float:
    """Seconds for the encoder's layers from ``layer`` up on ``hidden`` and one teacher-forced decoder pass (with the
    vocabulary projection) over ``drafts``, under ``mask``."""
    encoder = lm.model.get_encoder()
    t = time.perf_counter()
    with torch.inference_mode(), apply_mask(lm, mask):
        h = hidden
        for block in encoder.layers[layer:]:
            h = _output(block(h, attention_mask=None))
        h = encoder.layer_norm(h)
        out = lm.model.get_decoder()(input_ids=drafts, encoder_hidden_states=h).last_hidden_state
        lm.model.proj_out(out)
    return time.perf_counter() - t


def draft_ids(lm, task, data) -> torch.Tensor:
    """The all-heads transcripts as the decoder reads them when it checks a draft: prompt and tokens, padded."""
    rows = []
    with torch.inference_mode():
        for args, kwargs in _batches(task, lm, data, None):
            prompt = list(kwargs["rules"].prompt)
            rows += [prompt + tokens for tokens in greedy_decode(lm.model, *args, **kwargs)]
    width = max(map(len, rows))
    pad = lm.model.config.pad_token_id or 0
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-layer", type=int, default=2, help="clicks per encoder layer")
    parser.add_argument("--repeats", type=int, default=3, help="timings of the floor per click (median)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "encoder_click_floor.json"))
    args = parser.parse_args()
    lm, task = load_model(MODEL), get_task(TASK)
    data = task.encode(lm, task.default_split, EXAMPLES)
    features = next(iter(data.batches(BATCH))).inputs["input_features"]
    drafts = draft_ids(lm, task, data)
    cache, store = LayerInputCache(layer_cache_budget()), DraftStore()
    load_start = _load()
    dense = _timed(task, lm, data, None, cache, store)           # a session's arrival: every cache filled
    rng = random.Random(args.seed)
    rows = []
    inputs = layer_inputs(lm, features)
    for layer, n in enumerate(lm.layout.kinds[KIND]):
        hidden = inputs[layer]
        for head in rng.sample(range(n), min(args.per_layer, n)):
            mask = HeadMask.from_removed(lm.layout, [(KIND, layer, head)])
            click = _timed(task, lm, data, mask, cache, store)
            floor = statistics.median(floor_once(lm, mask, layer, hidden, drafts) for _ in range(args.repeats))
            rows.append({"layer": layer, "head": head, "click_seconds": round(click["metric_seconds"], 3),
                         "click_to_loss_seconds": round(click["seconds"], 3),
                         "floor_seconds": round(floor, 3), "ratio": round(click["metric_seconds"] / floor, 2),
                         "wer": round(click["metric"], 4), "draft": click["draft"], "load_1min": _load()})
            print(f"L{layer} h{head}: click -> WER {click['metric_seconds']:.2f} s, floor {floor:.2f} s "
                  f"(x{click['metric_seconds'] / floor:.2f}), -> loss {click['seconds']:.2f} s", flush=True)
    median = {k: round(statistics.median(r[k] for r in rows), 3) for k in ("click_seconds", "floor_seconds", "ratio")}
    out = {"format": FORMAT, "model": MODEL, "task": TASK, "examples": data.n_examples, "kind": KIND,
           "what": "seconds of an encoder-head click to its WER as the server runs it (Task.evaluate with a "
                   "layer-input cache and drafts, after the all-heads evaluation; the WER is its progress's partial, "
                   "before the loss) beside the work it cannot avoid (the encoder's "
                   "layers from the clicked one up, from their cached input, plus one teacher-forced decoder pass "
                   "over the previous transcripts), both under the click's mask, in the same run",
           "aim_ratio": 1.3, "median": median, "all_heads_seconds": round(dense["seconds"], 3), "clicks": rows,
           "cpu": _cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(), "commit": _commit(),
           "load_start": load_start, "load_end": _load(), "repeats": args.repeats, "per_layer": args.per_layer,
           "command": "python benchmarks/encoder_click_floor.py", "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    write_json(Path(args.out), out)
    print(f"median click {median['click_seconds']} s, floor {median['floor_seconds']} s, "
          f"x{median['ratio']} (aim 1.3) -> {args.out}")


if __name__ == "__main__":
    main()
