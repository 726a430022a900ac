"""The Head map: the clickable map, the live panel and its latency probe."""
