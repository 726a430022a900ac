"""``headprune export``: a (pruned) model for another runtime, ONNX (every family, checked in ONNX Runtime)
or GGUF (the Llama family, for llama.cpp)."""
from __future__ import annotations

from pruning_core.cli.args import checked, output_file
from pruning_core.core.errors import HeadpruneError

FORMATS = ("onnx", "gguf")


def add_export(sub) -> None:
    """Add ``export`` to the sub-commands ``sub``."""
    p = sub.add_parser("export", help="write a (pruned) model as ONNX (any family) or GGUF (Llama family, llama.cpp)")
    p.add_argument("model", help="a model folder saved by `headprune prune`, 'default', or any model headprune loads")
    p.add_argument("--format", required=True, choices=FORMATS,
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
