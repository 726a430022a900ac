"""KV-cache head policies: which key/value heads keep their whole cache, and what that saves."""
