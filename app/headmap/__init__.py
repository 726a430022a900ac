"""The Head map: the clickable map, the live panel and its latency probe, and the per-example tables of the mask
(the Per example page)."""
