"""KV-cache head policies: per key/value head of a decoder, keep the whole cache (*full*) or only the first
``sink`` and the last ``window`` tokens (*streaming*; DuoAttention, Xiao et al. ICLR 2025).

A streaming head's queries (:func:`~pruning_core.modeling.architectures.slicing.kv_groups`) at position ``t`` attend only to
``[0, sink) ∪ (t - window, t]``. :func:`applied` (forward passes): a scoped, per-call pre-hook has each attention
compute its streaming heads over those keys only (:mod:`.kv_banded`), or, for attention weights, adds a
per-query-head mask; an all-full policy is the plain model bit for bit. Per-head windows: budgets (:mod:`.kv_budgets`).
Generation's cache under a policy: :mod:`.kv_cache`. :func:`kv_bytes`: layers x kv heads x 2 x
head_dim x dtype bytes x kept tokens. Policies are frozen values written as ``headprune.kv_policy/1``.
"""
from __future__ import annotations

import contextlib
import copy
import random
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch

from pruning_core.core.io.codec import KV_POLICY_FORMAT
from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadScores, group_scores
from pruning_core.modeling.kv import kv_banded
from pruning_core.modeling.architectures.slicing import kv_groups, kv_groups_of
from pruning_core.modeling.kv.kv_banded import Band
from pruning_core.modeling.masking import shared_hooks

KIND = "decoder_self"
SUPPORTED_ATTENTION = ("eager", "sdpa")
MAX_TOKENS = 2 ** 31 - 1          # sink and window fit a 32-bit position (torch compares them with positions)


