"""Where a model comes from: the catalogue of prepared models, loading (a prepared name, a local folder, a hub
id) and the checks of a local folder's weight files."""
