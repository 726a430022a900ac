"""The Head map's colourings besides one role's name, shared by the map and the roles picker."""
from __future__ import annotations

IMPORTANCE, STRONGEST = "importance", "strongest"

__all__ = ["IMPORTANCE", "STRONGEST"]
