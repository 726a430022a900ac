"""Behavioural checks with known answers (issue 19): do SmolLM2's detected role heads do what their role says?

    .venv/bin/python benchmarks/roles.py                  # ~5-10 min on 2 busy CPU cores
    .venv/bin/python benchmarks/roles.py --sequences 40 --needles 40

What it measures and writes, in full: benchmarks/README.md, ``roles.py``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.analysis.attention_maps import example_text  # noqa: E402
from pruning_core.bench import load_average  # noqa: E402
from pruning_core.core.heads import HeadMask  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.evaluation.results import provenance, write_json  # noqa: E402
from pruning_core.analysis.roles import (
    compute_roles,
    copy_losses,
    needle_accuracy,
    needle_prompts,
    random_heads,
)  # noqa: E402
from pruning_core.analysis.roles.checks import CHECK_SEED, CopyLosses  # noqa: E402
from pruning_core.analysis.roles.compute import DEFAULT_TASK  # noqa: E402
from pruning_core.evaluation.stats import bootstrap_interval, wilson_interval  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "headprune.roles_check/1"
KIND = "decoder_self"
HAYSTACK_TEXTS = 200         # train sentences the check's haystacks are cut from (detection: 24 validation ones)


def _heads(heads) -> list[list[int]]:
    return [[layer, head] for _, layer, head in heads]


def _copy_row(name: str, removed, losses: CopyLosses, dense: CopyLosses) -> dict:
    """One condition of the induction check: losses, the drop with its interval, the share of the drop it takes."""
    drops, base = losses.drops, dense.drops
    row = {"condition": name, "removed": _heads(removed), **losses.to_json(),
           "drop_interval": bootstrap_interval(lambda i: drops[i].mean(), len(drops))}
    if removed:
        row["drop_removed_share"] = 1 - losses.drop / dense.drop
        row["drop_removed_share_interval"] = bootstrap_interval(lambda i: 1 - drops[i].mean() / base[i].mean(),
                                                                len(drops))
    return row


def _needle_row(name: str, removed, loaded, prompts) -> dict:
    acc = needle_accuracy(loaded, prompts, HeadMask.from_removed(loaded.layout, removed) if removed else None)
    k = round(acc * len(prompts))
    return {"condition": name, "removed": _heads(removed), "accuracy": acc, "correct": k, "prompts": len(prompts),
            "wilson_95": wilson_interval(k, len(prompts))}


def _random_summary(rows: list[dict], key: str) -> dict:
    values = [r[key] for r in rows]
    return {"mean": float(np.mean(values)), "per_seed": values}


def _timed(label: str, fn, timings: dict):
    started = time.perf_counter()
    value = fn()
    timings[label] = {"seconds": round(time.perf_counter() - started, 1), "load_after": load_average()}
    print(f"{label}: {timings[label]['seconds']:.0f} s (load {timings[label]['load_after'][0]:.1f})", flush=True)
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--sequences", type=int, default=20, help="check inputs [BOS] + R + R (seed 1)")
    ap.add_argument("--needles", type=int, default=20, help="check needle prompts (seed 1)")
    ap.add_argument("--seeds", type=int, default=3, help="random-head draws per check")
    ap.add_argument("--out", type=Path, default=RESULTS / "roles.json")
    args = ap.parse_args(argv)
    import transformers
    transformers.logging.set_verbosity_error()
    started, load_before, timings = time.perf_counter(), load_average(), {}
    loaded = _timed("load", lambda: load_model(args.model, device="cpu", attn_implementation="eager"), timings)
    report = _timed("detect", lambda: compute_roles(loaded, roles=["induction", "retrieval"], seed=0), timings)
    induction, retrieval = report.heads("induction"), report.heads("retrieval")
    print(f"{loaded.model_id}: {loaded.layout.describe()}; {len(induction)} induction heads {_heads(induction)}, "
          f"{len(retrieval)} retrieval heads {_heads(retrieval)}", flush=True)

    def induction_rows() -> list[dict]:
        dense = copy_losses(loaded, None, sequences=args.sequences, seed=CHECK_SEED)
        rows = [_copy_row("all heads", [], dense, dense),
                _copy_row("induction heads removed", induction,
                          copy_losses(loaded, HeadMask.from_removed(loaded.layout, induction),
                                      sequences=args.sequences, seed=CHECK_SEED), dense)]
        for seed in range(args.seeds):
            heads = random_heads(loaded.layout, len(induction), exclude=induction, kinds=[KIND], seed=seed)
            rows.append({**_copy_row(f"random heads removed (seed {seed})", heads,
                                     copy_losses(loaded, HeadMask.from_removed(loaded.layout, heads),
                                                 sequences=args.sequences, seed=CHECK_SEED), dense), "seed": seed})
        return rows

    def retrieval_rows() -> tuple[list[dict], str]:
        task = get_task(DEFAULT_TASK)
        texts = [t for t in (example_text(e)[0].strip() for e in task.load("train", HAYSTACK_TEXTS)) if t]
        prompts = needle_prompts(loaded, texts, count=args.needles, haystack_tokens=256, seed=CHECK_SEED)
        rows = [_needle_row("all heads", [], loaded, prompts),
                _needle_row("retrieval heads removed", retrieval, loaded, prompts)]
        for seed in range(args.seeds):
            heads = random_heads(loaded.layout, len(retrieval), exclude=retrieval, kinds=[KIND], seed=seed)
            rows.append({**_needle_row(f"random heads removed (seed {seed})", heads, loaded, prompts), "seed": seed})
        probe = (f"{len(prompts)} needle prompts of {len(prompts[0].ids)} tokens, seed {CHECK_SEED} (numbers, haystack "
                 f"slices), needle depths (i + 0.5) / {len(prompts)}, haystack of the first {len(texts)} "
                 f"{task.name} train sentences (detection: 6 prompts, seed 0, validation sentences)")
        return rows, probe

    copy = _timed("induction check", induction_rows, timings)
    needle, needle_probe = _timed("retrieval check", retrieval_rows, timings)
    for r in copy:
        print(f"  {r['condition']:<32} first {r['mean_first']:6.2f}  second {r['mean_second']:6.2f}  drop "
              f"{r['mean_drop']:6.2f} {np.round(r['drop_interval'], 2)}"
              + (f"  share of drop removed {r['drop_removed_share']:.2f}" if "drop_removed_share" in r else ""))
    for r in needle:
        print(f"  {r['condition']:<32} needle accuracy {r['correct']}/{r['prompts']} {np.round(r['wilson_95'], 2)}")
    random_copy, random_needle = copy[2:], needle[2:]
    settings = {"detection_seed": 0, "check_seed": CHECK_SEED, "sequences": args.sequences, "needles": args.needles,
                "random_seeds": args.seeds, "attn_implementation": loaded.config._attn_implementation,
                "random_heads": "drawn uniformly without replacement among the decoder self-attention heads that "
                                "are not heads of the role checked (roles.random_heads, seeds 0..seeds-1)",
                "losses": "mean next-token cross-entropy (nats) over each copy's tokens 2..n (the first token of "
                          "either copy cannot be copied from anything)",
                "intervals": "95 %: percentile bootstrap over the check sequences (drops; paired for the share of "
                             "the drop removed), Wilson over the needle prompts"}
    out = {"format": FORMAT, "model": loaded.model_id, "layout": loaded.layout.to_json(),
           "detected": {"induction": _heads(induction), "retrieval": _heads(retrieval),
                        "thresholds": report.thresholds, "probes": {r: report.probes[r]["input"] for r in report.probes}},
           "induction": {"probe": f"{args.sequences} sequences [BOS] + R + R, R = {copy[0]['n']} uniform random "
                                  f"non-special token ids (seed {CHECK_SEED}; detection used seed 0)",
                         "rows": copy,
                         "random_mean": {"mean_second": _random_summary(random_copy, "mean_second"),
                                         "mean_drop": _random_summary(random_copy, "mean_drop"),
                                         "drop_removed_share": _random_summary(random_copy, "drop_removed_share")}},
           "retrieval": {"probe": needle_probe, "rows": needle,
                         "random_mean": {"accuracy": _random_summary(random_needle, "accuracy")}},
           "seconds": round(time.perf_counter() - started, 1), "timings": timings,
           "torch_threads": torch.get_num_threads(),
           "machine": {"cpus": os.cpu_count(), "load_before": load_before, "load_after": load_average(),
                       "note": "shared 2-core machine; other jobs ran meanwhile (see load averages)"},
           "provenance": provenance(loaded, task=DEFAULT_TASK, method="roles_check", settings=settings, device="cpu")}
    path = write_json(args.out, out)
    print(f"wrote {path} in {out['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
