"""The sidebar's pickers: the session's model, task, scorer and evaluation size."""
