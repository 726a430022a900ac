"""Training the SMP pruner from the dashboard."""
