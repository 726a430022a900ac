"""Settings of the dashboard's server process, made once before work starts (``dashboard.py``).

glibc's allocator gives each thread that allocates its own arena (up to eight per core) and keeps the
memory a thread freed in that arena for its next allocation. The dashboard runs every evaluation,
scoring and timing in a thread of its own (:mod:`app.jobs`), so a class of eight clicking at once left
eight arenas holding a forward pass's activations each: the server peaked at 2.25 GB during a class of
eight, 1.64 GB with at most :data:`ARENAS` arenas, at the same click -> metric times within their noise
(``benchmarks/dashboard_timings.py`` with ``MALLOC_ARENA_MAX=2``, issue 17's closing note). Capping the
arenas makes threads share them; the allocator's locks are not what a forward pass waits for.

Pure: no Streamlit.
"""
from __future__ import annotations

import ctypes

ARENAS = 2
M_ARENA_MAX = -8          # glibc's mallopt parameter (malloc.h)


def cap_malloc_arenas(arenas: int = ARENAS) -> bool:
    """At most ``arenas`` glibc malloc arenas from now on (arenas made before stay); True when applied,
    False where the C library has no ``mallopt`` (not glibc: macOS, musl) and nothing changes."""
    if arenas < 1:
        raise ValueError(f"arenas must be 1 or more, got {arenas}.")
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_ARENA_MAX, arenas) == 1
