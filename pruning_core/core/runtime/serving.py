"""Where the dashboard listens, shared by ``headprune app`` (which starts it) and ``app.core.access``
(which decides what an exposed server may open).

Pure: no Streamlit, no torch.
"""
from __future__ import annotations

import ipaddress

LOOPBACK = "127.0.0.1"                     # the default address: this machine only
DATA_DIRS_ENV = "HEADPRUNE_DATA_DIRS"      # os.pathsep-separated folders; set (even empty) = restricted


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` is only reachable from this machine ('127.0.0.1', '::1', 'localhost').
    An empty host means every address, so it is not loopback."""
    if not host:
        return False
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
