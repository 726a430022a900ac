"""The model floor: the shared cached calls (model, task, data, evaluation, scores), the jobs every feature shares
(:mod:`app.model.jobs`, each carrying its label and time estimate) and the sizing behind them
(:mod:`app.model.workload`)."""
