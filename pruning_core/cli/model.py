"""``headprune`` model commands: info (architecture, heads, parameters), prune (save the smaller model),
bench (dense vs masked vs physically pruned), export (a (pruned) model for another runtime: ONNX for every family,
checked in ONNX Runtime, or GGUF for the Llama family, for llama.cpp)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pruning_core.cli.args import DTYPE_CHOICES, checked, int_list, output_file, output_folder, positive_int
from pruning_core.cli.common import (
    common_options,
    load_from_args,
    mask_options,
    progress_bars,
    read_mask,
    write_result,
)
from pruning_core.cli.roles import existing_roles_file, summary_of
from pruning_core.core.io.codec import INFO_FORMAT, JsonRecord
from pruning_core.core.errors import HeadpruneError


def add_info(sub) -> None:
    """Add ``info`` to the sub-commands ``sub``."""
    p = sub.add_parser("info", help="architecture, heads and parameters of a model")
    common_options(p, task=False)
    p.set_defaults(func=cmd_info)


def add_prune_and_bench(sub) -> None:
    """Add ``prune`` and ``bench`` to the sub-commands ``sub``."""
    p = sub.add_parser("prune", help="physically remove the masked heads and save the smaller model")
    p.add_argument("model")
    mask_options(p, "a headprune.mask/1 file", required=True)
    checked(p, "--out", required=True, check=output_folder, help="folder to save the pruned model to")
    p.add_argument("--allow-pickle", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=DTYPE_CHOICES,
                   help="the precision the pruned model is saved in (half precision needs --device cuda)")
    checked(p, "--roles-file", default=None, check=existing_roles_file,
            help="a `headprune roles --out` file of this model: the summary says which role heads the mask removes")
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("bench", help="latency, throughput, memory: dense vs masked vs physically pruned")
    common_options(p, task=False)
    mask_options(p, "a headprune.mask/1 file (default: remove half the heads of every layer, seeded)")
    checked(p, "--batch-sizes", default="1,8,32", check=int_list)
    checked(p, "--seq-len", type=int, default=128, check=positive_int)
    checked(p, "--repeats", type=int, default=None, check=positive_int)
    p.add_argument("--onnx", action="store_true",
                   help="time ONNX Runtime dense vs pruned beside PyTorch (CPU, float32, eager attention) instead of "
                        "dense vs masked vs pruned in PyTorch; needs onnx and onnxruntime")
    p.set_defaults(func=cmd_bench)


@dataclass(frozen=True)
class ModelInfo(JsonRecord):
    """What ``headprune info --out`` writes: the model's architecture, head layout and parameter counts."""

    format: str = field(default=INFO_FORMAT, init=False)
    model: str | None
    model_type: str | None
    task_type: str | None
    layout: dict                    # HeadLayout.to_json(): kind -> [layers, heads per layer]
    parameters: int
    attention_parameters: int
    pruned_heads: dict              # heads removed earlier, as the model's config records them
    stock_transformers: bool = field(init=False)       # derived: loads_in says "stock ..."
    loads_in: str                   # what loads the saved model (stock transformers or headprune)
    provenance: dict

    def __post_init__(self) -> None:
        self._derive(stock_transformers=self.loads_in.startswith("stock"))


def cmd_info(args) -> None:
    from pruning_core.modeling.pruning import attention_parameter_count, loads_in, parameter_count
    from pruning_core.evaluation.results import provenance
    loaded = load_from_args(args)
    total, attn = parameter_count(loaded.model), attention_parameter_count(loaded.model)
    print(f"model      {loaded.model_id}  ({loaded.source}, {loaded.config.model_type}, {loaded.task_type})")
    print(f"weights    sha256 {loaded.weights_sha256[:16]}…")
    print(f"heads      {loaded.layout.describe()}  ({loaded.layout.total_heads} in all)")
    print(f"parameters {total:,} ({attn:,} in attention, {attn / total:.1%})")
    if loaded.pruned_heads:
        print(f"pruned     {sum(len(v) for k in loaded.pruned_heads.values() for v in k.values())} heads removed earlier")
    stock = loads_in(loaded.model, loaded.model_id)
    print(f"loads in   {stock}")
    write_result(args, ModelInfo(loaded.model_id, loaded.config.model_type, loaded.task_type, loaded.layout.to_json(),
                                 total, attn, loaded.pruned_heads, stock, provenance(loaded)).to_json())


