"""The GPU figures in one run: scoring throughput, pruning speed-ups, precision, device maps, torchrun.

    python benchmarks/gpu_suite.py --device cuda                    # one H200: 3-5 min expected, 480 s deadline
    python benchmarks/gpu_suite.py --device cpu --quick --out x.json  # tiny shapes: the CPU test's run

What it measures and writes, in full: benchmarks/README.md, ``gpu_suite.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_models as gm  # noqa: E402
from gpu_runner import QUICK, Context, Sizes, code_identity, environment, run_sections  # noqa: E402,F401 (QUICK: tests)
from pruning_core.core.io import storage  # noqa: E402
from pruning_core.bench import LatencyStats, flop_ceiling, judge_speedup, speedup_spread, synthetic_inputs  # noqa: E402
from pruning_core.analysis.dynamics import spearman  # noqa: E402
from pruning_core.modeling.masking import apply_mask  # noqa: E402
from pruning_core.modeling.presets import remove_least_important  # noqa: E402
from pruning_core.modeling.pruning import prune_heads  # noqa: E402
from pruning_core.evaluation.results import provenance  # noqa: E402
from pruning_core.scoring.gradient import per_token_importance  # noqa: E402

FORMAT = "headprune.gpu_suite/1"
# masked vs pruned in float32: the pruned output projection sums w/2 instead of w products per output
# (the removed heads' zeros are gone), so the GEMMs add in another order and block differently. Each
# float32 dot product then differs by ~1e-7..1e-6 relative; through a few dozen layers with norms this
# stays well under 1e-4 of the largest logit. bfloat16 (8-bit mantissa, eps 7.8e-3) is recorded only.
F32_MASKED_PRUNED_REL = 1e-4
# scores of one model on one device vs spread over devices: the same float32 sums, on other kernels
# (CPU vs GPU GEMMs add in other orders): ~1e-6 relative per op, products of activations and gradients
# through every layer; 1e-4 of the largest score leaves room without hiding a wrong layer or head.
F32_DEVICE_REL = 1e-4
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


# -- sections -------------------------------------------------------------------------------------

def section_matmul(ctx: Context, out: dict) -> None:
    """The bf16 matrix-product rate this device reaches: the practical ceiling beside the datasheet's."""
    n = 1024 if ctx.quick or ctx.device.type != "cuda" else 8192
    dtype = ctx.fast_dtype
    a, b = (torch.randn(n, n, device=ctx.device, dtype=dtype) for _ in range(2))
    timed = gm.event_latencies({"matmul": lambda: a @ b}, ctx.device, warmup=3, repeats=10, min_seconds=0.0)
    median = LatencyStats.of(timed["matmul"]["seconds"]).median
    out.update(n=n, dtype=str(dtype).removeprefix("torch."), median_s=median, flops=2 * n ** 3 / median,
               note="median of 10 products (at least) after 3 warm-ups, random normal inputs")
    ctx.measured_bf16 = out["flops"] if dtype == torch.bfloat16 else None


# work per example in forward-pass multiply-adds: a forward, then the backward to the head outputs
# (about one more forward of activation gradients); bertology's backward also makes every weight
# gradient (about one more). Upper bounds: headprune's backward stops at layer 0's head outputs.
WORK = {"headprune": (2, "forward + activation gradients (torch.autograd.grad to the head outputs)"),
        "bertology": (3, "forward + activation and weight gradients (loss.backward(), weights trainable)"),
        "bertology_frozen": (2, "forward + activation gradients (loss.backward(), weights frozen)")}


