"""The conventions and plumbing everything else stands on: head indices and masks, errors, registries,
progress, file writes, the prepared-model catalog, child processes and data-parallel passes."""
