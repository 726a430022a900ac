"""What every feature asks of the library: the shared cached calls (model, task, data, evaluation, scores), the
shared scores job, how much work a model gets, and the warm-up command."""
