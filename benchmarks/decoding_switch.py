"""One of the decoding's savings switched on and off: a click's time to BLEU/WER both ways in one run, on the page's
clicks (``dashboard_timings.kind_targets``: each click adds a head of the next attention kind to the last mask, from
the last layer up).

    .venv/bin/python benchmarks/decoding_switch.py --switch lookahead --model whisper-base --toggles 9
    .venv/bin/python benchmarks/decoding_switch.py --switch window --model bergamot-pt-en --toggles 6

Switches: ``lookahead`` (guessed tokens checked several in one decoder call; off: one token a step) and ``window`` (a
draft's positions scored a window at a time up to the row's first difference; off: all at once). Each arm has its own
layer-input cache and draft store, filled by the all-heads evaluation; both evaluate every mask, the order alternating.
Time: to the metric's partial result. Writes ``benchmarks/results/decoding_switch-SWITCH-MODEL.json``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # as dashboard.py sets it

import torch  # noqa: E402

import pruning_core.modeling.inference.drafts as drafts  # noqa: E402
import pruning_core.modeling.inference.lookahead as lookahead  # noqa: E402
from dashboard_timings import FIRST, kind_targets  # noqa: E402
from draft_decoding import _commit, _cpu_model, _load  # noqa: E402
from pruning_core.bench.budget import layer_cache_budget  # noqa: E402
from pruning_core.core.heads import HeadMask  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.modeling.inference.drafts import DraftStore  # noqa: E402
from pruning_core.modeling.inference.layer_cache import LayerInputCache  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

FORMAT = "headprune.decoding_switch/1"
# switch -> (module, setting, its value when off)
SWITCHES = {"lookahead": (lookahead, "MOST_ROWS", 0), "window": (drafts, "FIRST_WINDOW", 10 ** 9)}
TASKS = {"bergamot-en-pt": ("bible-en-pt", 128), "bergamot-pt-en": ("bible-pt-en", 128),
         "whisper-base": ("movie-speech", 8)}
BATCH = 64


def _evaluate(task, lm, data, mask, cache, store) -> dict:
    marks, cpu0, start = [], time.process_time(), time.perf_counter()

    def progress(event) -> None:
        if event.partial is not None:
            marks.append(time.perf_counter() - start)
    result = task.evaluate(lm, data, mask, batch_size=BATCH, layer_cache=cache, drafts=store, progress=progress)
    draft = result.extra.get("decoding", {}).get("draft", {})
    return {"to_metric_s": round(marks[0] if marks else time.perf_counter() - start, 4),
            "cpu_s": round(time.process_time() - cpu0, 4), "metric": result.metric,
            "steps": draft.get("steps"), "lookahead_calls": draft.get("lookahead"),
            "guessed_kept": draft.get("guessed")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--switch", choices=sorted(SWITCHES), default="lookahead")
    parser.add_argument("--model", choices=sorted(TASKS), default="whisper-base")
    parser.add_argument("--toggles", type=int, default=9)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    task_name, n = TASKS[args.model]
    lm, task = load_model(args.model), get_task(task_name)
    data = task.encode(lm, task.default_split, n)
    module, setting, off = SWITCHES[args.switch]
    on = getattr(module, setting)
    arms = {"off": (off, LayerInputCache(layer_cache_budget() // 2), DraftStore()),
            "on": (on, LayerInputCache(layer_cache_budget() // 2), DraftStore())}
    load_before = _load()
    with torch.inference_mode():
        for value, cache, store in arms.values():
            setattr(module, setting, value)
            task.evaluate(lm, data, None, batch_size=BATCH, layer_cache=cache, drafts=store)
        kinds = list(lm.layout.kinds)
        removed, clicks = [], []
        for i, (kind, layer, head) in enumerate(kind_targets([list(lm.layout.kinds[k]) for k in kinds], args.toggles,
                                                             FIRST)):
            removed.append((kinds[kind], layer, head))
            mask = HeadMask.from_removed(lm.layout, removed)
            click = {"kind": kinds[kind], "layer": layer, "head": head, "load_1min": _load()}
            for arm in (("off", "on") if i % 2 == 0 else ("on", "off")):
                value, cache, store = arms[arm]
                setattr(module, setting, value)
                click[arm] = _evaluate(task, lm, data, mask, cache, store)
            click["same_metric"] = click["on"]["metric"] == click["off"]["metric"]
            clicks.append(click)
            print(kinds[kind], layer, head, {a: click[a]["to_metric_s"] for a in ("off", "on")}, flush=True)
    setattr(module, setting, on)
    median = {arm: statistics.median(c[arm]["to_metric_s"] for c in clicks) for arm in ("off", "on")}
    total = {arm: round(sum(c[arm]["to_metric_s"] for c in clicks), 3) for arm in ("off", "on")}
    doc = {"format": FORMAT, "switch": args.switch, "setting": f"{module.__name__}.{setting}", "on": on, "off": off,
           "model": args.model, "task": task_name, "examples": n,
           "clicks": clicks, "median_off_s": round(median["off"], 3), "median_on_s": round(median["on"], 3),
           "total_off_s": total["off"], "total_on_s": total["on"],
           "all_same_metric": all(c["same_metric"] for c in clicks),
           "cpu": {"name": _cpu_model(), "cores": os.cpu_count()}, "torch_threads": torch.get_num_threads(),
           "load_before": load_before, "load_after": _load(), "commit": _commit(),
           "created": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())}
    out = args.out or ROOT / "benchmarks" / "results" / f"decoding_switch-{args.switch}-{args.model}.json"
    write_json(out, doc)
    print(f"median off {median['off']:.3f} s, on {median['on']:.3f} s; total {total}; wrote {out}")


if __name__ == "__main__":
    main()
