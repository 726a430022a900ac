"""Prefill time with half the key/value heads streaming against the full cache, in one run.

    .venv/bin/python benchmarks/kv_prefill.py                          # SmolLM2-135M's shape, random weights, 4,096 tokens
    .venv/bin/python benchmarks/kv_prefill.py --attn eager --repeats 3 --out benchmarks/results/kv_prefill-eager.json

One prefill = one forward pass over ``--context`` random token ids, batch 1, filling the cache (a ``DynamicCache`` for
the full cache, :func:`kv_cache.new_cache` under a policy), logits of the last position only (what generation
computes). Conditions, interleaved round by round so that load drifts hit all alike: ``full``; ``banded`` (the
policy, streaming heads over their sink and window keys, :mod:`pruning_core.modeling.kv.kv_banded`); ``masked`` (the
same policy as a mask over all keys); ``every`` (every head streaming, banded: the floor streaming can reach). The
policy streams a seeded random half of the key/value heads (S = 128, W = 256). The model is SmolLM2-135M's architecture with random weights (time depends on the shapes, not the
values). Writes medians, every time, the load average before and after each pass, threads and versions.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import transformers  # noqa: E402

from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.modeling.kv import kv_cache, kv_policy as kvp  # noqa: E402
from pruning_core.modeling.architectures import find_sites, layout_of  # noqa: E402
from pruning_core.modeling.sources.loading import LoadedModel  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
# SmolLM2-135M-Instruct's config.json (the fields that set the shapes)
SMOLLM2 = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
               num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192, rope_theta=100000.0,
               rms_norm_eps=1e-5, tie_word_embeddings=True)


def random_smollm2(attn: str) -> LoadedModel:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**SMOLLM2)
    model = transformers.LlamaForCausalLM._from_config(config, attn_implementation=attn).eval()
    sites = find_sites(model)
    return LoadedModel(model=model, tokenizer=None, model_id="smollm2-shape-random", source="memory",
                       task_type="language-modeling", arch="llama", weights_sha256="random-seed-0", sites=sites,
                       layout=layout_of(sites))


def prefill(lm: LoadedModel, ids: torch.Tensor, policy, banded: bool) -> float:
    cache = kv_cache.new_cache(lm, policy)
    start = time.perf_counter()
    with torch.no_grad(), kvp.applied(lm, policy, banded=banded):
        lm.model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-masked", action="store_true", help="skip the masked condition")
    ap.add_argument("--out", default=str(RESULTS / "kv_prefill.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    lm = random_smollm2(args.attn)
    policy = kvp.random_policy(kvp.kv_heads_of(lm), 0.5, 0, sink=128, window=256)
    ids = torch.randint(0, SMOLLM2["vocab_size"], (1, args.context), generator=torch.Generator().manual_seed(0))
    every = kvp.KVPolicy.all_streaming(kvp.kv_heads_of(lm), 128, 256)   # the floor: no head's attention is full
    conditions = {"full": (None, True), "banded": (policy, True), "every": (every, True)}
    if not args.no_masked:
        conditions["masked"] = (policy, False)
    prefill(lm, ids[:, :256], policy, True)                       # warm-up: allocator, kernels
    runs: dict[str, list[dict]] = {name: [] for name in conditions}
    began = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for r in range(args.repeats):
        for name, (pol, banded) in conditions.items():
            before = os.getloadavg()[0]
            seconds = prefill(lm, ids, pol, banded)
            runs[name].append({"seconds": round(seconds, 3), "load_before": round(before, 2),
                               "load_after": round(os.getloadavg()[0], 2)})
            print(f"round {r} {name:7s} {seconds:7.2f} s  (load {before:.2f})", flush=True)
    medians = {name: statistics.median(x["seconds"] for x in rows) for name, rows in runs.items()}
    memory = kvp.memory_report(policy, lm, args.context)
    result = {
        "format": "headprune.bench_kv_prefill/1",
        "what": "prefill seconds, one forward pass over the context filling the cache, batch 1, last logits only",
        "model": "SmolLM2-135M architecture, random weights (seed 0)", "context": args.context,
        "attn_implementation": args.attn, "threads": args.threads, "repeats": args.repeats,
        "policy": {"streaming_kv_heads": policy.n_streaming, "kv_heads": policy.n_heads, "sink": policy.sink,
                   "window": policy.window, "seed": 0, "block": kvp.kv_banded.BLOCK},
        "median_seconds": {k: round(v, 3) for k, v in medians.items()},
        "ratio_banded_to_full": round(medians["banded"] / medians["full"], 3),
        "ratio_every_to_full": round(medians["every"] / medians["full"], 3),
        **({"ratio_masked_to_full": round(medians["masked"] / medians["full"], 3)} if "masked" in medians else {}),
        "kv_bytes": memory["kv_bytes"], "full_kv_bytes": memory["full_kv_bytes"],
        "runs": runs,
        "provenance": {"started": began, "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       "cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
                       "torch": torch.__version__, "transformers": transformers.__version__,
                       "command": " ".join(["python", "benchmarks/kv_prefill.py", *sys.argv[1:]])},
    }
    write_json(Path(args.out), result)
    print(f"medians {result['median_seconds']}; banded / full = {result['ratio_banded_to_full']}; wrote {args.out}")


if __name__ == "__main__":
    main()
