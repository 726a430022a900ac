"""Long work of one session: ``Work`` and the board that runs it (with the server's CPU queue); imports no feature."""
