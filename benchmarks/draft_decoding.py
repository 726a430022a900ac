"""Draft-checked greedy decoding against plain greedy: a click's time to BLEU/WER both ways in one run, and the
exactness sweep (every single-head removal and random masks: the tokens of both compared).

    .venv/bin/python benchmarks/draft_decoding.py                     # every prepared model of MODELS
    .venv/bin/python benchmarks/draft_decoding.py --models bergamot-en-pt --sweep-examples 16

A click is ``Task.evaluate`` as the dashboard runs it (a layer-input cache per way, the batch size of the page):
one head removed from all, after the all-heads evaluation (a session's arrival), plain and draft-checked in turn
(the order alternating), on the same machine in the same minutes. The draft store holds the all-heads output (and
the earlier clicks', the nearest mask's output is the draft). Times: wall seconds and this process's CPU seconds
(less sensitive to other processes' load); ratios of medians. Writes ``benchmarks/results/draft_decoding.json``.
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # as dashboard.py sets it

import torch  # noqa: E402

from pruning_core.bench.budget import layer_cache_budget  # noqa: E402
from pruning_core.core.heads import HeadMask  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.modeling.sources import catalog  # noqa: E402
from pruning_core.modeling.inference.drafts import DraftStore  # noqa: E402
from pruning_core.modeling.inference.drafts import NEAR_TIE, DraftStats, draft_greedy_decode  # noqa: E402
from pruning_core.modeling.inference.greedy import Choice, greedy_decode, translation_rules  # noqa: E402
from pruning_core.modeling.inference.layer_cache import LayerInputCache  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.modeling.masking import apply_mask  # noqa: E402
from pruning_core.tasks import get_task, speech, translation  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "headprune.draft_decoding/1"
# model -> (task, examples, the kinds a click removes a head of)
MODELS = {"bergamot-en-pt": ("bible-en-pt", 128, ("encoder_self", "cross")),
          "bergamot-pt-en": ("bible-pt-en", 128, ("encoder_self", "cross")),
          "whisper-base": ("movie-speech", 8, ("decoder_self", "cross"))}
BATCH = 64


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _timed(task, lm, data, mask, cache: LayerInputCache, store: DraftStore | None) -> dict:
    """One evaluation: its seconds in all, to its metric (progress's ``partial``, before the loss), CPU seconds."""
    t, cpu, metric_at = time.perf_counter(), time.process_time(), []
    r = task.evaluate(lm, data, mask, batch_size=BATCH, layer_cache=cache, drafts=store,
                      progress=lambda e: metric_at.append(time.perf_counter() - t) if e.partial is not None else None)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "metric_seconds": metric_at[0] if metric_at else seconds,
            "cpu_seconds": time.process_time() - cpu, "metric": r.metric,
            "predictions": r.predictions, "draft": r.extra.get("decoding", {}).get("draft")}


def clicks(task, lm, data, kinds: tuple[str, ...], per_layer: int, seed: int) -> dict:
    """Single-head clicks spread over every layer of ``kinds``: each timed plain and draft-checked."""
    rng = random.Random(seed)
    heads = [(k, layer, h) for k in kinds for layer, n in enumerate(lm.layout.kinds[k])
             for h in rng.sample(range(n), min(per_layer, n))]
    caches = {way: LayerInputCache(layer_cache_budget()) for way in ("plain", "draft")}
    store = DraftStore()
    dense = {way: _timed(task, lm, data, None, caches[way], store if way == "draft" else None)
             for way in ("plain", "draft")}
    rows = []
    for i, head in enumerate(heads):
        mask = HeadMask.from_removed(lm.layout, [head])
        order = ("plain", "draft") if i % 2 == 0 else ("draft", "plain")
        got = {way: _timed(task, lm, data, mask, caches[way], store if way == "draft" else None) for way in order}
        same = got["plain"]["predictions"] == got["draft"]["predictions"] and \
            got["plain"]["metric"] == got["draft"]["metric"]
        rows.append({"removed": list(head), "metric": round(got["plain"]["metric"], 4), "same": same,
                     **{f"{way}_{k}": round(got[way][k], 3) for way in got for k in ("seconds", "cpu_seconds")},
                     "draft": got["draft"]["draft"], "load_1min": _load()})
    med = {f"median_{way}_{k}": round(statistics.median(r[f"{way}_{k}"] for r in rows), 3)
           for way in ("plain", "draft") for k in ("seconds", "cpu_seconds")}
    ratio = {f"ratio_{k}": round(med[f"median_plain_{k}"] / med[f"median_draft_{k}"], 2)
             for k in ("seconds", "cpu_seconds")}
    stats = sum((DraftStats(**r["draft"]) for r in rows if r["draft"]), DraftStats())
    return {"n_clicks": len(rows), **med, **ratio, "all_same": all(r["same"] for r in rows),
            "near_ties": stats.near_ties, "draft_totals": stats.__dict__,
            "all_heads_seconds": {way: round(d["seconds"], 3) for way, d in dense.items()}, "clicks": rows}