def section_scoring(ctx: Context, out: dict) -> None:
    """I_h throughput: headprune's scorer vs the bertology loop, float32 then bfloat16 on the same weights."""
    s = ctx.sizes
    files = ctx.files(s.score_examples, s.seq)
    peak, source = gm.bf16_peak(ctx.device_name)
    out.update(examples=s.score_examples, seq_len=s.seq, batch_size=s.score_batch, attn="eager (both methods)",
               work=WORK, float32_matmul_precision=torch.get_float32_matmul_precision(), peak_bf16_flops=peak,
               peak_source=source, models={})

    def measure(name: str, row: dict) -> None:
        loaded = ctx.model(name, torch.float32)
        task = gm.task_for(loaded, files)
        data = task.encode(loaded, "test", s.score_examples, max_length=s.seq)
        tokens, macs = sum(data.lengths), gm.forward_macs(loaded, s.seq)
        row.update(model=gm.summary(loaded), forward_macs_per_example=macs, dtypes={})
        for dtype_name, dtype in DTYPES.items():
            ctx.check(f"scoring {name} {dtype_name}")
            loaded.model.to(dtype)
            runs = {"headprune": lambda: per_token_importance(loaded, task, data, batch_size=s.score_batch),
                    "bertology": lambda: gm.bertology_importance(loaded, task, data, s.score_batch, True),
                    "bertology_frozen": lambda: gm.bertology_importance(loaded, task, data, s.score_batch, False)}
            timed = gm.event_latencies(runs, ctx.device, warmup=1, repeats=s.score_repeats, min_seconds=0.0)
            methods = {}
            for method, t in timed.items():
                median = LatencyStats.of(t["seconds"]).median
                flops = WORK[method][0] * 2 * macs * data.n_examples / median
                bf16 = dtype == torch.bfloat16
                methods[method] = {"median_s": median, "examples_per_s": data.n_examples / median,
                                   "tokens_per_s": tokens / median, "flops": flops,
                                   "share_of_bf16_peak": flops / peak if peak and bf16 else None,
                                   "share_of_measured_matmul": flops / ctx.measured_bf16
                                   if ctx.measured_bf16 and bf16 else None,
                                   "timing": {k: v for k, v in t.items() if k != "seconds"}}
            hp = methods["headprune"]["examples_per_s"]
            row["dtypes"][dtype_name] = {"methods": methods,
                                         "headprune_over_bertology": hp / methods["bertology"]["examples_per_s"],
                                         "headprune_over_bertology_frozen":
                                             hp / methods["bertology_frozen"]["examples_per_s"]}

    ctx.each(out["models"], gm.SHAPES, "scoring", measure)


def section_latency(ctx: Context, out: dict) -> None:
    """Dense vs physically pruned forward passes, interleaved, with the FLOP ceiling beside each point."""
    s = ctx.sizes
    dtype = ctx.fast_dtype
    out.update(dtype=str(dtype).removeprefix("torch."), attn="sdpa", warmup=s.warmup, repeats=s.repeats,
               min_seconds=s.min_seconds, timer="CUDA events" if ctx.device.type == "cuda" else "wall clock",
               inputs="synthetic token ids, no padding", models={})

    def measure(name: str, row: dict) -> None:
        loaded = ctx.model(name, dtype, attn="sdpa")
        mask, rule = gm.half_mask(loaded)
        pruned = prune_heads(loaded.model, mask).eval()
        row.update(model=gm.summary(loaded), mask_rule=rule, heads_kept=mask.n_kept, heads_total=mask.n_total,
                   points=[])
        for seq in s.seq_lens:
            ceiling = flop_ceiling(loaded.config, mask, seq).speedup
            for bs in s.batch_sizes:
                ctx.check(f"latency {name} batch {bs} x {seq}")
                point = {"batch_size": bs, "seq_len": seq, "ceiling": ceiling}
                row["points"].append(point)
                with ctx.isolated(point, f"latency {name} batch {bs} x {seq}"):       # an OOM loses one point
                    _latency_point(ctx, loaded.model, pruned, point)

    ctx.each(out["models"], gm.SHAPES, "latency", measure)


def _latency_point(ctx: Context, dense, pruned, point: dict) -> None:
    s, bs, seq, ceiling = ctx.sizes, point["batch_size"], point["seq_len"], point["ceiling"]
    inputs = synthetic_inputs(dense.config, bs, seq, None, ctx.device, seed=bs + seq)
    with torch.inference_mode():
        t = gm.event_latencies({"dense": lambda: dense(**inputs), "pruned": lambda: pruned(**inputs)},
                               ctx.device, warmup=s.warmup, repeats=s.repeats, min_seconds=s.min_seconds)
    d, p = LatencyStats.of(t["dense"]["seconds"]), LatencyStats.of(t["pruned"]["seconds"])
    speedup = d.median / p.median
    point.update(dense=d.to_json(), pruned=p.to_json(), speedup=speedup,
                 paired_speedup=gm.paired_median(t["dense"]["seconds"], t["pruned"]["seconds"]),
                 fraction_of_ceiling=speedup / ceiling,
                 share_of_ceiling_gain=(speedup - 1) / (ceiling - 1) if ceiling > 1 else None,
                 verdict=judge_speedup(speedup, *speedup_spread(d, p), ceiling).kind,
                 wall={k: t[k]["wall"] for k in t})


