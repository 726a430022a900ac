"""Models and their heads: one adapter per family, loading, per-call head gates, physical pruning,
the layer-input cache, and mask presets."""