def _batches(task, lm, data, mask) -> list[tuple[tuple, dict]]:
    """Per batch of ``data``, greedy decoding's arguments under ``mask`` as ``predict_batch`` gives them."""
    out = []
    with torch.inference_mode(), apply_mask(lm, mask):
        for batch in data.batches(BATCH):
            inputs = batch.inputs
            if task.task_type == "asr":
                kwargs = task.generate_kwargs(lm, data, 1)
                seconds = torch.tensor([data.features[j]["seconds"] for j in batch.index.tolist()])
                encoded = lm.model.get_encoder()(inputs["input_features"]).last_hidden_state
                out.append(((None, None), dict(rules=speech.greedy_rules(lm.model, task.language),
                                               max_new_tokens=speech.BOUND.tokens(seconds, kwargs["max_new_tokens"]),
                                               encoder_hidden=encoded)))
                continue
            most = min(data.max_length, getattr(lm.model.config, "max_position_embeddings", 1 << 20) - 1)
            shortlist = task.shortlist_of(lm, {"beams": 1})
            allowed = None if shortlist is None else shortlist.allowed(
                inputs["input_ids"], inputs["attention_mask"], lm.model.config.vocab_size)
            encoded = lm.model.get_encoder()(input_ids=inputs["input_ids"],
                                             attention_mask=inputs["attention_mask"]).last_hidden_state
            out.append(((inputs["input_ids"], inputs["attention_mask"]),
                        dict(max_new_tokens=translation.BOUND.tokens(inputs["attention_mask"].sum(1), most),
                             allowed=allowed, encoder_hidden=encoded)))
    return out


def _row(lm, args: tuple, kwargs: dict, r: int) -> tuple[tuple, dict]:
    """Greedy decoding's arguments for row ``r`` of a batch alone (its shortlist computed for it alone)."""
    ids, attn = args
    one = (None if ids is None else ids[r:r + 1], None if attn is None else attn[r:r + 1])
    kw = {**kwargs, "encoder_hidden": kwargs["encoder_hidden"][r:r + 1]}
    if torch.is_tensor(kwargs["max_new_tokens"]):
        kw["max_new_tokens"] = kwargs["max_new_tokens"][r:r + 1]
    if kwargs.get("allowed") is not None:
        kw["allowed"] = lm.shortlist.allowed(*one, lm.model.config.vocab_size)
    return one, kw


def explain(lm, args: tuple, kwargs: dict, r: int, plain: list[int], got: list[int]) -> dict:
    """Where row ``r``'s draft-checked tokens leave plain greedy's: the position, the gap between the two best logits
    there (the row alone, teacher-forced), and whose tokens plain greedy gives when it decodes the row alone."""
    i = next((j for j, (x, y) in enumerate(zip(plain, got)) if x != y), min(len(plain), len(got)))
    (ids, attn), kw = _row(lm, args, kwargs, r)
    rules = kw.get("rules") or translation_rules(lm.model)
    choice = Choice(lm.model, rules, kw.get("allowed"), kw["encoder_hidden"])
    fed = torch.tensor([list(rules.prompt) + plain[:i]])
    masked = {} if attn is None else {"encoder_attention_mask": attn}
    hidden = lm.model.get_decoder()(input_ids=fed, encoder_hidden_states=kw["encoder_hidden"], **masked).last_hidden_state
    top = choice.logits(hidden[:, -1], torch.tensor([0]), i == 0).float()[0].topk(2).values
    alone = greedy_decode(lm.model, ids, attn, **kw)[0]
    return {"position": i, "gap": float(top[0] - top[1]), "alone_is_draft": alone == got, "alone_is_plain": alone == plain}


