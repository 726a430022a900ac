"""headprune's core library: find which attention heads a task needs, and remove the rest.

Pure Python on PyTorch and transformers 5.x; never imports Streamlit or plotting. The public API
is exactly ``__all__`` below; each name is imported from its module on first use, so importing
``pruning_core`` (or a light module such as ``pruning_core.core.io.share_link``) does not load torch.

    from pruning_core import load_model, get_task, get_scorer, ScoreConfig, apply_mask, prune_heads
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # head conventions and errors
    **dict.fromkeys(["KINDS", "HeadLayout", "HeadMask", "HeadScores"], "core.heads"),
    **dict.fromkeys(["HeadpruneError", "ModelLoadError", "UnsupportedArchitectureError", "DataError",
                     "FormatError", "CacheError", "Cancelled"], "core.errors"),
    "ProgressEvent": "core.progress",
    # models, masking, pruning
    **dict.fromkeys(["LoadedModel", "load_model", "save_pruned", "resolve_device"], "modeling.sources.loading"),
    **dict.fromkeys(["apply_mask", "gate_heads"], "modeling.masking"),
    **dict.fromkeys(["prune_heads", "parameter_count", "parameter_count_after", "attention_parameter_count"],
                    "modeling.pruning"),
    # extension points: one registry each
    **dict.fromkeys(["ArchitectureAdapter", "adapter_for", "supported_model_types"], "modeling.architectures"),
    **dict.fromkeys(["Task", "get_task", "task_names", "register_task"], "tasks"),
    **dict.fromkeys(["Metric", "get_metric", "register_metric", "metric_names"], "evaluation.metrics"),
    **dict.fromkeys(["Scorer", "ScoreConfig", "get_scorer", "register_scorer", "scorer_info", "scorer_names"],
                    "scoring"),
    # experiments, results, presets
    **dict.fromkeys(["ablation_table", "one_head_per_layer", "pruning_curve"], "evaluation.experiments"),
    **dict.fromkeys(["EvalResult", "ScoreResult", "load_mask", "load_scores", "mask_to_json"], "evaluation.results"),
    **dict.fromkeys(["remove_least_important", "keep_top_per_layer", "random_per_layer"], "modeling.presets"),
    # speed, attention maps, shared links
    **dict.fromkeys(["benchmark", "flop_ceiling"], "bench"),
    # retraining-free compression
    **dict.fromkeys(["Budget", "CompressConfig", "compress", "repair_mask"], "compress"),
    "run_attention": "analysis.attention_maps",
    **dict.fromkeys(["encode_mask", "decode_mask", "parse_link", "mask_from_link"], "core.io.share_link"),
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pruning_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
