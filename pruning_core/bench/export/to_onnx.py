"""ONNX export of a (pruned) model as headprune loads it: one forward pass to logits, no key/value cache.

Any shape headprune can prune exports (the graph is traced from the loaded model). Inputs by family, as the
benchmark feeds them (:func:`pruning_core.bench.run.synthetic_inputs`): ``input_ids`` and ``attention_mask``;
encoder-decoders also ``decoder_input_ids`` (teacher-forced); Whisper ``input_features``. Output ``logits``;
batch and token counts are dynamic axes. The exporter is PyTorch's TorchScript-based one
(``dynamo=False``: it needs only ``onnx`` and works offline); the trace runs on a padded batch, and the
export is checked in ONNX Runtime on another batch size and length against the PyTorch logits.
"""
from __future__ import annotations

import contextlib
import io
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from pruning_core.core.errors import HeadpruneError
from pruning_core.core.io.storage import atomic_path

OPSET = 17
# ONNX Runtime runs float32 kernels of its own (fused attention and layer norm, another summation order):
# each op differs from PyTorch by ~1e-7 relative, a few layers by ~1e-6; 1e-4 of the logits' scale
# leaves room for 24 layers while a wrong head (a zeroed or misplaced slice) moves logits by far more
TOLERANCE = 1e-4

__all__ = ["OPSET", "TOLERANCE", "OnnxExport", "example_inputs", "export_onnx", "onnx_logits", "onnx_session"]


@dataclass(frozen=True)
class OnnxExport:
    """One exported file and how closely ONNX Runtime reproduced the PyTorch logits."""

    path: Path
    inputs: tuple[str, ...]        # the graph's input names, in order
    max_abs_diff: float            # max |ONNX Runtime - PyTorch| over the check inputs' logits
    tolerance: float               # TOLERANCE * max(1, max |logit|): what the check allowed
    seconds: float


class LogitsOnly(nn.Module):
    """``forward(*tensors)`` -> the wrapped model's logits, the tensors passed under ``names`` (no cache)."""

    def __init__(self, model: nn.Module, names: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.names = names
        self.no_cache = "use_cache" in getattr(model.config, "to_dict", dict)()

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        kwargs = dict(zip(self.names, tensors))
        if self.no_cache:
            kwargs["use_cache"] = False
        if "decoder_input_ids" in kwargs:
            # every decoder token is real (teacher forcing); without a mask transformers looks for packed
            # sequences in the positions (torch.diff, which ONNX lacks), with one it computes the same logits
            kwargs["decoder_attention_mask"] = torch.ones_like(kwargs["decoder_input_ids"])
        return self.model(**kwargs).logits


def example_inputs(config, batch: int, length: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Inputs of ``batch`` sequences of ``length`` tokens (decoders: ``length - 2`` decoder tokens), the
    first sequence padded over its last two tokens when there is an attention mask and room for it."""
    from pruning_core.bench.run import synthetic_inputs
    enc_dec = bool(getattr(config, "is_encoder_decoder", False))
    inputs = synthetic_inputs(config, batch, length, max(1, length - 2) if enc_dec else None, torch.device("cpu"),
                              seed=seed)
    inputs.pop("use_cache", None)
    if "attention_mask" in inputs and length > 2:
        inputs["attention_mask"][0, -2:] = 0
    return inputs


def onnx_session(path: str | Path, threads: int | None = None):
    """An ONNX Runtime CPU session for ``path`` (``threads``: intra-op threads; None = its default)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = int(threads)
    options.log_severity_level = 3                      # errors only
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def onnx_logits(session, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Run ``session`` on ``inputs`` (torch tensors, by input name) and return its logits as a tensor."""
    feed = {i.name: inputs[i.name].cpu().numpy() for i in session.get_inputs()}
    return torch.from_numpy(session.run(["logits"], feed)[0])


def export_onnx(loaded, out: str | Path, *, opset: int = OPSET, check: bool = True) -> OnnxExport:
    """Write ``loaded``'s model as ONNX to ``out`` and check it in ONNX Runtime.

    ``loaded``: a float32 model on the CPU (as ``load_model(..., device="cpu", dtype="float32")`` gives);
    never modified. The file appears only when the export and the check succeeded. Raises HeadpruneError
    when ONNX Runtime's logits differ from PyTorch's by more than the tolerance.
    """
    started = time.perf_counter()
    model = loaded.model
    if loaded.dtype != torch.float32 or loaded.device.type != "cpu":
        raise HeadpruneError(f"ONNX export reads a float32 model on the CPU; this one is {loaded.dtype} on "
                             f"{loaded.device}. Load it with --device cpu --dtype float32.")
    config = model.config
    trace_inputs = example_inputs(config, batch=2, length=8, seed=0)
    names = tuple(trace_inputs)
    wrapper = LogitsOnly(model, names).eval()
    was_training = model.training
    model.eval()
    lengths = {"input_ids": "tokens", "attention_mask": "tokens", "decoder_input_ids": "decoder_tokens"}
    dynamic = {n: ({0: "batch", 1: lengths[n]} if n in lengths else {0: "batch"}) for n in names}
    with torch.no_grad():
        reference = wrapper(*trace_inputs.values())
    out_axes = {0: "batch"}
    if reference.dim() == 3:
        out_axes[1] = "decoder_tokens" if "decoder_input_ids" in names else "tokens"
    dynamic["logits"] = out_axes
    try:
        with atomic_path(out) as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")             # tracer and deprecation warnings: the check below decides
            try:
                with contextlib.redirect_stdout(io.StringIO()):      # a failed export prints the whole graph
                    torch.onnx.export(wrapper, tuple(trace_inputs.values()), str(tmp), dynamo=False,
                                      input_names=list(names), output_names=["logits"], dynamic_axes=dynamic,
                                      opset_version=opset, do_constant_folding=True)
            except (RuntimeError, TypeError, ValueError) as exc:
                raise HeadpruneError(f"torch.onnx.export could not trace {loaded.model_id!r}: "
                                     f"{str(exc).splitlines()[0]}") from None
            diff, tol = _check(tmp, wrapper, config) if check else (float("nan"), float("nan"))
    finally:
        model.train(was_training)
    return OnnxExport(Path(out), names, diff, tol, time.perf_counter() - started)


def _check(path: Path, wrapper: LogitsOnly, config) -> tuple[float, float]:
    """Max |ONNX Runtime - PyTorch| on inputs other than the trace's (3 sequences of 5 tokens), and the bound."""
    inputs = example_inputs(config, batch=3, length=5, seed=1)
    with torch.no_grad():
        want = wrapper(*inputs.values())
    got = onnx_logits(onnx_session(path), inputs)
    if got.shape != want.shape:
        raise HeadpruneError(f"The ONNX export gives logits of shape {tuple(got.shape)} for inputs PyTorch maps to "
                             f"{tuple(want.shape)}; the trace did not generalise. Please report this model.")
    diff = float((got - want).abs().max())
    tol = TOLERANCE * max(1.0, float(want.abs().max()))
    if not diff <= tol:
        raise HeadpruneError(f"ONNX Runtime's logits differ from headprune's by {diff:.3g} (allowed {tol:.3g}); "
                             "the export was not written. Please report this model.")
    return diff, tol