def _logit_difference(loaded, mask, inputs) -> dict:
    with torch.inference_mode():
        with apply_mask(loaded, mask):
            masked = loaded.model(**inputs).logits.float()
        pruned = prune_heads(loaded.model, mask).eval()
        diff = (pruned(**inputs).logits.float() - masked).abs().max().item()
    scale = masked.abs().max().item()
    return {"max_abs_diff": diff, "max_abs_logit": scale, "relative": diff / scale if scale > 0 else diff}


def section_precision(ctx: Context, out: dict) -> None:
    """masked == pruned per dtype, and I_h in bfloat16 against float32 on the same weights and data."""
    s = ctx.sizes
    files = ctx.files(s.precision_examples, s.seq)
    out.update(examples=s.precision_examples, seq_len=s.seq, float32_tolerance=F32_MASKED_PRUNED_REL, models={})

    def measure(name: str, row: dict) -> None:
        loaded = ctx.model(name, torch.float32)
        mask, rule = gm.half_mask(loaded)
        task = gm.task_for(loaded, files)
        data = task.encode(loaded, "test", s.precision_examples, max_length=s.seq)
        inputs = synthetic_inputs(loaded.config, s.precision_batch, s.seq, None, ctx.device, seed=1)
        row.update(mask_rule=rule, masked_vs_pruned={})
        scores = {}
        for dtype_name, dtype in DTYPES.items():
            loaded.model.to(dtype)
            row["masked_vs_pruned"][dtype_name] = _logit_difference(loaded, mask, inputs)
            scores[dtype_name] = per_token_importance(loaded, task, data, batch_size=s.precision_batch)
        f32 = row["masked_vs_pruned"]["float32"]
        f32["within_tolerance"] = f32["relative"] <= F32_MASKED_PRUNED_REL
        a, b = scores["float32"], scores["bfloat16"]
        heads = a.layout.heads()
        norm_a, norm_b = a.normalized_per_layer(), b.normalized_per_layer()
        keep_a, keep_b = (remove_least_important(x, 0.5) for x in (norm_a, norm_b))
        row.update(spearman_raw=spearman([a.get(h) for h in heads], [b.get(h) for h in heads]),
                   spearman_normalized=spearman([norm_a.get(h) for h in heads], [norm_b.get(h) for h in heads]),
                   half_mask_agreement=sum(keep_a.kinds[k][l][h] == keep_b.kinds[k][l][h] for k, l, h in heads)
                   / len(heads))

    ctx.each(out["models"], gm.SHAPES, "precision", measure)


def section_evaluate(ctx: Context, out: dict) -> None:
    """The dashboard's click -> metric: one ``Task.evaluate`` under a new mask (float32, eager, batch 64)."""
    s = ctx.sizes
    files = ctx.files(s.eval_examples, s.seq)
    out.update(examples=s.eval_examples, seq_len=s.seq, batch_size=s.eval_batch, dtype="float32", attn="eager",
               note="encoding is cached by the dashboard, so it is timed apart; 'warm' is a click; masked_forward_only: "
                    "the same forward passes alone (the rest of a click is predictions, per-example evidence, "
                    "intervals)", models={})

    def measure(name: str, row: dict) -> None:
        loaded = ctx.model(name, torch.float32)
        task = gm.task_for(loaded, files)
        start = time.perf_counter()
        data = task.encode(loaded, "test", s.eval_examples, max_length=s.seq)
        encode_s = time.perf_counter() - start
        mask, _ = gm.half_mask(loaded)

        def forward_only() -> None:          # the same batches under the mask, without the loop's bookkeeping
            with torch.inference_mode(), apply_mask(loaded, mask):
                for batch in data.batches(s.eval_batch, device=loaded.device):
                    loaded.model(**batch.inputs).logits.sum().item()

        runs = {"dense": lambda: task.evaluate(loaded, data, None, batch_size=s.eval_batch),
                "masked": lambda: task.evaluate(loaded, data, mask, batch_size=s.eval_batch)}
        first = {k: f().seconds for k, f in runs.items()}
        timed = gm.event_latencies({**runs, "masked_forward_only": forward_only}, ctx.device, warmup=0,
                                   repeats=s.eval_repeats, min_seconds=0.0)
        row.update(encode_s=encode_s, first_call_s=first, warm={k: t["wall"] for k, t in timed.items()},
                   masked_examples_per_s=s.eval_examples / timed["masked"]["wall"]["median_s"],
                   metric=runs["masked"]().metric)

    ctx.each(out["models"], ("minilm-l6", "bert-base"), "evaluate", measure)


