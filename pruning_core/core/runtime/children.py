"""Child processes that end with their parent: stopping a command stops all of it.

By default SIGTERM kills a Python process on the spot: ``finally`` blocks do not run, temporary folders stay
and children keep running. :func:`signals_raise` turns SIGTERM and SIGHUP into :class:`Terminated` (a
``SystemExit``, status 128 + signal) and SIGINT into ``KeyboardInterrupt``, so cleanup runs as for any
exception; :func:`supervised` stops a child whenever its parent leaves the block (the same signal, ``grace``
seconds, then SIGKILL); :func:`run_child` runs a command in its own process group, supervised, so
grandchildren go too. Handlers install only in the main thread; elsewhere :func:`signals_raise` does nothing.
"""
from __future__ import annotations

import multiprocessing.process
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

GRACE_SECONDS = 5.0                    # a stopped child's time to exit cleanly before SIGKILL
HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

Child = subprocess.Popen | multiprocessing.process.BaseProcess


class Terminated(SystemExit):
    """The process got SIGTERM or SIGHUP; exits with 128 + the signal number (143, 129)."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


_state = {"depth": 0, "stopping": False}    # nesting of signals_raise; a signal already raised


def _handler(signum: int, frame) -> None:
    if _state["stopping"]:              # already unwinding: let cleanup (and child grace) finish
        return
    _state["stopping"] = True
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


@contextmanager
def signals_raise() -> Iterator[None]:
    """Inside the block SIGTERM/SIGHUP raise :class:`Terminated` and SIGINT ``KeyboardInterrupt``.

    Only the first signal raises; later ones are ignored while the block unwinds, so a second
    Ctrl-C cannot cut a child's shutdown or a folder's removal short. Nests; the previous
    handlers are restored on leaving. Outside the main thread this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handler) for s in HANDLED}
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        if _state["depth"] == 0:
            _state["stopping"] = False
        for s, h in previous.items():
            signal.signal(s, h)


def signal_of(exc: BaseException | None) -> int | None:
    """The signal behind ``exc`` (SIGINT for KeyboardInterrupt), or None for anything else."""
    if isinstance(exc, Terminated):
        return exc.signum
    if isinstance(exc, KeyboardInterrupt):
        return signal.SIGINT
    return None


@contextmanager
def supervised(child: Child, grace: float = GRACE_SECONDS) -> Iterator[Child]:
    """Stop ``child`` (started inside or before the block) when the block is left, however.

    On a signal (see :func:`signals_raise`, active inside) the child gets the same signal, after
    any other exception SIGTERM; after a normal end it first gets ``grace`` seconds to exit by
    itself, then SIGTERM. Either way SIGKILL follows after ``grace`` seconds more.
    """
    with signals_raise():
        signum = None
        try:
            yield child
        except BaseException as exc:
            signum = signal_of(exc) or signal.SIGTERM
            raise
        finally:
            stop(child, signum, grace)


def stop(child: Child, signum: int | None = signal.SIGTERM, grace: float = GRACE_SECONDS) -> None:
    """Send ``signum`` to ``child``, wait up to ``grace`` s, then SIGKILL; returns when it is gone.

    ``signum=None`` first waits ``grace`` s for the child to exit by itself, then sends SIGTERM.
    A ``Popen`` child that leads its own process group (see :func:`run_child`) is stopped with
    its whole group; a multiprocessing child, which shares ours, alone.
    """
    if child.pid is None:               # a multiprocessing child that was never started
        return
    if isinstance(child, subprocess.Popen):
        own = child.poll() is None and _leads_group(child.pid)
        _stop(_Group(child, own), signum, grace)
    else:
        _stop(_Process(child), signum, grace)


def run_child(cmd: Sequence[str], cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
              grace: float = GRACE_SECONDS) -> int:
    """Run ``cmd`` in a new session until it exits; return its status (128 + signal if killed).

    SIGTERM, SIGHUP and SIGINT sent to this process are passed on to the child's whole process
    group and then re-raised here (:class:`Terminated`, ``KeyboardInterrupt``). The child leads a
    new session, so it has no controlling terminal: Ctrl-C reaches this process, which forwards
    it, and a background child can still write to (and read from) the terminal.
    """
    with signals_raise():               # installed before the child exists: no unguarded gap
        proc, signum = None, None
        try:
            proc = subprocess.Popen(list(cmd), cwd=cwd, env=None if env is None else dict(env),
                                    start_new_session=True)
            code = proc.wait()
        except BaseException as exc:
            signum = signal_of(exc) or signal.SIGTERM
            raise
        finally:
            if proc is not None:        # also sweeps what the child left in its group
                _stop(_Group(proc, own=True), signum, grace)
    return 128 - code if code < 0 else code


# -- stopping --------------------------------------------------------------------------------------

class _Group:
    """A Popen child, with its process group when it leads one (alive while any member runs)."""

    def __init__(self, proc: subprocess.Popen, own: bool) -> None:
        self.proc = proc
        self.pgid = proc.pid            # a group leader's pid is its group's id
        self.own = own                  # False: stop the child alone

    def send(self, signum: int) -> None:
        try:
            if self.own:
                os.killpg(self.pgid, signum)
            elif self.proc.poll() is None:
                self.proc.send_signal(signum)
        except (ProcessLookupError, PermissionError):
            pass

    def alive(self) -> bool:
        if self.proc.poll() is None:
            return True
        if not self.own:
            return False
        try:
            os.killpg(self.pgid, 0)     # a pgid is not reused while any member lives
        except (ProcessLookupError, PermissionError):
            return False
        return _group_has_live_member(self.pgid)


class _Process:
    """A multiprocessing child (it shares our process group)."""

    def __init__(self, proc: multiprocessing.process.BaseProcess) -> None:
        self.proc = proc

    def send(self, signum: int) -> None:
        if self.proc.is_alive():
            try:
                os.kill(self.proc.pid, signum)
            except ProcessLookupError:
                pass

    def alive(self) -> bool:
        return self.proc.is_alive()    # also reaps it once it has exited


def _stop(target: _Group | _Process, signum: int | None, grace: float) -> None:
    if signum is None:
        if not _wait(target, grace):
            target.send(signal.SIGTERM)
    else:
        target.send(signum)
    if not _wait(target, grace):
        target.send(signal.SIGKILL)
        _wait(target, grace)


def _wait(target: _Group | _Process, seconds: float) -> bool:
    """Poll until ``target`` is gone or ``seconds`` have passed; True when gone."""
    deadline = time.monotonic() + seconds
    while target.alive():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def _group_has_live_member(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies, waiting for init, do not count).

    Linux reads /proc; elsewhere any member counts as running.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()    # after "pid (comm)": state ppid pgrp ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


__all__ = ["GRACE_SECONDS", "Terminated", "run_child", "signal_of", "signals_raise", "stop", "supervised"]
