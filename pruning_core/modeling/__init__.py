"""Models and their heads: one adapter per family (architectures), where a model comes from (sources), per-call
head gates (masking), physical pruning, mask presets, and running a model fast (inference)."""
