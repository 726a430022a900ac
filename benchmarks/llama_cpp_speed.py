"""llama.cpp tokens per second: SmolLM2 dense against SmolLM2 with 1 of its 3 key/value groups removed in
every layer (a stock shape, exported with ``headprune export --format gguf``), side by side.

    .venv/bin/headprune prepare --model smollm2
    .venv/bin/headprune prepare --runtime llama-cpp       # compiles llama.cpp (about 6 min on two quiet cores)
    .venv/bin/python benchmarks/llama_cpp_speed.py        # float16 and float32 GGUF, 2 threads

What it measures and writes, in full: benchmarks/README.md, ``llama_cpp_speed.py``.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.modeling.architectures import kv_groups_of  # noqa: E402
from pruning_core.bench import LatencyStats, flop_ceiling, interleaved_latencies, load_average  # noqa: E402
from pruning_core.bench.export import llama_cpp  # noqa: E402
from pruning_core.bench.export.to_gguf import export_gguf  # noqa: E402
from pruning_core.core.heads import HeadScores  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.modeling.presets import uniform_by_group  # noqa: E402
from pruning_core.modeling.pruning import parameter_count, prune_heads  # noqa: E402
from pruning_core.evaluation.results import provenance, write_json  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "headprune.llama_cpp_speed/1"
PREFILL_TOKENS, DECODE_PROMPT, DECODE_TOKENS = 128, 8, 32


def pruned_mask(loaded):
    rng = random.Random(0)
    scores = HeadScores.from_lists({k: [[rng.random() for _ in range(n)] for n in rows]
                                    for k, rows in loaded.layout.kinds.items()})
    return uniform_by_group(scores, kv_groups_of(loaded.sites), 1 / 3)


def gguf_pair(loaded, mask, work: Path, dtype: str) -> dict[str, Path]:
    pruned = loaded.derive(prune_heads(loaded.model, mask))
    work.mkdir(parents=True, exist_ok=True)
    return {"dense": export_gguf(loaded, work / f"dense-{dtype}.gguf", dtype=dtype).path,
            "pruned": export_gguf(pruned, work / f"pruned-{dtype}.gguf", dtype=dtype).path}


def time_pair(Llama, files: dict[str, Path], prompt: list[int], threads: int, repeats: int) -> dict:
    models = {name: Llama(model_path=str(path), n_ctx=256, n_threads=threads, n_threads_batch=threads,
                          n_batch=PREFILL_TOKENS, verbose=False) for name, path in files.items()}

    def prefill(llm):
        llm.reset()
        llm.eval(prompt[:PREFILL_TOKENS])

    def decode(llm):
        llm.reset()
        out = []
        for token in llm.generate(prompt[:DECODE_PROMPT], temp=0.0, top_k=1, top_p=1.0, repeat_penalty=1.0):
            out.append(token)
            if len(out) == DECODE_TOKENS:
                break
        return out

    result = {}
    for stage, fn, tokens in (("prefill", prefill, PREFILL_TOKENS), ("decode", decode, DECODE_TOKENS)):
        timed = interleaved_latencies({n: (lambda m=m: fn(m)) for n, m in models.items()}, warmup=1,
                                      repeats=repeats, min_seconds=0.0)
        t = timed.seconds
        d, p = LatencyStats.of(t["dense"]), LatencyStats.of(t["pruned"])
        paired = [a / b for a, b in zip(t["dense"], t["pruned"])]
        result[stage] = {"tokens": tokens, "dense": d.to_json(), "pruned": p.to_json(),
                         "dense_tokens_per_s": tokens / d.median, "pruned_tokens_per_s": tokens / p.median,
                         "speedup_of_medians": d.median / p.median, "speedup_paired_median": statistics.median(paired),
                         "speedup_paired_range": [min(paired), max(paired)], "rounds": timed.rounds,
                         "load_average": load_average()}
        print(f"  {stage:<8} dense {tokens / d.median:8.1f} tok/s  pruned {tokens / p.median:8.1f} tok/s  -> "
              f"{d.median / p.median:.3f}x (paired {statistics.median(paired):.3f}x; {timed.rounds} rounds, "
              f"load {os.getloadavg()[0]:.1f})", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtypes", default="float16,float32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7, help="timed rounds per measurement")
    ap.add_argument("--out", type=Path, default=RESULTS / "llama_cpp_speed.json")
    args = ap.parse_args(argv)
    Llama = llama_cpp.import_llama_cpp().Llama
    started, load_before = time.perf_counter(), load_average()
    loaded = load_model("smollm2", device="cpu", dtype="float32")
    mask = pruned_mask(loaded)
    text = " ".join(["The film opens on a quiet street where nothing happens for a long time."] * 20)
    prompt = loaded.tokenizer(text)["input_ids"]
    ceiling = flop_ceiling(loaded.config, mask, PREFILL_TOKENS)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="llama-cpp-speed-") as tmp:
        for dtype in args.dtypes.split(","):
            work = Path(tmp) / dtype
            files = gguf_pair(loaded, mask, work, dtype)
            print(f"{dtype}: dense {files['dense'].stat().st_size / 2**20:.1f} MiB, pruned "
                  f"{files['pruned'].stat().st_size / 2**20:.1f} MiB", flush=True)
            rows[dtype] = {"file_mib": {n: p.stat().st_size / 2**20 for n, p in files.items()},
                           **time_pair(Llama, files, prompt, args.threads, args.repeats)}
    pruned_params = parameter_count(prune_heads(loaded.model, mask))
    settings = {"threads": args.threads, "repeats": args.repeats, "prefill_tokens": PREFILL_TOKENS,
                "decode_prompt_tokens": DECODE_PROMPT, "decode_tokens": DECODE_TOKENS,
                "order": "dense and pruned interleaved per round, first rotating", "llama_cpp_python": llama_cpp.VERSION}
    out = {"format": FORMAT, "model": "smollm2",
           "mask": {"rule": "presets.uniform_by_group(seeded random scores, seed 0, fraction 1/3)",
                    "heads_kept": mask.n_kept, "heads_total": mask.n_total},
           "parameters": {"dense": parameter_count(loaded.model), "pruned": pruned_params},
           "ceiling": {"speedup": ceiling.speedup, "seq_len": PREFILL_TOKENS}, "dtypes": rows,
           "seconds": time.perf_counter() - started,
           "machine": {"cpus": os.cpu_count(), "load_before": load_before, "load_after": load_average()},
           "provenance": provenance(loaded, method="llama_cpp_speed", settings=settings, device="cpu")}
    path = write_json(args.out, out)
    print(f"wrote {path} in {out['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
