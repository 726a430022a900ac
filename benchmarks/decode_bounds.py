"""Check that greedy decoding's length bounds never cut a correct output on the prepared sets.

    .venv/bin/python benchmarks/decode_bounds.py                   # every prepared encoder-decoder
    .venv/bin/python benchmarks/decode_bounds.py --decode 128      # also decode the first 128 examples, all heads

What it measures and writes, in full: benchmarks/README.md, ``decode_bounds.py``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from pruning_core.modeling.sources import catalog  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.tasks import base, get_task, speech, translation  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
MODELS = ("bergamot-en-pt", "bergamot-pt-en", "whisper-base")


def bounds_of(task, lm, data) -> tuple[list[int], list[int]]:
    """Per example: its reference's tokens (with the end token) and its greedy bound, as ``predict_batch`` sets it."""
    if task.task_type == "asr":
        room = int(lm.model.config.max_target_positions) - len(data.specials["prompt"])
        most = max(1, min(data.max_length, room))
        seconds = torch.tensor([f["seconds"] for f in data.features])
        wanted = [sum(1 for t in f["labels"] if t != -100) for f in data.features]
        return wanted, speech.BOUND.tokens(seconds, most).tolist()
    most = min(data.max_length, getattr(lm.model.config, "max_position_embeddings", 1 << 20) - 1)
    sources = torch.tensor([len(f["input_ids"]) for f in data.features])
    wanted = [len(f["labels"]) for f in data.features]
    return wanted, translation.BOUND.tokens(sources, most).tolist()


def check_split(task, lm, split: str) -> dict:
    data = task.encode(lm, split)
    wanted, bounds = bounds_of(task, lm, data)
    over = [i for i, (w, b) in enumerate(zip(wanted, bounds)) if w > b]
    return {"examples": data.n_examples, "over": len(over), "over_examples": over[:10],
            "most": round(max(w / b for w, b in zip(wanted, bounds)), 3),
            "longest_reference": max(wanted), "smallest_bound": min(bounds)}


def check_decoded(task, lm, n: int) -> dict:
    """Decode the first ``n`` evaluation examples with every head, watching each row's tokens and bound."""
    data = task.encode(lm, task.default_split, n)
    module = base
    real, seen = module.greedy_decode, []

    def watched(*args, **kwargs):
        rows = real(*args, **kwargs)
        seen.extend(zip([len(r) for r in rows], kwargs["max_new_tokens"].tolist()))
        return rows

    module.greedy_decode = watched
    try:
        result = task.evaluate(lm, data, batch_size=64)
    finally:
        module.greedy_decode = real
    reached = [i for i, (k, b) in enumerate(seen) if k >= b]
    return {"examples": data.n_examples, "metric": result.metric, "decoding": result.extra.get("decoding"),
            "reached": len(reached), "most": round(max(k / b for k, b in seen), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=[m for m in MODELS if m in catalog.prepared_names()])
    parser.add_argument("--decode", type=int, default=0, help="also decode the first N examples with every head")
    args = parser.parse_args()
    out = {"format": "headprune.decode_bounds/1", "bounds": {"translation": translation.BOUND.describe(),
                                                             "asr": speech.BOUND.describe()}, "models": {}}
    for name in args.models:
        lm = load_model(name)
        task = get_task(catalog.get(name).task)
        found = {"task": task.name, "splits": {s: check_split(task, lm, s) for s in task.splits}}
        if args.decode:
            found["decoded"] = check_decoded(task, lm, args.decode)
        out["models"][name] = found
        for split, part in found["splits"].items():
            print(f"{name} {task.name} {split}: {part['examples']} references, {part['over']} over their bound, "
                  f"the longest {part['most']:.0%} of it")
        if "decoded" in found:
            part = found["decoded"]
            print(f"  decoded {part['examples']} with all heads: {part['reached']} reached their bound, the longest "
                  f"{part['most']:.0%} of it")
    out["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_json(RESULTS / "decode_bounds.json", out)


if __name__ == "__main__":
    main()
