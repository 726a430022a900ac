"""The model floor: the shared cached calls (model, task, data, evaluation, scores), the jobs every feature shares
(:mod:`app.model.jobs`, each with its label, time estimate and when it starts) and the click-sizing policy behind
them (:mod:`app.model.workload`: how many examples)."""
