"""Sharing: the analysis bundle, links, the pruned model zip and the offline report."""