@dataclass(frozen=True)
class KVPolicy:
    """Which key/value heads stream: ``streaming[layer][kv_head]`` (True = keep sink + window only).

    sink: first tokens every streaming head keeps (attention sinks); window: last tokens it keeps.
    source: how the policy was chosen (method, scores file, fraction, seed), written with it.
    """

    streaming: tuple[tuple[bool, ...], ...]
    sink: int = 128
    window: int = 256
    source: dict = field(default_factory=dict, compare=False, hash=False)
    # per-head budgets: each streaming head's own window ([layer][kv head]; 0 for full heads), None: ``window``
    windows: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.sink <= MAX_TOKENS or not 1 <= self.window <= MAX_TOKENS:
            raise FormatError(f"A KV policy needs sink >= 0 and window >= 1 tokens (at most {MAX_TOKENS:,}), got "
                              f"sink {self.sink}, window {self.window}. Choose other sizes.")
        if self.windows is not None:
            if tuple(len(r) for r in self.windows) != self.kv_heads:
                raise FormatError(f"The KV policy's windows have {[len(r) for r in self.windows]} heads per layer, "
                                  f"its streaming rows {list(self.kv_heads)}.")
            bad = [(l, j, w) for l, row in enumerate(self.windows) for j, w in enumerate(row)
                   if not (1 if self.streaming[l][j] else 0) <= w <= MAX_TOKENS]
            if bad:
                raise FormatError(f"Streaming heads need a window of 1 to {MAX_TOKENS:,} tokens (full heads 0 or more); "
                                  f"(layer, head, window) {bad[:3]}. Choose other budgets.")

    def window_of(self, layer: int, head: int) -> int:
        """The last tokens streaming head ``(layer, head)`` keeps (its own budget's window, else ``window``)."""
        return self.window if self.windows is None else self.windows[layer][head]

    def kept(self, layer: int, head: int, context: int) -> int:
        """Cache entries head ``(layer, head)`` holds after ``context`` tokens."""
        if not self.streaming[layer][head]:
            return context
        return min(context, self.sink + self.window_of(layer, head))

    @classmethod
    def full(cls, kv_heads: Sequence[int], sink: int = 128, window: int = 256) -> "KVPolicy":
        """Every head keeps its whole cache (``kv_heads``: key/value heads per layer)."""
        return cls(tuple((False,) * n for n in kv_heads), sink, window, {"method": "full"})

    @classmethod
    def all_streaming(cls, kv_heads: Sequence[int], sink: int = 128, window: int = 256) -> "KVPolicy":
        """Every head keeps only its sink and window (StreamingLLM); ``kv_heads``: key/value heads per layer."""
        return cls(tuple((True,) * n for n in kv_heads), sink, window, {"method": "all", "fraction": 1.0})

    @property
    def kv_heads(self) -> tuple[int, ...]:
        return tuple(len(row) for row in self.streaming)

    @property
    def n_streaming(self) -> int:
        return sum(map(sum, self.streaming))

    @property
    def n_heads(self) -> int:
        return sum(self.kv_heads)

    def kept_tokens(self, context: int, streaming: bool) -> int:
        """Cache entries a head with the policy's common window holds after ``context`` tokens."""
        return min(context, self.sink + self.window) if streaming else context

    def kept_entries(self, context: int) -> tuple[tuple[int, ...], ...]:
        """Cache entries per head ``[layer][kv head]`` after ``context`` tokens."""
        return tuple(tuple(self.kept(l, j, context) for j in range(n)) for l, n in enumerate(self.kv_heads))

    def check_fits(self, loaded) -> None:
        """Raise unless ``loaded``'s decoder self-attention has this policy's key/value heads per layer."""
        sites = [s for s in loaded.sites if s.kind == KIND]
        if not sites:
            raise FormatError(f"Model {loaded.model_id!r} has no decoder self-attention: a KV policy is for "
                              "decoder language models (llama, qwen2, mistral, gemma).")
        have = tuple(s.num_kv_heads for s in sites)
        if have != self.kv_heads:
            raise FormatError(f"The KV policy has {list(self.kv_heads)} key/value heads per layer, model "
                              f"{loaded.model_id!r} has {list(have)}. Write the policy for this model "
                              "(`headprune kv-policy SCORES --model MODEL`).")
        impl = getattr(loaded.model.config, "_attn_implementation", "eager")
        if impl not in SUPPORTED_ATTENTION:
            raise FormatError(f"A KV policy runs with eager or sdpa attention, model {loaded.model_id!r} uses "
                              f"{impl!r}. Load it with attn_implementation='eager'.")

    def to_json(self, provenance: dict | None = None) -> dict:
        # by hand: booleans written as 0/1 lists, derived counts, the provenance passed in
        data = {"format": KV_POLICY_FORMAT, "sink": self.sink, "window": self.window,
                "streaming": [[int(x) for x in row] for row in self.streaming], "source": self.source,
                "n_streaming": self.n_streaming, "n_heads": self.n_heads, "provenance": provenance or {}}
        if self.windows is not None:
            data["windows"] = [list(row) for row in self.windows]
        return data

    @classmethod
    def from_json(cls, data: dict, where: str = "the KV policy") -> "KVPolicy":
        """Read a ``headprune.kv_policy/1`` document. Strict: streaming flags are exactly 0 or 1, sink and window
        whole numbers (no true/false, fractions or infinity)."""
        fix = "Write it again with `headprune kv-policy`."
        if not isinstance(data, dict) or data.get("format") != KV_POLICY_FORMAT:
            got = str(data.get("format"))[:40] if isinstance(data, dict) else None
            raise FormatError(f"{where} is not a {KV_POLICY_FORMAT} file (format {got!r}). {fix}")
        rows = data.get("streaming")
        if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
            raise FormatError(f"{where} has no 'streaming' list of rows (one 0/1 per key/value head). {fix}")
        for layer, row in enumerate(rows):
            for head, x in enumerate(row):
                if isinstance(x, bool) or not isinstance(x, int) or x not in (0, 1):
                    raise FormatError(f"{where}: streaming flags must be 0 (full) or 1 (streaming); layer {layer} "
                                      f"key/value head {head} is {str(x)[:40]!r}. {fix}")
        sizes = {}
        for key in ("sink", "window"):
            value = data.get(key)
            if isinstance(value, bool) or not isinstance(value, int):
                raise FormatError(f"{where} has {key} {str(value)[:40]!r}, not a whole number of tokens. {fix}")
            sizes[key] = value
        source = data.get("source") or {}
        if not isinstance(source, dict):
            raise FormatError(f"{where} has a 'source' that is not an object. {fix}")
        windows = data.get("windows")
        if windows is not None and (not isinstance(windows, list) or not all(
                isinstance(r, list) and all(isinstance(w, int) and not isinstance(w, bool) for w in r) for r in windows)):
            raise FormatError(f"{where} has 'windows' that are not rows of whole numbers of tokens. {fix}")
        try:
            return cls(tuple(tuple(bool(x) for x in row) for row in rows), sizes["sink"], sizes["window"], dict(source),
                       None if windows is None else tuple(tuple(row) for row in windows))
        except FormatError as exc:
            raise FormatError(f"{where}: {exc}") from None


