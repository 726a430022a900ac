"""Pruning curves, ablation tables and training-dynamics figures, with their cached calls and jobs."""
