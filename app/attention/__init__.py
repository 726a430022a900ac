"""The Attention page: cached attention runs, their pictures and words."""
