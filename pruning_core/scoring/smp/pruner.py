"""The SMP pruner: a small convolutional network that reads each head's attention map (Zhang et al. 2020).

Every head's attention map from the frozen pre-trained model goes through the same network, which gives one
logit per head (averaged over a batch). Nothing in it depends on the model's size: each map is cropped to the
real tokens and pooled to ``map_size x map_size``, heads are items of a batch, and the only positional input is
the layer's relative depth, so a pruner transfers to any model of its family. Maps are recomputed from the
captured query and key projections (scoped hooks) as ``softmax(q k^T / sqrt(head_dim) + padding mask)``: equal
to eager attention (tested), and they work under ``sdpa`` and on physically pruned models. Saved as
``pruner.safetensors`` plus ``pruner.json`` (``headprune.smp_pruner/1``: config, family, the weights' SHA-256,
provenance with the training settings and loss curve).
"""
from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from pruning_core.core.io.codec import SMP_PRUNER_FORMAT, JsonRecord, check_format
from pruning_core.core.errors import FormatError, UnsupportedArchitectureError
from pruning_core.core.heads import HeadMask, HeadScores
from pruning_core.core.io.storage import atomic_path, sha256_file, write_json

WEIGHTS_FILE = "pruner.safetensors"
CONFIG_FILE = "pruner.json"
# SMP reads single-sentence self-attention maps, so it applies to encoder-only families
SUPPORTED_ARCHS: tuple[str, ...] = ("bert-encoder", "distilbert")


@dataclass(frozen=True)
class PrunerConfig(JsonRecord):
    """The shape of the pruner network (it does not depend on the model it scores)."""

    _malformed = "The pruner config is incomplete or malformed"

    map_size: int = 32                        # every attention map is pooled to map_size x map_size
    channels: tuple[int, ...] = (8, 16, 16)   # conv channels; each conv halves the grid (stride 2)
    hidden: int = 32                          # width of the MLP after global pooling
    depth_feature: bool = True                # feed the layer's relative depth (0 = first, 1 = last)

    def __post_init__(self) -> None:
        if self.map_size < 4:
            raise FormatError(f"map_size must be at least 4, got {self.map_size}.")
        if not self.channels or any(c < 1 for c in self.channels):
            raise FormatError(f"channels must be positive numbers, got {list(self.channels)}.")
        if self.hidden < 1:
            raise FormatError(f"hidden must be at least 1, got {self.hidden}.")



