"""``python -m pruning_core`` is the ``headprune`` command."""
import sys

from pruning_core.cli.main import main

sys.exit(main())
