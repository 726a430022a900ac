"""Single-Shot Meta-Pruning (Zhang et al. 2020): a learned, label-free head scorer.

A small network reads each head's attention map from the frozen pre-trained model and scores
the head; it is trained on unlabeled text from several sources so that keeping the top half of
every layer preserves the distribution of sentence representations. The target task then needs
only its texts (no labels): score, keep the top 50 % per layer, prune physically, fine-tune.

- :mod:`.sources`  unlabeled English text sources (movie, amazon, nyt, tweets, bible)
- :mod:`.pruner`   the network, attention maps, save / load (``headprune.smp_pruner/1``)
- :mod:`.train`    the objective, the straight-through Gumbel top-k sampler, training
- :mod:`.scorer`   the ``smp`` scorer (keep the top half per layer: :mod:`pruning_core.modeling.presets`)
- :mod:`.compare`  fine-tuning comparison: full, SMP-pruned, random-pruned, prune-after-fine-tuning
"""
from pruning_core.scoring.smp.pruner import (
    SMP_PRUNER_FORMAT,
    PrunerConfig,
    PrunerFile,
    SMPPruner,
    load_pruner,
    save_pruner,
)
from pruning_core.scoring.smp.train import (
    TrainConfig,
    TrainResult,
    keep_count,
    load_base_model,
    sample_keep_gates,
    train_pruner,
)

__all__ = ["SMP_PRUNER_FORMAT", "PrunerConfig", "PrunerFile", "SMPPruner", "TrainConfig", "TrainResult", "keep_count",
           "load_base_model", "load_pruner", "sample_keep_gates", "save_pruner", "train_pruner"]
