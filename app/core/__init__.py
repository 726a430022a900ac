"""What every page shares: session state and the URL, the session's mask, text escaping, widgets, the page list."""
