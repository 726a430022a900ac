"""The attention-sink ablation (StreamingLLM, Xiao et al. 2024, table 1): every key/value head streaming, the
window fixed, 0 / 1 / 4 / 128 sink tokens, beside the full cache; perplexity of ``bible-book-lm`` (Romans, about
12,000 tokens) in windows of ``--context`` tokens every half window.

    .venv/bin/python benchmarks/sink_ablation.py --models smollm2 qwen2.5-0.5b

One condition from the CLI: ``headprune kv-policy --all --model smollm2 --sink 4 --window 1000 --out p.json``, then
``headprune evaluate smollm2 --task bible-book-lm --context 2048 --kv-policy p.json``. Writes
``benchmarks/results/sink_ablation.json`` after every condition (a rerun skips what it has); benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.bench import load_average  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.evaluation.results import provenance, read_json  # noqa: E402
from pruning_core.modeling.kv import kv_policy as kvp  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "headprune.sink_ablation/1"
TASK = "bible-book-lm"
# StreamingLLM, table 1: Llama-2-7B, cache of 1,024 entries (sinks + recent window), perplexity on PG19 text
STREAMING_LLM = {"model": "Llama-2-7B", "sinks": [0, 1, 2, 4, 8],
                 "perplexity": [3359.95, 11.88, 10.51, 9.59, 9.54], "source": "Xiao et al. 2024, table 1"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["smollm2"])
    ap.add_argument("--sinks", nargs="+", type=int, default=[0, 1, 4, 128])
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--attention", default="sdpa", choices=("sdpa", "eager"),
                    help="attention implementation (the policy is exact under both; sdpa is faster)")
    ap.add_argument("--out", default=str(RESULTS / "sink_ablation.json"))
    args = ap.parse_args()
    out = Path(args.out)
    doc = read_json(out) if out.is_file() else {"format": FORMAT, "task": TASK, "runs": {}}
    if doc.get("format") != FORMAT:
        raise SystemExit(f"{out} is not a {FORMAT} file; give another --out")
    doc.update(streaming_llm=STREAMING_LLM, window=args.window, context=args.context,
               torch_threads=torch.get_num_threads(), cpus=os.cpu_count())
    task = get_task(TASK)
    for model in args.models:
        loaded = load_model(model, attn_implementation=args.attention)
        data = task.encode(loaded, "test", max_length=args.context)
        run = doc["runs"].setdefault(model, {"rows": {}})
        run.update(windows=data.n_examples, provenance=provenance(
            loaded, task=TASK, split="test", n_examples=data.n_examples, method="sink ablation",
            settings={"window": args.window, "context": args.context, "stride": data.specials["stride"],
                      "attention": args.attention}))
        kv_heads = kvp.kv_heads_of(loaded)
        conditions = {"full": None}
        for sink in args.sinks:
            conditions[f"sink-{sink}"] = kvp.KVPolicy.all_streaming(kv_heads, sink, args.window)
        for name, policy in conditions.items():
            if name in run["rows"]:
                print(f"{model} {name}: already measured, skipped", flush=True)
                continue
            t = time.perf_counter()
            with kvp.applied(loaded, policy):
                res = task.evaluate(loaded, data, batch_size=1)
            seconds = time.perf_counter() - t
            memory = kvp.memory_report(policy or kvp.KVPolicy.full(kv_heads), loaded, args.context)
            run["rows"][name] = {"sink": None if policy is None else policy.sink, "perplexity": res.metric,
                                 "interval_95": list(res.interval) if res.interval else None,
                                 "mean_token_loss": res.loss, "tokens": res.extra["tokens"],
                                 "kv_bytes": memory["kv_bytes"], "seconds": round(seconds, 1),
                                 "load_after": list(load_average())}
            print(f"{model} {name}: perplexity {res.metric:.2f} over {res.extra['tokens']} tokens, "
                  f"{seconds:.0f} s (load {run['rows'][name]['load_after']})", flush=True)
            write_json(out, doc)
    print(f"wrote {write_json(out, doc)}")


if __name__ == "__main__":
    main()
