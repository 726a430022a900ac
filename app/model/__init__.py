"""What every page asks of a model: the shared cached calls (model, task, data, evaluation, scores), the shared
scores job, how much work a model gets, the warm-up command, and the pickers that choose the session's model,
task, scorer and size (with the SMP pruner's training behind the scorer picker)."""