def cmd_prune(args) -> None:
    from pruning_core.modeling.sources.loading import save_pruned
    from pruning_core.modeling.pruning import (
        describe_change,
        loads_in,
        parameter_count,
        parameter_count_after,
        prune_heads,
    )
    from pruning_core.analysis.roles import load_roles
    loaded = load_from_args(args)
    mask = read_mask(args, loaded.layout)
    before, after = parameter_count(loaded.model), parameter_count_after(loaded.model, mask)
    change = f"parameters {before:,} -> {after:,} ({describe_change(before, after)})"
    pruned = prune_heads(loaded.model, mask)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise HeadpruneError(f"Output folder {str(out)!r} exists and is not empty; choose a new folder.")
    save_pruned(pruned, loaded.tokenizer, out, shortlist=loaded.shortlist)
    report = load_roles(args.roles_file, loaded.layout) if args.roles_file else None
    print(f"removed {mask.n_total - mask.n_kept}/{mask.n_total} heads{summary_of(report, mask)}; {change}; "
          f"saved to {out}")
    print(f"loads in {loads_in(pruned, str(out), saved_now=True)}")


def cmd_bench(args) -> None:
    from pruning_core.bench import benchmark, format_bench
    sizes = tuple(int(s) for s in args.batch_sizes.split(","))     # checked by cli_args.int_list
    if args.onnx:
        return _bench_onnx(args, sizes)
    loaded = load_from_args(args, attn="sdpa")
    mask = read_mask(args, loaded.layout)          # None: the benchmark's own half mask (seed 0)
    kwargs = {"repeats": args.repeats} if args.repeats else {}
    result = benchmark(loaded, mask, batch_sizes=sizes, seq_len=args.seq_len, device=args.device,
                       progress=progress_bars(), **kwargs)
    print(format_bench(result))
    write_result(args, result.to_json())


def _bench_onnx(args, sizes) -> None:
    from pruning_core.bench.export.onnx_bench import format_onnx_bench, onnx_benchmark
    if (args.device or "cpu") != "cpu" or args.dtype not in ("auto", "float32") or args.device_map:
        raise HeadpruneError("bench --onnx compares CPU runtimes in float32; leave out --device, --dtype and "
                             "--device-map (or give --device cpu --dtype float32).")
    from pruning_core.modeling.sources.loading import load_model
    loaded = load_model(args.model, device="cpu", dtype="float32", allow_pickle=args.allow_pickle)
    mask = read_mask(args, loaded.layout)
    kwargs = {"repeats": args.repeats} if args.repeats else {}
    result = onnx_benchmark(loaded, mask, batch_sizes=sizes, seq_len=args.seq_len, progress=progress_bars(), **kwargs)
    print(format_onnx_bench(result))
    write_result(args, result.to_json())


# -- export ----------------------------------------------------------------------------------------------
EXPORT_FORMATS = ("onnx", "gguf")


def add_export(sub) -> None:
    """Add ``export`` to the sub-commands ``sub``."""
    p = sub.add_parser("export", help="write a (pruned) model as ONNX (any family) or GGUF (Llama family, llama.cpp)")
    p.add_argument("model", help="a model folder saved by `headprune prune`, 'default', or any model headprune loads")
    p.add_argument("--format", required=True, choices=EXPORT_FORMATS,
                   help="onnx: one forward pass to logits, no key/value cache, checked in ONNX Runtime; "
                        "gguf: llama.cpp's format (llama, qwen2, mistral families; tokenizer included)")
    checked(p, "--out", required=True, check=output_file, help="the file to write (FILE.onnx or FILE.gguf)")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"),
                   help="weights in the file: float32, or float16 (GGUF only; ONNX is exported in float32)")
    p.add_argument("--allow-pickle", action="store_true")
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> None:
    from pruning_core.modeling.sources.loading import load_model
    loaded = load_model(args.model, device="cpu", dtype="float32", allow_pickle=args.allow_pickle)
    if args.format == "onnx":
        if args.dtype != "float32":
            raise HeadpruneError("ONNX export writes float32 (what ONNX Runtime's CPU kernels run); leave --dtype out "
                                 "or give float32.")
        from pruning_core.bench.export.to_onnx import export_onnx
        result = export_onnx(loaded, args.out)
        print(f"wrote {result.path} ({result.path.stat().st_size / 2**20:.1f} MiB; inputs {', '.join(result.inputs)}; "
              f"output logits) in {result.seconds:.1f} s")
        print(f"checked: ONNX Runtime's logits equal headprune's to {result.max_abs_diff:.2g} "
              f"(allowed {result.tolerance:.2g}) on 3 sequences of 5 tokens")
        return
    from pruning_core.bench.export.to_gguf import export_gguf
    result = export_gguf(loaded, args.out, dtype=args.dtype)
    print(f"wrote {result.path} ({result.path.stat().st_size / 2**20:.1f} MiB, {result.arch}, {args.dtype}, "
          f"{result.tensors} tensors, vocabulary {result.vocab_size:,}) in {result.seconds:.1f} s")
