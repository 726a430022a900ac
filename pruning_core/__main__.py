"""``python -m pruning_core`` is the ``headprune`` command."""
import sys

from .cli import main

sys.exit(main())
