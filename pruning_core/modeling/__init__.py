"""Models and their heads: one adapter per family (architectures), where a model comes from (sources), per-call
head gates (masking), physical pruning, mask presets, running a model fast (inference) and KV-cache head policies (kv)."""