def _score_file(loaded, files, sizes: Sizes):
    from pruning_core.scoring import ScoreConfig, get_scorer

    task = gm.task_for(loaded, files)
    config = ScoreConfig(split="test", limit=sizes.cli_examples, batch_size=sizes.precision_batch, max_length=sizes.seq)
    return get_scorer("gradient").score(loaded, task, config)


def _relative(a: dict, b: dict) -> float:
    """max |a - b| / max |a| over the heads of two ``kinds`` score dicts."""
    xs = [(x, y) for k in a for ra, rb in zip(a[k], b[k]) for x, y in zip(ra, rb)]
    scale = max(abs(x) for x, _ in xs) or 1.0
    return max(abs(x - y) for x, y in xs) / scale


def section_device_map(ctx: Context, out: dict) -> None:
    """load_model(device_map=...) with the first half of the layers on the GPU, the rest on the CPU."""
    from pruning_core.cli.args import parse_device_map
    from pruning_core.modeling.sources.loading import load_model

    folder, files = ctx.saved("minilm-l6"), ctx.files(ctx.sizes.cli_examples, ctx.sizes.seq)
    layers = gm.config_of(gm.SHAPES["minilm-l6"], ctx.quick).num_hidden_layers
    gpu = "cuda:0" if ctx.device.type == "cuda" else "cpu"
    mapping = {"bert.embeddings": gpu, **{f"bert.encoder.layer.{i}": gpu if i < layers // 2 else "cpu"
                                          for i in range(layers)}, "bert.pooler": "cpu", "classifier": "cpu",
               "dropout": "cpu"}
    single = load_model(str(folder), device=str(ctx.device), dtype="float32")
    mapped = load_model(str(folder), device_map=parse_device_map(json.dumps(mapping)), dtype="float32")
    placed: dict[str, int] = {}
    for p in mapped.model.parameters():
        placed[str(p.device)] = placed.get(str(p.device), 0) + p.numel()
    one, spread = _score_file(single, files, ctx.sizes), _score_file(mapped, files, ctx.sizes)
    rel = _relative(one.scores.to_json(), spread.scores.to_json())
    out.update(device_map=mapping, split_over_gpu_and_cpu=ctx.device.type == "cuda",
               note="beside a GPU, accelerate offloads the 'cpu' entries: their weights stay in CPU memory (meta "
                    "in the model until each forward) and run on the GPU; parameters_by_device shows it",
               hf_device_map=getattr(mapped.model, "hf_device_map", None), parameters_by_device=placed,
               single_s=one.seconds, mapped_s=spread.seconds, max_relative_difference=rel,
               tolerance=F32_DEVICE_REL, within_tolerance=rel <= F32_DEVICE_REL)


