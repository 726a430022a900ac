"""Loading models: a prepared model by name (the embedded default, see :mod:`pruning_core.zoo`), a local folder,
or a Hugging Face hub id.

Always ``trust_remote_code=False``. Pickle weights (``pytorch_model.bin``) are refused unless
the caller opts in with ``allow_pickle=True``, because unpickling runs arbitrary code.
A model saved by ``headprune prune`` records its removed heads in its config; loading rebuilds
those smaller shapes before the weights go in, unless the config is a stock one (``headprune_stock_config``:
its head counts are the pruned ones, so transformers builds them itself, with or without headprune).
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError
from torch import nn

from pruning_core.core.runtime import hub_probe
from pruning_core.modeling.architectures import AttentionSite, adapter_for, find_sites, layout_of
from pruning_core.core.errors import CacheError, ModelLoadError, UnsupportedArchitectureError
from pruning_core.core.heads import HeadLayout
from pruning_core.modeling.pruning import CONFIG_KEY, STOCK_KEY, restructure_for_loading, stock_shape
from pruning_core.modeling.inference.shortlist import SHORTLIST_FILE, Shortlist, read_shortlist
from pruning_core.modeling.sources.weight_files import check_weight_files, explain_mismatch
from pruning_core.modeling.sources.catalog import MANIFEST, headprune_home
from pruning_core.modeling.sources import catalog

DEFAULT_ID = catalog.DEFAULT
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


__all__ = ["DEFAULT_ID", "DTYPES", "LoadedModel", "default_model_dir", "headprune_home", "load_model",
           "resolve_device", "resolve_dtype", "save_pruned", "weights_hash_of_module"]

# --dtype choices. "auto": float32 on CPU, bfloat16 on a CUDA GPU that supports it (else float32).
# Half precision on CPU is refused: PyTorch's CPU kernels for it are slower than float32 for these
# models, and the numbers would differ from every other CPU result for no gain.
DTYPES = ("auto", "float32", "bfloat16", "float16")


def default_model_dir() -> Path:
    return catalog.get(DEFAULT_ID).folder()


@dataclass
class LoadedModel:
    """A model ready for masking, scoring and evaluation. Treat it as read-only: it may be shared."""

    model: nn.Module
    tokenizer: object
    model_id: str                 # what the user asked for: "default", a folder, or a hub id
    source: str                   # "default" | "prepared" (another zoo model) | "local" | "hub" | "memory"
    task_type: str                # "classification" | "translation"
    arch: str                     # adapter name
    weights_sha256: str
    sites: list[AttentionSite] = field(repr=False, default_factory=list)
    layout: HeadLayout = field(default_factory=lambda: HeadLayout({}))
    shortlist: Shortlist | None = field(default=None, repr=False)   # a translation model's vocabulary shortlist

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def config(self):
        return self.model.config

    @property
    def pruned_heads(self) -> dict:
        return dict(getattr(self.model.config, CONFIG_KEY, None) or {})

    def derive(self, model: nn.Module, model_id: str | None = None) -> "LoadedModel":
        """A LoadedModel for another model instance (a pruned copy) sharing this tokenizer."""
        sites = find_sites(model)
        return LoadedModel(model=model, tokenizer=self.tokenizer, model_id=model_id or self.model_id,
                           source="memory", task_type=self.task_type, arch=self.arch,
                           weights_sha256=weights_hash_of_module(model), sites=sites, layout=layout_of(sites),
                           shortlist=self.shortlist)

    def with_attention(self, implementation: str) -> "LoadedModel":
        """A copy whose attention runs ``implementation`` (transformers' name: "sdpa", "eager"), the same weights;
        self where it already does. The original is untouched; a model that cannot switch raises
        ``UnsupportedArchitectureError``."""
        if getattr(self.model.config, "_attn_implementation", None) == implementation:
            return self
        model = copy.deepcopy(self.model)
        model.set_attn_implementation(implementation)
        if getattr(model.config, "_attn_implementation", None) != implementation:
            raise UnsupportedArchitectureError(f"{type(model).__name__} cannot switch to {implementation!r} attention "
                                               "(transformers kept its own); load it with that implementation instead.")
        sites = find_sites(model)
        return dataclasses.replace(self, model=model, source="memory", sites=sites, layout=layout_of(sites))

    def to(self, device: str | torch.device) -> "LoadedModel":
        """A copy on ``device`` (the original is untouched)."""
        if torch.device(device) == self.device:
            return self
        return self.derive(copy.deepcopy(self.model).to(device), self.model_id)


def resolve_device(device: str | None) -> torch.device:
    """``None`` means CUDA when present, else CPU; asking for CUDA without one is an error."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"--device {device} was asked for but no CUDA GPU is available; use --device cpu.")
    if str(device) not in ("cpu",) and not str(device).startswith("cuda"):
        raise ModelLoadError(f"Unknown device {device!r}; use 'cpu' or 'cuda'.")
    return torch.device(device)


def resolve_dtype(dtype: str | None, device: torch.device) -> torch.dtype:
    """The torch dtype for a ``--dtype`` choice (see :data:`DTYPES`) on ``device``; half on CPU is refused."""
    name = "auto" if dtype is None else str(dtype)
    if name not in DTYPES:
        raise ModelLoadError(f"Unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}.")
    if name == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    if name != "float32" and device.type != "cuda":
        raise ModelLoadError(f"--dtype {name} needs a CUDA GPU; on {device.type} headprune runs float32 (half "
                             "precision on CPU is slower here and changes the numbers). Use --dtype float32 or auto.")
    return getattr(torch, name)


def _hash_files(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def weights_hash_of_module(model: nn.Module) -> str:
    """SHA-256 over the state dict's names, shapes and bytes (for in-memory models)."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _weight_files(folder: Path) -> tuple[list[Path], list[Path]]:
    safe = sorted(folder.glob("*.safetensors"))
    pickled = sorted(p for p in folder.glob("*.bin") if p.name.startswith("pytorch_model"))
    return safe, pickled


def _resolve(spec: str) -> tuple[str, Path | str]:
    if spec in catalog.names():
        entry = catalog.get(spec)
        if not (entry.folder() / "config.json").is_file():
            raise entry.not_prepared_error()
        return ("default" if spec == DEFAULT_ID else "prepared"), entry.folder()
    path = Path(spec).expanduser()
    if path.exists() or spec.startswith((".", "/", "~")) or os.sep in spec and spec.count("/") > 1:
        if not path.is_dir():
            raise ModelLoadError(f"Model folder {spec!r} does not exist or is not a folder. "
                                 "Give a folder holding config.json and weights, a hub id, or 'default'.")
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"Model folder {str(path)!r} has no config.json; it is not a Hugging Face "
                                 "model folder. Save one with model.save_pretrained(folder).")
        return "local", path
    if not _HUB_ID.match(spec):
        raise ModelLoadError(f"{spec!r} is neither an existing folder nor a valid hub id (like 'org/name'). "
                             "Check the spelling.")
    return "hub", spec


def load_model(spec: str, *, device: str | None = "cpu", allow_pickle: bool = False,
               attn_implementation: str = "eager", device_map: str | dict | None = None,
               dtype: str | None = "float32") -> LoadedModel:
    """Load ``spec`` (a prepared model's name such as 'default', a local folder, or a hub id) for head analysis.

    Args:
        device: 'cpu', 'cuda', or None for CUDA when present.
        allow_pickle: accept ``pytorch_model.bin`` weights (unpickling can run code; only for trusted files).
        attn_implementation: 'eager' gives attention maps; 'sdpa' is faster for benchmarks. A family
            without it (MPNet has eager only) gets its adapter's first ``attn_implementations``.
        device_map: spread the layers over devices with accelerate ('auto', 'balanced', or
            {module name: device}); ``device`` is then ignored and inputs go to the first layer's device.
        dtype: one of :data:`DTYPES` ('float32' by default; 'auto' = bfloat16 on a CUDA GPU, float32 on
            CPU); half precision is refused on CPU. The weights hash is of the files, whatever the dtype.
    """
    from transformers import AutoConfig, AutoTokenizer
    import transformers

    source, where = _resolve(spec)
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    if source in ("default", "prepared"):
        _check_prepared(spec, Path(where))
    offline = source == "hub" and not hub_probe.reachable()      # then only the local Hugging Face cache, at once
    local_only = source != "hub" or offline
    try:
        config = AutoConfig.from_pretrained(where, trust_remote_code=False, local_files_only=local_only)
    except (OSError, ValueError) as exc:
        if offline:
            raise ModelLoadError(
                f"{spec!r} is not in this machine's Hugging Face cache, and the hub cannot be reached from here "
                "(no network). Check the spelling of the id, or download the model on a machine with network "
                "and pass its folder.") from None
        hint = (" The Hugging Face hub could not be reached or has no such model; on an offline machine, "
                "download the model elsewhere and pass its folder." if source == "hub" else "")
        first = str(exc).splitlines()[0].rstrip(".")          # its own period would double ours
        raise ModelLoadError(f"Could not read the config of {spec!r}: {first}.{hint}") from None
    adapter = adapter_for(config.model_type)
    if attn_implementation not in adapter.attn_implementations:      # e.g. sdpa for MPNet: eager instead
        attn_implementation = adapter.attn_implementations[0]
    auto_cls = getattr(transformers, adapter.auto_class)
    if source != "hub":
        safe, pickled = _weight_files(Path(where))
        if not safe and not pickled:
            raise ModelLoadError(f"Model folder {str(where)!r} has no weights (*.safetensors or pytorch_model*.bin).")
        if not safe and not allow_pickle:
            raise ModelLoadError(
                f"Model folder {str(where)!r} has only pickle weights ({pickled[0].name}); loading them can run "
                "arbitrary code. Convert them to safetensors, or pass --allow-pickle if you trust the file.")
        check_weight_files(Path(where))          # a cut-off file or a missing shard: named, before loading
    kwargs = dict(trust_remote_code=False, attn_implementation=attn_implementation, dtype=torch_dtype,
                  use_safetensors=None if allow_pickle else True, local_files_only=local_only)
    removed = getattr(config, CONFIG_KEY, None) if not getattr(config, STOCK_KEY, False) else None
    if device_map is not None:
        if removed:
            raise ModelLoadError(f"Model {spec!r} was pruned by headprune; it loads on one device. Leave "
                                 "--device-map out (a pruned model is smaller: it may fit now).")
        kwargs["device_map"] = device_map
    try:
        if removed:
            model = _load_pruned(auto_cls, config, Path(where), attn_implementation)
        else:
            model = auto_cls.from_pretrained(where, config=config, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(where, local_files_only=local_only)
    except ModelLoadError:
        raise
    except (OSError, ValueError, RuntimeError, SafetensorError) as exc:
        why = _mismatch(auto_cls, config, Path(where)) if source != "hub" else None
        raise ModelLoadError(why or f"Could not load model {spec!r}: {str(exc).splitlines()[0]}") from None
    model.eval()
    if device_map is None:
        model.to(device=dev, dtype=torch_dtype)
    if source == "hub":
        weights_sha = weights_hash_of_module(model)
    else:
        safe, pickled = _weight_files(Path(where))
        weights_sha = _hash_files(safe or pickled)
    sites = find_sites(model)
    shortlist = None
    if source != "hub" and (Path(where) / SHORTLIST_FILE).is_file():
        fix = f"run `headprune prepare --model {spec} --force`" if source in ("default", "prepared") else \
            "copy the file again from where the model came"
        shortlist = read_shortlist(Path(where) / SHORTLIST_FILE, fix)
    return LoadedModel(model=model, tokenizer=tokenizer, model_id=spec if source != "local" else str(where),
                       source=source, task_type=adapter.task_type, arch=adapter.name,
                       weights_sha256=weights_sha, sites=sites, layout=layout_of(sites), shortlist=shortlist)


def _mismatch(auto_cls, config, folder: Path) -> str | None:
    """Why the weights in ``folder`` do not fit ``config`` (a tensor's shape), from a model built on the meta
    device (no memory, no weights); None when the shapes agree and the failure was something else."""
    try:
        with torch.device("meta"):
            model = auto_cls.from_config(config)
            if getattr(config, CONFIG_KEY, None) and not getattr(config, STOCK_KEY, False):
                restructure_for_loading(model, getattr(config, CONFIG_KEY))
        shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
        return explain_mismatch(shapes, folder)
    except (OSError, ValueError, RuntimeError):          # the diagnosis itself failed: keep the first error
        return None


def _check_prepared(name: str, folder: Path) -> None:
    """A prepared model must match the manifest `headprune prepare` wrote last (see :mod:`pruning_core.zoo`)."""
    import json

    what = "the embedded default" if name == DEFAULT_ID else f"the prepared model {name!r}"
    fix = f"run `{catalog.get(name).command()} --force`"
    manifest = folder / MANIFEST
    try:
        files = json.loads(manifest.read_text())["files"]
    except (OSError, ValueError, KeyError):
        raise CacheError(f"The folder of {what} is incomplete (no valid {manifest.name}); {fix}.") from None
    weights = {n: sha for n, sha in files.items() if n.endswith(".safetensors")}
    for file_name, sha in weights.items():
        if not (folder / file_name).is_file() or _hash_files([folder / file_name]) != sha:
            raise CacheError(f"The weights file {file_name} of {what} is missing or corrupt (SHA-256 differs "
                             f"from its manifest); {fix}.")


def _load_pruned(auto_cls, config, folder: Path, attn_implementation: str) -> nn.Module:
    from safetensors.torch import load_file

    config._attn_implementation = attn_implementation
    model = auto_cls.from_config(config, attn_implementation=attn_implementation)
    restructure_for_loading(model, getattr(config, CONFIG_KEY))
    state = {}
    for f in sorted(folder.glob("*.safetensors")):
        state.update(load_file(str(f)))
    if not state:
        raise ModelLoadError(f"Pruned model folder {str(folder)!r} has no *.safetensors weights.")
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    missing, unexpected = model.load_state_dict(state, strict=False)
    # tied weights (embeddings shared with the LM head) are saved once: a missing name is fine
    # when another name of the same tensor was loaded
    names_by_ptr: dict[int, list[str]] = {}
    params = dict(model.named_parameters(remove_duplicate=False))
    for name, p in params.items():
        names_by_ptr.setdefault(p.data_ptr(), []).append(name)
    missing = [m for m in missing
               if not (m in params and any(o in state for o in names_by_ptr[params[m].data_ptr()]))]
    # buffers that the model computes itself (Marian's sinusoidal positions) are never saved
    ignorable = [re.compile(p) for p in (getattr(model, "_keys_to_ignore_on_load_missing", None) or [])]
    missing = [m for m in missing if not any(p.search(m) for p in ignorable)]
    if missing or unexpected:
        raise ModelLoadError(f"Pruned model folder {str(folder)!r} does not match its config: missing "
                             f"{missing[:3]}, unexpected {unexpected[:3]}. Re-create it with `headprune prune`.")
    return model


def save_pruned(model: nn.Module, tokenizer, folder: str | Path, stock: bool = True,
                shortlist: Shortlist | None = None) -> Path:
    """Save a (pruned) model and its tokenizer so ``load_model(folder)`` restores it exactly; ``shortlist``
    (the source model's ``LoadedModel.shortlist``) is copied beside them, so the saved model decodes as it did.

    With ``stock`` (the default) and a shape a stock config can express (:func:`pruning.stock_shape`:
    every layer of a grouped-query decoder keeps the same heads), the saved config carries the pruned
    head counts and ``head_dim``, so ``AutoModelFor...from_pretrained(folder)`` loads it without headprune;
    the removed heads stay listed under ``headprune_pruned_heads`` as a record. ``model`` is left as it was.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fields = stock_shape(model).fields if stock and getattr(model.config, CONFIG_KEY, None) else {}
    original = model.config
    if fields:
        config = copy.deepcopy(original)
        for name, value in fields.items():
            setattr(config, name, value)
        setattr(config, STOCK_KEY, True)
        model.config = config
    try:
        model.save_pretrained(folder, safe_serialization=True)
    finally:
        model.config = original
    tokenizer.save_pretrained(folder)
    if shortlist is not None:
        shutil.copyfile(shortlist.path, folder / SHORTLIST_FILE)
    return folder