class SMPPruner(nn.Module):
    """Attention map of one head -> one logit (larger = keep).

    The last layer starts at zero, so an untrained pruner gives every head the same logit: its
    sampled masks are uniformly random, which makes "untrained" the random-pruning baseline.
    """

    def __init__(self, config: PrunerConfig = PrunerConfig()) -> None:
        super().__init__()
        self.config = config
        convs, c_in = [], 1
        for c_out in config.channels:
            convs += [nn.Conv2d(c_in, c_out, kernel_size=3, stride=2, padding=1), nn.ReLU()]
            c_in = c_out
        self.convs = nn.Sequential(*convs)
        extra = 1 if config.depth_feature else 0
        self.mlp = nn.Sequential(nn.Linear(c_in + extra, config.hidden), nn.ReLU(), nn.Linear(config.hidden, 1))
        nn.init.zeros_(self.mlp[-1].weight)
        nn.init.zeros_(self.mlp[-1].bias)

    def forward(self, maps: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
        """Logits of ``N`` heads.

        Args:
            maps: ``[N, S, S]`` pooled attention maps (rows = queries), each row rescaled to mean 1.
            depth: ``[N]`` relative depth of each head's layer, in [0, 1].
        Returns:
            ``[N]`` logits.
        """
        x = self.convs(maps.unsqueeze(1))                  # [N, C, S', S']
        x = x.mean(dim=(2, 3))                             # [N, C]
        if self.config.depth_feature:
            x = torch.cat([x, depth.unsqueeze(1).to(x.dtype)], dim=1)   # [N, C + 1]
        return self.mlp(x).squeeze(1)                      # [N]


# -- attention maps --------------------------------------------------------------------------------

def family_of(loaded) -> str:
    """The architecture adapter's name for ``loaded`` (e.g. ``bert-encoder`` for BERT and RoBERTa)."""
    from pruning_core.modeling.architectures import adapter_for
    return adapter_for(loaded.config.model_type).name


def check_family(loaded) -> None:
    """Raise unless SMP applies to ``loaded``'s architecture (encoder-only self-attention)."""
    family = family_of(loaded)
    if family not in SUPPORTED_ARCHS:
        raise UnsupportedArchitectureError(
            f"SMP reads single-sentence self-attention maps, so it supports encoder-only models "
            f"({', '.join(SUPPORTED_ARCHS)}); {loaded.model_id!r} is a {family!r} model.")
    pos = getattr(loaded.config, "position_embedding_type", "absolute")
    if pos not in (None, "absolute"):
        raise UnsupportedArchitectureError(
            f"{loaded.model_id!r} uses position_embedding_type={pos!r}; SMP recomputes attention maps from "
            "queries and keys and supports only absolute position embeddings.")


# the attention captures open in this thread
_READING: ContextVar[frozenset] = ContextVar("headprune_smp_capture", default=frozenset())


@contextlib.contextmanager
def capture_attention(loaded, attention_mask: torch.Tensor | None) -> Iterator[list[torch.Tensor | None]]:
    """Inside the block, a forward pass of ``loaded.model`` fills the yielded list, one entry per site.

    Entry ``i`` is ``[B, H_i, T, T]``: the attention probabilities of site ``i`` (rows = queries,
    padding keys get 0), or ``None`` for a site with no heads. ``attention_mask`` is the ``[B, T]``
    mask of that forward pass (1 = real token). The hooks read this thread's passes only and are removed on exit,
    also after an error.
    """
    sites = loaded.sites
    maps: list[torch.Tensor | None] = [None] * len(sites)
    queries: dict[int, torch.Tensor] = {}

    token = object()                  # the hooks read this thread's passes only (others may run the shared model)

    def q_hook(i):
        def hook(module, args, output):
            if token in _READING.get():
                queries[i] = output                              # [B, T, H * d]
        return hook

    def k_hook(i):
        def hook(module, args, output):
            if token not in _READING.get():
                return
            q, d = queries.pop(i, None), sites[i].head_dim
            if q is None or output.shape[-1] == 0 or d == 0:
                return
            b, t = output.shape[0], output.shape[1]
            qh = q.reshape(b, t, -1, d).transpose(1, 2)          # [B, H, T, d]
            kh = output.reshape(b, t, -1, d).transpose(1, 2)     # [B, H, T, d]
            logits = qh @ kh.transpose(-1, -2) / math.sqrt(d)    # [B, H, T, T]
            if attention_mask is not None:
                pad = attention_mask[:, None, None, :t].to(logits.device) == 0
                logits = logits.masked_fill(pad, torch.finfo(logits.dtype).min)
            maps[i] = logits.softmax(-1)
        return hook

    handles = []
    reset = _READING.set(_READING.get() | {token})
    try:
        for i, s in enumerate(sites):
            handles.append(s.q.register_forward_hook(q_hook(i)))
            handles.append(s.k.register_forward_hook(k_hook(i)))
        yield maps
    finally:
        _READING.reset(reset)
        for h in handles:
            h.remove()


def pool_maps(maps: Sequence[torch.Tensor | None], attention_mask: torch.Tensor, size: int) -> torch.Tensor:
    """Crop every example's maps to its real tokens and pool them to ``size x size``.

    Args:
        maps: per site ``[B, H_i, T, T]`` (or None for a site without heads).
        attention_mask: ``[B, T]``, 1 = real token, 0 = padding.
    Returns:
        ``[B, sum_i H_i, size, size]``; each pooled row (one block of queries) is rescaled to mean 1,
        so maps of short and long inputs are on the same scale.
    """
    present = [m for m in maps if m is not None]
    if not present:
        return attention_mask.new_zeros((attention_mask.shape[0], 0, size, size), dtype=torch.float32)
    stacked = torch.cat(present, dim=1).float()           # [B, sum H, T, T]
    lengths = attention_mask.sum(1).tolist()
    out = []
    for b, n in enumerate(lengths):
        n = max(int(n), 1)
        m = stacked[b, :, :n, :n]                          # [sum H, n, n]
        pooled = F.adaptive_avg_pool2d(m.unsqueeze(0), size).squeeze(0)   # [sum H, size, size]
        pooled = pooled / pooled.sum(-1, keepdim=True).clamp_min(1e-12) * size
        out.append(pooled)
    return torch.stack(out)                                # [B, sum H, size, size]


def relative_depths(n_layers: int) -> list[float]:
    """Layer ``l`` of ``n_layers`` -> ``l / (n_layers - 1)`` (a single layer -> 0)."""
    return [l / (n_layers - 1) if n_layers > 1 else 0.0 for l in range(n_layers)]


def head_logits(pruner: SMPPruner, maps: Sequence[torch.Tensor | None], attention_mask: torch.Tensor,
                reduce: bool = True) -> list[torch.Tensor]:
    """The pruner's logits per site, from one batch's attention maps.

    Args:
        maps: per site ``[B, H_i, T, T]`` or None (as captured by :func:`capture_attention`).
        attention_mask: ``[B, T]``, 1 = real token.
        reduce: average over the batch (SMP's per-batch score) or keep one row per example.
    Returns:
        per site ``[H_i]`` (``reduce``) or ``[B, H_i]``; a site without heads gives an empty tensor.
    """
    counts = [0 if m is None else m.shape[1] for m in maps]
    device = next(pruner.parameters()).device
    pooled = pool_maps(maps, attention_mask, pruner.config.map_size).to(device)   # [B, sum H, S, S]
    b, n = pooled.shape[0], pooled.shape[1]
    depth_per_site = relative_depths(len(maps))
    depth = torch.tensor([depth_per_site[i] for i, c in enumerate(counts) for _ in range(c)],
                         dtype=torch.float32, device=device)                       # [sum H]
    if n == 0:
        logits = pooled.new_zeros(b, 0)
    else:
        logits = pruner(pooled.reshape(b * n, *pooled.shape[2:]), depth.repeat(b)).reshape(b, n)  # [B, sum H]
    if reduce:
        logits = logits.mean(0)                            # [sum H]
    return list(torch.split(logits, counts, dim=-1))


# -- scores and masks ------------------------------------------------------------------------------

def scores_from_logits(loaded, logits: list[torch.Tensor], mask: HeadMask | None = None) -> HeadScores:
    """Per-layer softmax of the mean logits over the heads kept by ``mask``; removed heads get 0."""
    kinds: dict[str, list[list[float]]] = {}
    for site, lg in zip(loaded.sites, logits):
        lg = lg.float().cpu()
        if mask is not None:
            keep = torch.tensor(mask.kinds[site.kind][site.layer], dtype=torch.bool)
            probs = torch.zeros_like(lg)
            if keep.any():
                probs[keep] = torch.softmax(lg[keep], -1)
        else:
            probs = torch.softmax(lg, -1) if lg.numel() else lg
        kinds.setdefault(site.kind, []).append(probs.tolist())
    return HeadScores.from_lists(kinds)


# -- save / load -----------------------------------------------------------------------------------

@dataclass
class PrunerFile:
    """A pruner with what it was trained for (the contents of ``pruner.json``)."""

    pruner: SMPPruner
    arch: str                                   # adapter family it was trained on, e.g. "bert-encoder"
    model_type: str                             # config.model_type of the base model, e.g. "bert"
    base_layout: dict                           # heads per layer of the base model, for the record
    hidden_size: int | None
    provenance: dict = field(default_factory=dict)   # base model, weights hash, sources, settings, curve
    path: Path | None = None

    def check_applies_to(self, loaded) -> None:
        """Raise FormatError if ``loaded`` is not of the family this pruner was trained on.

        Layer count, head count and hidden size may differ (see the module docstring); the family
        may not: attention maps of another architecture family look different.
        """
        check_family(loaded)
        if family_of(loaded) != self.arch:
            where = f" ({self.path})" if self.path else ""
            raise FormatError(
                f"This SMP pruner{where} was trained on a {self.arch!r} model ({self.model_type}), but "
                f"{loaded.model_id!r} is a {family_of(loaded)!r} model ({loaded.config.model_type}). Train a pruner for "
                f"this family with `headprune smp train --model MODEL`.")


@dataclass(frozen=True, kw_only=True)
class PrunerRecord(JsonRecord):
    """What ``pruner.json`` holds: the network, what it was trained for, and its weights' file and SHA-256."""

    format: str = field(default=SMP_PRUNER_FORMAT, init=False)
    config: PrunerConfig = field(metadata={"decode": PrunerConfig.from_json})   # its own errors
    arch: str
    model_type: str
    base_layout: dict = field(default_factory=dict)
    hidden_size: int | None = None
    weights_file: str = WEIGHTS_FILE
    weights_sha256: str
    provenance: dict = field(default_factory=dict)


def save_pruner(pfile: PrunerFile, folder: str | Path) -> Path:
    """Write ``pruner.safetensors`` then ``pruner.json`` (last, atomically) into ``folder``."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CONFIG_FILE).unlink(missing_ok=True)       # without it the folder reads as "no pruner"
    state = {k: v.detach().cpu().contiguous() for k, v in pfile.pruner.state_dict().items()}
    with atomic_path(folder / WEIGHTS_FILE) as tmp:
        save_file(state, str(tmp), metadata={"format": SMP_PRUNER_FORMAT})
    record = PrunerRecord(config=pfile.pruner.config, arch=pfile.arch, model_type=pfile.model_type,
                          base_layout=pfile.base_layout, hidden_size=pfile.hidden_size,
                          weights_sha256=sha256_file(folder / WEIGHTS_FILE), provenance=pfile.provenance)
    write_json(folder / CONFIG_FILE, record.to_json())
    pfile.path = folder
    return folder


def _config_path(path: str | Path) -> Path:
    path = Path(path).expanduser()
    return path / CONFIG_FILE if path.is_dir() or path.suffix != ".json" else path


def load_pruner(path: str | Path, device: str | torch.device = "cpu") -> PrunerFile:
    """Load a pruner folder (or its ``pruner.json``); a missing, corrupt or foreign file is a FormatError."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    cfg_path = _config_path(path)
    where = f"SMP pruner {str(cfg_path.parent)!r}"
    redo = "Train it again with `headprune smp train --force` (or pass another --pruner)."
    try:
        data = json.loads(cfg_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FormatError(f"{where} has no {CONFIG_FILE}. {redo}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"{where}: {CONFIG_FILE} is not valid JSON ({exc}). {redo}") from None
    try:
        check_format(data, SMP_PRUNER_FORMAT, where)
    except FormatError as exc:
        raise FormatError(f"{exc} {redo}") from None
    for key in ("config", "arch", "model_type", "weights_sha256"):
        if key not in data:
            raise FormatError(f"{where}: {CONFIG_FILE} lacks {key!r}. {redo}")
    try:
        record = PrunerRecord.from_json(data)
    except FormatError as exc:
        raise FormatError(f"{where}: {exc} {redo}") from None
    config = record.config
    weights = cfg_path.parent / record.weights_file
    if not weights.is_file():
        raise FormatError(f"{where}: the weights file {weights.name} is missing. {redo}")
    if sha256_file(weights) != record.weights_sha256:
        raise FormatError(f"{where}: {weights.name} does not match the SHA-256 recorded in {CONFIG_FILE} "
                          f"(corrupt or replaced). {redo}")
    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as exc:
        raise FormatError(f"{where}: {weights.name} is not a readable safetensors file ({exc}). {redo}") from None
    pruner = SMPPruner(config)
    expected = {k: tuple(v.shape) for k, v in pruner.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    if expected != got:
        diff = sorted(set(expected.items()) ^ set(got.items()))[:3]
        raise FormatError(f"{where}: the weights do not fit the network described in {CONFIG_FILE} "
                          f"(first differences: {diff}). {redo}")
    pruner.load_state_dict(state)
    pruner.to(device).eval()
    return PrunerFile(pruner=pruner, arch=record.arch, model_type=record.model_type, base_layout=record.base_layout,
                      hidden_size=record.hidden_size, provenance=record.provenance, path=cfg_path.parent)
