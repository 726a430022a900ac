"""Pruned models for other runtimes: ONNX (:mod:`.to_onnx`, every family, ONNX Runtime checked against
PyTorch), its timing beside PyTorch (:mod:`.onnx_bench`) and GGUF for llama.cpp (:mod:`.to_gguf`, the
Llama family). The stock-transformers path needs no export: ``models.save_pruned`` writes a stock config
when the shape allows it (:func:`pruning_core.modeling.pruning.stock_shape`)."""
from __future__ import annotations
