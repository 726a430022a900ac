"""Metrics, statistics and results: what an evaluation measures, how sure it is, and the JSON
formats with provenance; Michel et al.'s ablation and pruning curves."""
