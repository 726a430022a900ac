"""Pruning curves, ablation tables and training-dynamics figures."""
