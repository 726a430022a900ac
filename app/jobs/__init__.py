"""Long work: ``Work`` and the board that runs it (with the server's CPU queue), the shared cached calls (with
the evaluation job), one factory per other long job, how much work a model gets, and the shared pickers."""
