"""Running the ``headprune`` command line in-process, as the CLI tests do."""
from __future__ import annotations

from pruning_core.cli.main import main


def run(*args) -> int:
    """``headprune *args`` in this process (arguments made strings); its exit code."""
    return main([str(a) for a in args])
