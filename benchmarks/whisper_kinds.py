"""Michel et al. (2019) §5 on Whisper-base: which attention kind is most sensitive to pruning?

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/whisper_kinds.py      # about 20 min on 2 busy CPU cores

Needs ``headprune prepare --model whisper-base`` and espeak-ng (the movie-speech set is synthesized on
first use).

What it measures and writes, in full: benchmarks/README.md, ``whisper_kinds.py``.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from pruning_core.core.errors import HeadpruneError  # noqa: E402
from pruning_core.core.heads import HeadMask  # noqa: E402
from pruning_core.evaluation.metrics import get_metric  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.evaluation.results import provenance, write_json  # noqa: E402
from pruning_core.scoring import ScoreConfig, get_scorer  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "headprune.whisper_kinds/1"
KINDS = ("encoder_self", "decoder_self", "cross")


def _run(task, lm, data, mask, batch_size: int) -> dict:
    r = task.evaluate(lm, data, mask, batch_size=batch_size)
    return {"wer": r.metric, "interval": list(r.interval) if r.interval else None, "loss": r.loss,
            "bleu_transcript_vs_spoken_text": r.extra["bleu_transcript_vs_spoken_text"], "seconds": round(r.seconds, 1),
            "transcripts": list(r.per_example)}


def _curves(raw, ranking) -> dict:
    """Per kind: normalised I_h sorted ascending (the I_h curve), per-layer sums of raw I_h, and the raw total."""
    out = {}
    for kind in KINDS:
        out[kind] = {"sorted_normalised": sorted(v for row in ranking.kinds[kind] for v in row),
                     "raw_per_layer_sum": [sum(row) for row in raw.kinds[kind]],
                     "raw_total": sum(v for row in raw.kinds[kind] for v in row)}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-eval", type=int, default=10)
    p.add_argument("--n-score", type=int, default=8)
    p.add_argument("--fractions", default="0.1,0.25,0.5")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=64, help="longest reference + prompt; also caps decoding")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(RESULTS / "whisper_kinds.json"))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    fractions = [float(f) for f in args.fractions.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    start, load_before = time.perf_counter(), os.getloadavg()
    try:
        lm = load_model("whisper-base", attn_implementation="sdpa")
        task = get_task("movie-speech")
        eval_data = task.encode(lm, "test", args.n_eval, max_length=args.max_tokens)
        fixed = task.with_encoder_outputs(lm, eval_data, args.batch_size)
        t0 = time.perf_counter()
        scored = get_scorer("gradient").score(lm, task, ScoreConfig(split="validation", limit=args.n_score,
                                                                    batch_size=args.batch_size))
        score_seconds = time.perf_counter() - t0
        ranking = scored.ranking_scores
        baseline = _run(task, lm, eval_data, None, args.batch_size)
        print(f"baseline WER {baseline['wer']:.3f} {baseline['interval']}", file=sys.stderr, flush=True)
        runs = []
        for kind in KINDS:
            heads = [h for h in ranking.ranked(seed=0) if h[0] == kind]            # least important first
            data = eval_data if kind == "encoder_self" else fixed
            for fraction in fractions:
                n = round(fraction * len(heads))
                choices = [("importance", None, heads[:n])]
                choices += [("random", s, random.Random(s).sample(heads, n)) for s in seeds]
                for method, seed, removed in choices:
                    res = _run(task, lm, data, HeadMask.from_removed(lm.layout, removed), args.batch_size)
                    runs.append({"kind": kind, "fraction": fraction, "removed_heads": n, "method": method,
                                 "seed": seed, "removed": [list(h) for h in removed], **res})
                    print(f"{kind:13s} {fraction:4.2f} {method:10s} {seed!s:4s} WER {res['wer']:.3f} "
                          f"{res['interval']} ({res['seconds']} s)", file=sys.stderr, flush=True)
    except HeadpruneError as exc:
        print(f"whisper_kinds: error: {exc}", file=sys.stderr)
        return 2
    summary = _summary(baseline, runs, fractions)
    result = {"format": FORMAT, "baseline": baseline, "runs": runs,
              "importance_curves": _curves(scored.scores, ranking),
              "summary": summary,
              "sizes": {"eval_utterances": eval_data.n_examples, "eval_split": "test",
                        "eval_words": sum(len(r.split()) for r in eval_data.references),
                        "score_utterances": scored.provenance["n_examples"], "score_split": "validation",
                        "heads_per_kind": 48},
              "timings": {"total_seconds": round(time.perf_counter() - start, 1),
                          "score_seconds": round(score_seconds, 1), "threads": args.threads,
                          "load_before": load_before, "load_after": os.getloadavg()},
              "provenance": provenance(lm, task=task.name, split="test", n_examples=eval_data.n_examples,
                                       method="michel-kinds", settings={
                                           "fractions": fractions, "seeds": seeds, "batch_size": args.batch_size,
                                           "attention": "sdpa", "scorer": "gradient",
                                           "decoding": f"greedy, at most {args.max_tokens} tokens",
                                           "ranking": "per-layer l2-normalised I_h",
                                           "metric": "WER of lower-cased, punctuation-free transcripts"})}
    print(format_table(result))
    print(f"wrote {write_json(args.out, result)}")
    return 0


def _summary(baseline: dict, runs: list[dict], fractions: list[float]) -> dict:
    """Per kind and fraction: WER by importance, mean WER of the random seeds; the most sensitive kind."""
    table: dict = {}
    for kind in KINDS:
        for f in fractions:
            imp = [r for r in runs if r["kind"] == kind and r["fraction"] == f and r["method"] == "importance"]
            rnd = [r["wer"] for r in runs if r["kind"] == kind and r["fraction"] == f and r["method"] == "random"]
            table.setdefault(kind, {})[str(f)] = {"importance": imp[0]["wer"], "random_mean": sum(rnd) / len(rnd),
                                                  "random": rnd}
    wer = get_metric("wer")

    def mean_worsening(kind: str, key: str) -> float:
        return sum(wer.worsening(v[key], baseline["wer"]) for v in table[kind].values()) / len(fractions)

    by_importance = {k: mean_worsening(k, "importance") for k in KINDS}
    by_random = {k: mean_worsening(k, "random_mean") for k in KINDS}
    return {"wer": table, "mean_wer_increase_importance": by_importance, "mean_wer_increase_random": by_random,
            "most_sensitive_importance": max(by_importance, key=by_importance.get),
            "most_sensitive_random": max(by_random, key=by_random.get)}


def format_table(result: dict) -> str:
    s = result["summary"]
    lines = [f"baseline WER {100 * result['baseline']['wer']:.1f} % on {result['sizes']['eval_utterances']} utterances",
             f"{'kind':13s} {'removed':>8s} {'importance':>11s} {'random (3 seeds)':>24s}"]
    for kind, rows in s["wer"].items():
        for f, v in rows.items():
            rnd = ", ".join(f"{100 * x:.1f}" for x in v["random"])
            lines.append(f"{kind:13s} {100 * float(f):7.0f}% {100 * v['importance']:10.1f}% {rnd:>24s}")
    lines.append(f"most sensitive: {s['most_sensitive_importance']} (importance order), "
                 f"{s['most_sensitive_random']} (random)")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
