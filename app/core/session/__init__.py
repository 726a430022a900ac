"""This session's state: every key and the URL (state), what a page works on (selection), the mask and its undo
history (mask), one-shot notices, and the results no cache key finds again (session_results)."""