def _torchrun(args: list[str], ctx: Context) -> float:
    """``torchrun --standalone --nproc-per-node 1 -m pruning_core ARGS --distributed``; its seconds, launch to exit."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "HEADPRUNE_HOME": str(ctx.work / "home")}
    if ctx.device.type == "cpu":
        env["OMP_NUM_THREADS"] = "1"
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):     # start afresh even under torchrun
        env.pop(key, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
           "-m", "pruning_core", *args, "--distributed"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ctx.work, env=env, capture_output=True, text=True,
                          timeout=max(10.0, min(300.0, ctx.left())))
    if proc.returncode != 0:
        raise RuntimeError(f"torchrun exited {proc.returncode}:\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def section_torchrun(ctx: Context, out: dict) -> None:
    """``headprune score`` under torchrun --nproc-per-node 1 --distributed (a process group of one:
    NCCL on CUDA, gloo on CPU, the multi-GPU code path) against the same command in this process."""
    from pruning_core.cli.main import main as headprune

    s = ctx.sizes
    folder, files = ctx.saved("minilm-l6"), ctx.files(s.cli_examples, s.seq)
    base = ["score", str(folder), "--task", f"file:{files['classification']}", "--score-split", "test",
            "--score-limit", str(s.cli_examples), "--batch-size", str(s.precision_batch),
            "--device", ctx.device.type, "--dtype", "float32"]
    single_out, dist_out = ctx.work / "cli-single.json", ctx.work / "cli-torchrun.json"
    start = time.perf_counter()
    if headprune(base + ["--out", str(single_out)]) != 0:
        raise RuntimeError("headprune score failed in this process (its error is printed above)")
    single_s = time.perf_counter() - start
    dist_s = _torchrun(base + ["--out", str(dist_out)], ctx)
    single, dist = (json.loads(p.read_text()) for p in (single_out, dist_out))
    rel = _relative(single["raw_kinds"], dist["raw_kinds"])
    out.update(command="headprune " + " ".join(base[:1] + ["FOLDER"] + base[2:]), single_s=single_s, torchrun_s=dist_s,
               parallel=dist["provenance"]["parallel"], single_parallel=single["provenance"]["parallel"],
               max_relative_difference=rel, tolerance=F32_DEVICE_REL, within_tolerance=rel <= F32_DEVICE_REL,
               note="single_s: the command called in this process (loaded, scored, written); torchrun_s: launch "
                    "to exit (two interpreters start, import, load, join the group, score, write)")


SECTIONS = {
    "matmul": section_matmul, "scoring": section_scoring, "latency": section_latency,
    "precision": section_precision, "evaluate": section_evaluate, "device_map": section_device_map,
    "torchrun": section_torchrun}


def main(argv: list[str] | None = None, sections: dict | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda or cpu")
    ap.add_argument("--quick", action="store_true", help="tiny shapes and few repeats (the CPU test)")
    ap.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/gpu-<device>[-quick].json")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of: {', '.join(SECTIONS)}")
    ap.add_argument("--deadline", type=float, default=480.0, help="seconds; later sections are skipped (default 480)")
    ap.add_argument("--llama-vocab", type=int, default=None,
                    help="vocabulary of the Llama-3.2-1B shape (default: the real 128256); recorded in the JSON")
    args = ap.parse_args(argv)
    sections = sections if sections is not None else SECTIONS
    chosen = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in sections]
    if unknown:
        ap.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(sections)}")
    from pruning_core.core.errors import HeadpruneError
    from pruning_core.modeling.sources.loading import resolve_device
    try:
        device = resolve_device(args.device)
    except HeadpruneError as exc:
        ap.error(str(exc))
    import transformers
    transformers.logging.set_verbosity_error()
    if args.quick and device.type == "cpu":
        torch.set_num_threads(1)        # the CPU test: one thread degrades gracefully on a shared machine
    out = args.out or ROOT / "benchmarks" / "results" / f"gpu-{device.type}{'-quick' if args.quick else ''}.json"
    started = time.perf_counter()
    sizes = QUICK if args.quick else Sizes()
    results: dict = {}
    settings = {"quick": args.quick, "deadline_s": args.deadline, "sections": chosen, "sizes": asdict(sizes),
                "llama_vocab": args.llama_vocab or ("quick shape" if args.quick else 128256),
                "shapes": {n: s.mirrors for n, s in gm.SHAPES.items()}}
    try:
        env = environment(device)
    except Exception as exc:            # noqa: BLE001 -- one-shot run: the figures matter more than the labels
        env = {"device": str(device), "name": None, "error": f"{type(exc).__name__}: {exc}"}
    doc = {"format": FORMAT, "environment": env, "settings": settings, "sections": results}
    code = code_identity()
    with tempfile.TemporaryDirectory(prefix="gpu-suite-") as work:
        ctx = Context(device=device, quick=args.quick, sizes=sizes, deadline_at=started + args.deadline,
                      work=Path(work), vocab=args.llama_vocab)
        ctx.tokenizer = gm.make_tokenizer(Path(work) / "tokenizer")

        def write() -> None:
            peak, source = gm.bf16_peak(doc["environment"].get("name"))
            doc.update(peak_bf16={"datasheet_flops": peak, "source": source, "measured_flops": ctx.measured_bf16},
                       peak_memory_bytes=max((r.get("peak_memory_bytes") or 0) for r in results.values()) if results
                       else None,
                       memory_measure="torch.cuda.max_memory_allocated per section (reset at its start)"
                       if device.type == "cuda" else "process peak RSS (ru_maxrss), cumulative",
                       seconds=time.perf_counter() - started, code=code,
                       provenance=provenance(None, method="gpu_suite", settings=settings, device=str(device)))
            storage.write_json(out, doc)

        write()                         # a file from the start: a run killed in its first section still says so
        run_sections({n: sections[n] for n in chosen}, ctx, results, write)
    print(f"wrote {out} in {time.perf_counter() - started:.0f} s: "
          + ", ".join(f"{n} {r['status']}" for n, r in results.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