def load_policy(path) -> KVPolicy:
    from pruning_core.evaluation.results import read_json
    return KVPolicy.from_json(read_json(path), where=f"KV policy file {str(path)!r}")


# -- choosing heads -------------------------------------------------------------------------------------

def _n_streaming(total: int, fraction: float) -> int:
    if not 0.0 <= fraction <= 1.0:
        raise FormatError(f"The streaming fraction must be between 0 and 1, got {fraction}.")
    return round(fraction * total)


def _policy(kv_heads: Sequence[int], chosen: set[tuple[int, int]], sink: int, window: int, source: dict) -> KVPolicy:
    return KVPolicy(tuple(tuple((l, j) in chosen for j in range(n)) for l, n in enumerate(kv_heads)), sink, window,
                    source)


def from_scores(scores: HeadScores, groups, fraction: float, *, sink: int = 128, window: int = 256,
                source: dict | None = None) -> KVPolicy:
    """Stream the ``fraction`` of key/value heads whose query heads score lowest, summed per group, over all
    layers (ties broken by position). ``groups``: :func:`~pruning_core.modeling.architectures.slicing.kv_groups_of` of the model."""
    per_group = group_scores(scores, {KIND: groups[KIND]}).kinds[KIND]        # [layers][kv heads]
    heads = [(l, j) for l, row in enumerate(per_group) for j in range(len(row))]
    heads.sort(key=lambda h: per_group[h[0]][h[1]])
    chosen = set(heads[:_n_streaming(len(heads), fraction)])
    return _policy([len(r) for r in per_group], chosen, sink, window,
                   {"method": "scores", "fraction": fraction, **(source or {})})


def random_policy(kv_heads: Sequence[int], fraction: float, seed: int, *, sink: int = 128,
                  window: int = 256) -> KVPolicy:
    """Stream a random ``fraction`` of the key/value heads (seeded): the contrast to a score-chosen policy."""
    heads = [(l, j) for l, n in enumerate(kv_heads) for j in range(n)]
    chosen = set(random.Random(seed).sample(heads, _n_streaming(len(heads), fraction)))
    return _policy(kv_heads, chosen, sink, window, {"method": "random", "fraction": fraction, "seed": seed})


def kv_heads_of(loaded) -> tuple[int, ...]:
    return tuple(s.num_kv_heads for s in loaded.sites if s.kind == KIND)


def groups_of(loaded):
    return kv_groups_of([s for s in loaded.sites if s.kind == KIND])


# -- memory ---------------------------------------------------------------------------------------------

def kv_bytes(policy: KVPolicy, head_dim: int, context: int, dtype_bytes: int) -> int:
    """Bytes of keys and values the policy keeps after ``context`` tokens (one sequence)."""
    tokens = sum(map(sum, policy.kept_entries(context)))
    return 2 * head_dim * dtype_bytes * tokens


def memory_report(policy: KVPolicy, loaded, context: int) -> dict:
    """The policy's KV memory at ``context`` tokens beside the full cache's, from the model's shapes."""
    sites = [s for s in loaded.sites if s.kind == KIND]
    head_dim = sites[0].head_dim
    dtype_bytes = torch.finfo(loaded.dtype).bits // 8
    full = KVPolicy.full(policy.kv_heads, policy.sink, policy.window)
    kept, whole = kv_bytes(policy, head_dim, context, dtype_bytes), kv_bytes(full, head_dim, context, dtype_bytes)
    return {"context": context, "kv_bytes": kept, "full_kv_bytes": whole, "ratio": whole / kept if kept else None,
            "streaming_kv_heads": policy.n_streaming, "kv_heads": policy.n_heads, "head_dim": head_dim,
            "dtype_bytes": dtype_bytes, "sink": policy.sink, "window": policy.window}


