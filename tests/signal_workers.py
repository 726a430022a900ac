"""Stand-ins for child processes in test_signals.py (importable by spawned workers)."""
import os
import time
from pathlib import Path


def write_pids(path: str, *pids: int) -> None:
    """Write ``pids`` to ``path`` atomically, so a waiting test never reads half a line."""
    tmp = Path(path + ".tmp")
    tmp.write_text(" ".join(map(str, pids)))
    os.replace(tmp, path)


def sleepy_worker(spec: dict, queue) -> None:
    """A comparison worker that announces its pid (file in $SIGNAL_PIDFILE) and never finishes."""
    write_pids(os.environ["SIGNAL_PIDFILE"], os.getpid())
    time.sleep(120)
