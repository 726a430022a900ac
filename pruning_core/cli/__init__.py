"""The ``headprune`` command: :mod:`.main` builds the parser; one module per command group."""
