"""The Speed page: the sweep and its pictures."""