def sweep(task, lm, data, n_random: int, seed: int) -> dict:
    """Every single-head removal and ``n_random`` random masks (1 to half the heads removed): plain greedy's tokens
    against the draft-checked ones (drafts: the all-heads output). A row that differs is explained (:func:`explain`)."""
    heads = list(lm.layout.heads())
    rng = random.Random(seed)
    masks = [[h] for h in heads] + [rng.sample(heads, rng.randint(1, len(heads) // 2)) for _ in range(n_random)]
    with torch.inference_mode():
        dense = [greedy_decode(lm.model, *a, **k) for a, k in _batches(task, lm, data, None)]
    equal, stats, differ, t = 0, DraftStats(), [], time.perf_counter()
    for m, removed in enumerate(masks):
        mask = HeadMask.from_removed(lm.layout, removed)
        args = _batches(task, lm, data, mask)
        same = True
        with torch.inference_mode(), apply_mask(lm, mask):
            for b, ((a, k), draft) in enumerate(zip(args, dense)):
                plain = greedy_decode(lm.model, *a, **k)
                got, s = draft_greedy_decode(lm.model, *a, drafts=draft, **k)
                same &= got == plain
                stats = stats + s
                differ += [{"mask": m, "heads_removed": len(removed), "example": b * BATCH + r,
                            **explain(lm, a, k, r, p, g)} for r, (p, g) in enumerate(zip(plain, got)) if p != g]
        equal += same
    batch_ties = {d["mask"] for d in differ if d["alone_is_draft"] and d["gap"] < NEAR_TIE}
    other = {d["mask"] for d in differ} - batch_ties
    return {"masks": len(masks), "single_head": len(heads), "random": n_random, "examples": data.n_examples,
            "equal": equal, "differ_only_at_batch_ties": len(batch_ties), "differ_otherwise": len(other),
            "differences": differ, "near_ties": stats.near_ties, "draft_totals": stats.__dict__,
            "seconds": round(time.perf_counter() - t, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=[m for m in MODELS if m in catalog.prepared_names()])
    parser.add_argument("--per-layer", type=int, default=1, help="clicks per layer and kind")
    parser.add_argument("--sweep-examples", type=int, default=None, help="examples of the sweep (default: all)")
    parser.add_argument("--random-masks", type=int, default=50)
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--no-clicks", action="store_true", help="the exactness sweep only (no timing: any load)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "draft_decoding.json"))
    args = parser.parse_args()
    result = {"format": FORMAT, "cpu": _cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
              "torch": torch.__version__, "commit": _commit(), "load_start": _load(), "batch_size": BATCH,
              "near_tie_tolerance": __import__("pruning_core.modeling.inference.drafts", fromlist=["NEAR_TIE"]).NEAR_TIE,
              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "models": {}}
    for name in args.models:
        task_name, n, kinds = MODELS[name]
        lm = load_model(name)
        task = get_task(task_name)
        data = task.encode(lm, task.default_split, n)
        entry = {"task": task_name, "split": task.default_split, "examples": data.n_examples, "kinds": list(kinds)}
        if not args.no_clicks:
            c = entry["clicks"] = clicks(task, lm, data, kinds, args.per_layer, args.seed)
            print(f"{name}: {c['n_clicks']} clicks, click -> {task.metric.name} median plain "
                  f"{c['median_plain_seconds']} s, draft-checked {c['median_draft_seconds']} s (x{c['ratio_seconds']} "
                  f"wall, x{c['ratio_cpu_seconds']} CPU), same results {c['all_same']}, near-ties {c['near_ties']}, "
                  f"load {_load()}", flush=True)
        if not args.no_sweep:
            small = task.encode(lm, task.default_split, args.sweep_examples or n)
            entry["sweep"] = sweep(task, lm, small, args.random_masks, args.seed)
            s = entry["sweep"]
            print(f"  sweep: {s['equal']}/{s['masks']} masks give plain greedy's tokens on {s['examples']} examples "
                  f"({s['differ_only_at_batch_ties']} differ only at a float-level tie that plain greedy decides the "
                  f"draft's way for the row alone, {s['differ_otherwise']} otherwise), near-ties {s['near_ties']} "
                  f"({s['seconds']} s)", flush=True)
        result["models"][name] = entry
        result["load_end"] = _load()
        write_json(Path(args.out), result)


if __name__ == "__main__":
    main()
