"""The Per example page's tables."""
