"""The conventions everything else stands on: head indices and masks (heads), errors, registries, progress."""
