"""The conventions everything else stands on: head indices and masks (heads), errors, registries, progress.
Nested one layer up, importing only these: what the library reads and writes (io) and how it runs beside
other processes (runtime)."""
