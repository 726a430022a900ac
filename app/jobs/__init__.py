"""Long work per session (``Work`` and its board), the CPU queue, the shared cached calls, and how much
work a model gets."""
