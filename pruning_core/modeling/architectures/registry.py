"""The architecture registry: ``config.model_type`` -> adapter instance (one per family)."""
from __future__ import annotations

from pruning_core.core.errors import UnsupportedArchitectureError, did_you_mean
from pruning_core.core.registry import Registry
from pruning_core.modeling.architectures.base import ArchitectureAdapter

ARCHITECTURES: Registry[ArchitectureAdapter] = Registry(
    "architecture", UnsupportedArchitectureError, "Use a model of one of these types.")


def register(adapter: ArchitectureAdapter) -> ArchitectureAdapter:
    """Register ``adapter`` under each of its ``model_types`` (a name registered twice raises)."""
    for model_type in adapter.model_types:
        ARCHITECTURES.add(model_type, adapter, description=f"{adapter.name} ({adapter.task_type})",
                          family=adapter.name, task_type=adapter.task_type)
    return adapter


def _model_type(model_or_config) -> str:
    if isinstance(model_or_config, str):
        return model_or_config
    config = getattr(model_or_config, "config", model_or_config)     # model or LoadedModel -> config
    return str(getattr(config, "model_type", type(config).__name__))


def adapter_for(model_or_config) -> ArchitectureAdapter:
    """The adapter for a ``config.model_type`` string, a config, a model or a LoadedModel.

    Raises:
        UnsupportedArchitectureError: no adapter handles that model type (the message lists those that do).
    """
    model_type = _model_type(model_or_config)
    if model_type not in ARCHITECTURES:
        names = ARCHITECTURES.names()
        raise UnsupportedArchitectureError(
            f"Architecture {model_type!r} is not supported.{did_you_mean(model_type, names)} "
            f"Supported model types: {', '.join(names)}. Use a model of one of these types.")
    return ARCHITECTURES.get(model_type)


def supported_model_types(task_type: str | None = None) -> list[str]:
    """Registered model types, optionally only those of one task type ("classification", ...)."""
    return [n for n in ARCHITECTURES.names()
            if task_type is None or ARCHITECTURES.entry(n).meta["task_type"] == task_type]