# -- the forward pass: sink-and-window attention, or per-head masks -------------------------------------

# id(attention module) -> (window of each query head [H] long, 0 = full; sink; the banded split or None)
_ACTIVE: ContextVar[dict[int, tuple[torch.Tensor, int, "Band | None"]] | None] = ContextVar("headprune_kv_policy",
                                                                                        default=None)
_POLICY: ContextVar["KVPolicy | None"] = ContextVar("headprune_kv_policy_value", default=None)
# the masks of the forward pass under way: every layer gets the same model mask and sizes, and layers with the same
# streaming heads share one mask; a new model mask or new sizes start afresh
_MASKS: ContextVar[dict | None] = ContextVar("headprune_kv_policy_masks", default=None)


def active_policy() -> "KVPolicy | None":
    """The policy of the innermost :func:`applied` block of this thread, or None."""
    return _POLICY.get()


def _policy_mask(windows: torch.Tensor, sink: int, past: int, queries: int, batch: int,
                 mask: torch.Tensor | None, device) -> torch.Tensor:
    """The attention mask of a layer whose query heads keep ``windows`` ``[H]`` last tokens (0: the whole cache):
    the model's ``mask`` (None: causal) for the full heads; for a streaming one also ``k < sink`` or
    ``k > t - window`` (query ``t``, key ``k``). ``[B, H, Q, K]``, or ``[B, 1, Q, K]`` when every head streams with
    one window. Within one forward pass each window's restricted mask is built once and each distinct head
    pattern's mask once (:data:`_MASKS`)."""
    memo = _MASKS.get()
    sizes = (past, queries, batch, str(device), sink)
    if memo is None:
        memo = {}
    elif memo.get("mask") is not mask or memo.get("sizes") != sizes:
        memo.clear()
        memo.update(mask=mask, sizes=sizes)              # holding the mask keeps its identity unique
    pattern = windows.numpy().tobytes()
    if pattern in memo:
        return memo[pattern]
    q = torch.arange(past, past + queries, device=device)[:, None]                     # [Q, 1]
    k = torch.arange(past + queries, device=device)[None, :]                             # [1, K]
    if "full" not in memo:
        memo["full"] = (k <= q)[None, None] if mask is None else mask                    # [B or 1, 1, Q, K]

    def streamed(window: int) -> torch.Tensor:
        if ("window", window) not in memo:
            band = (k < sink) | (k > q - window)                                         # [Q, K]
            full = memo["full"]
            memo["window", window] = (full & band if full.dtype == torch.bool
                                      else torch.where(band, full, torch.finfo(full.dtype).min))
        return memo["window", window]

    kinds = sorted(set(windows.tolist()))
    if len(kinds) == 1 and kinds[0] > 0:
        new = streamed(kinds[0])
    else:
        new = memo["full"]
        for w in kinds:
            if w > 0:
                new = torch.where((windows == w).to(device)[None, :, None, None], streamed(w), new)  # [B|1, H, Q, K]
    new = new.expand(batch, -1, -1, -1)
    memo[pattern] = new
    return new


def _hook(module, args: tuple, kwargs: dict):
    active = _ACTIVE.get()
    entry = active.get(id(module)) if active else None
    if entry is None:
        return None
    windows, sink, band = entry
    hidden = args[0] if args else kwargs["hidden_states"]                               # [B, Q, hidden]
    batch, queries = hidden.shape[0], hidden.shape[1]
    cache = kwargs.get("past_key_values")
    past = int(cache.get_seq_length(module.layer_idx)) if cache is not None else 0
    mask = kwargs.get("attention_mask")
    if mask is not None and (mask.shape[-1] != past + queries or mask.shape[-2] != queries):
        raise FormatError(f"The attention mask has shape {tuple(mask.shape)}, expected [..., {queries}, "
                          f"{past + queries}]: a KV policy needs a cache that counts every token "
                          "(kv_cache.new_cache) and no left padding.")
    if band is not None and not kwargs.get("output_attentions") and not module.training:
        return args, {**kwargs, "kv_band": band}          # computed over sink and window only (kv_banded)
    new = _policy_mask(windows, sink, past, queries, batch, mask, hidden.device)
    return args, {**kwargs, "attention_mask": new}


def _query_windows(site, policy: KVPolicy, layer: int) -> torch.Tensor:
    out = torch.zeros(site.num_heads, dtype=torch.long)
    for j, group in enumerate(kv_groups(site)):
        if policy.streaming[layer][j]:
            out[group] = policy.window_of(layer, j)
    return out


def _band(site, policy: KVPolicy, layer: int) -> Band | None:
    """The banded split of ``site``'s heads, or None when its groups are not transformers' uniform ones (a pruned
    layer of uneven groups runs the mask)."""
    groups = kv_groups(site)
    g = site.num_heads // max(1, site.num_kv_heads)
    if groups != [list(range(j * g, (j + 1) * g)) for j in range(site.num_kv_heads)]:
        return None
    row = policy.streaming[layer]
    streams: dict[int, list[int]] = {}
    for j, s in enumerate(row):
        if s:
            streams.setdefault(policy.window_of(layer, j), []).append(j)
    return Band(tuple(j for j, s in enumerate(row) if not s), tuple((w, tuple(h)) for w, h in sorted(streams.items())),
                policy.sink, g)


class _Pointed:
    """A handle that points an attention module at :data:`kv_banded.NAME` until ``remove()``: its own ``config``
    becomes a copy naming the banded function, which runs the module's previous implementation for calls
    without a band (other threads, attention weights)."""

    def __init__(self, module) -> None:
        self.module, self.config = module, module.config
        pointed = copy.copy(module.config)
        pointed._attn_implementation_internal = kv_banded.NAME
        kv_banded._BASE[id(module)] = module.config._attn_implementation
        module.config = pointed

    def remove(self) -> None:
        self.module.config = self.config
        kv_banded._BASE.pop(id(self.module), None)


def window_sizes(policy: KVPolicy) -> set[int]:
    """The distinct windows of ``policy``'s streaming heads."""
    return {policy.window_of(l, j) for l, row in enumerate(policy.streaming) for j, s in enumerate(row) if s}


@contextlib.contextmanager
def applied(loaded, policy: KVPolicy | None, *, banded: bool = True) -> Iterator[None]:
    """Run ``loaded.model`` under ``policy`` inside the block, for this thread only (None: a no-op).

    banded: streaming heads attend over their sink and window keys only (:mod:`.kv_banded`; equal to the mask
    within float rounding, and faster); False, a pass that asks for attention weights, or a policy with more window
    sizes than :data:`.kv_banded.LAYOUTS` (budgets: every layer would build its layouts again): a mask over all keys.
    The model's weights are not modified; hooks (and the attention modules' pointer to the banded function) are
    removed when the block ends, also when it raised. Generation also needs :func:`.kv_cache.new_cache`, so that
    streaming heads keep only sink + window entries.
    """
    if policy is None:
        yield
        return
    policy.check_fits(loaded)
    sites = [s for s in loaded.sites if s.kind == KIND]
    banded = banded and len(window_sizes(policy)) <= kv_banded.LAYOUTS
    entries = {id(s.container): (_query_windows(s, policy, l), policy.sink, _band(s, policy, l) if banded else None)
               for l, (s, row) in enumerate(zip(sites, policy.streaming)) if any(row)}
    token, value = _ACTIVE.set({**(_ACTIVE.get() or {}), **entries}), _POLICY.set(policy)
    masks = _MASKS.set({})
    try:
        with shared_hooks(loaded.model, "kv_policy", lambda: [
                s.container.register_forward_pre_hook(_hook, with_kwargs=True) for s in sites]), \
                shared_hooks(loaded.model, "kv_policy_banded", lambda: [_Pointed(s.container) for s in sites]):
            yield
    finally:
        _MASKS.reset(masks)
        _POLICY.reset(value)
        _ACTIVE.reset(token)
