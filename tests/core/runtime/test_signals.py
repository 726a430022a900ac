"""Stopping a command stops all of it: SIGTERM/SIGINT on the parent leave no child, port or temp folder.

Each test starts a parent in its own session, signals the parent only (as `kill PID`, a service
manager or CI does), then checks the exit status (128 + signal) and that no process of the
parent's or its children's process groups survives.
"""
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pruning_core.core.runtime.children import Terminated, signals_raise, stop

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process groups from /proc")

ROOT = Path(__file__).resolve().parents[3]
TESTS = Path(__file__).resolve().parents[2]


# -- helpers -----------------------------------------------------------------------------------------

def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgid) of a process, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), int(fields[2])


def _gone(pid: int) -> bool:
    """Exited: no process, or a zombie waiting for its (re)parent to reap it."""
    st = _stat(pid)
    return st is None or st[0] == "Z"


def _processes() -> dict[int, tuple[str, int, int]]:
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            out[int(entry.name)] = st
    return out


def _live_in_groups(pgids: set[int]) -> list[int]:
    """Running (not zombie) processes of these process groups."""
    return [pid for pid, (state, _, pgid) in _processes().items() if pgid in pgids and state != "Z"]


def _groups_under(pid: int) -> set[int]:
    """The process groups of ``pid`` and of all its descendants."""
    procs, groups, todo = _processes(), set(), [pid]
    while todo:
        p = todo.pop()
        if p in procs:
            groups.add(procs[p][2])
        todo += [c for c, (_, ppid, _) in procs.items() if ppid == p]
    return groups


@pytest.fixture
def groups():
    """Process groups a test started; whatever is left of them is killed afterwards, pass or fail."""
    found: set[int] = set()
    yield found
    for g in list(found):               # a parent still running: its children's groups too
        found |= _groups_under(g)
    for g in found:
        try:
            os.killpg(g, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _start(args: list[str], tmp_path: Path, groups: set[int], **env: str) -> subprocess.Popen:
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]), **env}
    log = open(tmp_path / "parent.log", "wb")
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=full_env, start_new_session=True,
                            stdout=log, stderr=subprocess.STDOUT)
    groups.add(proc.pid)
    return proc


def _wait_for(check, seconds: float, what: str, proc: subprocess.Popen, tmp_path: Path):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (value := check()):
            return value
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"{what} did not happen (parent exit {proc.poll()}); log:\n{(tmp_path / 'parent.log').read_text()}")


def _signal_and_check(proc: subprocess.Popen, signum: int, groups: set[int], tmp_path: Path) -> None:
    """Signal the parent alone; it exits with 128 + signum and nothing of ``groups`` survives."""
    os.kill(proc.pid, signum)
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("the parent did not exit within 20 s of the signal")
    assert code == 128 + signum, (tmp_path / "parent.log").read_text()
    deadline = time.monotonic() + 10
    while (left := _live_in_groups(groups)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"processes survived the parent: {left}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as servers bind; TIME_WAIT is no owner
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


# -- headprune app -------------------------------------------------------------------------------------

@pytest.mark.heavy
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_app_stops_its_server(signum, tmp_path, groups):
    port = _free_port()
    proc = _start(["-m", "pruning_core", "app", "--port", str(port)], tmp_path, groups,
                  HEADPRUNE_HOME=str(tmp_path / "home"))
    _wait_for(lambda: _accepts(port), 90, f"the dashboard listening on port {port}", proc, tmp_path)
    groups |= _groups_under(proc.pid)
    assert len(groups) >= 2, "the server should run in its own process group"
    _signal_and_check(proc, signum, groups, tmp_path)
    assert _port_free(port)


# -- the library helper: a child, a grandchild, temp folders ---------------------------------------

CHILD = """
import os, signal, subprocess, sys, time
sys.path.insert(0, {tests!r})
from signal_workers import write_pids
if sys.argv[2] == "stubborn":       # ignores SIGTERM and SIGINT, it and its child: only SIGKILL helps
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
write_pids(sys.argv[1], os.getpid(), grandchild.pid)
time.sleep(120)
""".format(tests=str(TESTS))

PARENT = """
import sys, tempfile
from pruning_core.core.runtime.children import run_child, signals_raise
try:
    with signals_raise(), tempfile.TemporaryDirectory(dir=sys.argv[1]) as tmp:
        sys.exit(run_child([sys.executable, "-c", sys.argv[2], sys.argv[3], sys.argv[4]], grace=1.0))
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.parametrize("signum,kind", [(signal.SIGTERM, "plain"), (signal.SIGINT, "plain"),
                                         (signal.SIGTERM, "stubborn")])
def test_run_child_stops_child_grandchild_and_removes_temp(signum, kind, tmp_path, groups):
    temps, pidfile = tmp_path / "temps", tmp_path / "pids"
    temps.mkdir()
    proc = _start(["-c", PARENT, str(temps), CHILD, str(pidfile), kind], tmp_path, groups)
    _wait_for(pidfile.exists, 30, "the child and grandchild starting", proc, tmp_path)
    child, grandchild = map(int, pidfile.read_text().split())
    assert any(temps.iterdir())
    groups |= _groups_under(proc.pid)
    assert {proc.pid, child} <= groups
    _signal_and_check(proc, signum, groups, tmp_path)
    assert _gone(child) and _gone(grandchild)
    assert not any(temps.iterdir()), "the temporary folder survived the signal"


def test_run_child_returns_the_exit_status():
    from pruning_core.core.runtime.children import run_child
    assert run_child([sys.executable, "-c", "import sys; sys.exit(3)"]) == 3
    assert run_child([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"]) == 143


def test_signals_raise_nests_and_restores_handlers():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated) as info:
        with signals_raise(), signals_raise():
            assert signal.getsignal(signal.SIGTERM) is not before
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
    assert info.value.code == 143 and info.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_stop_ignores_a_worker_never_started():
    import multiprocessing as mp
    worker = mp.get_context("spawn").Process(target=print)
    started = time.monotonic()
    assert stop(worker, grace=5.0) is None
    assert worker.pid is None and time.monotonic() - started < 1.0     # nothing sent, nothing waited for


# -- smp compare: the worker launcher --------------------------------------------------------------

COMPARE = """
import sys, types
from pruning_core.scoring.smp import compare
import signal_workers
compare._smp_mask = lambda config, progress: (types.SimpleNamespace(layout=None), 0.0, {})
compare._worker = signal_workers.sleepy_worker     # a worker that never ends, instead of 40 minutes of work
from pruning_core.cli.main import main
sys.exit(main(["smp", "compare", "--random-seeds", "1"]))
"""


@pytest.mark.heavy
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_smp_compare_stops_its_worker_and_removes_its_temp_folder(signum, tmp_path, groups):
    temps, pidfile = tmp_path / "temps", tmp_path / "worker.pid"
    temps.mkdir()
    proc = _start(["-c", COMPARE], tmp_path, groups, TMPDIR=str(temps), SIGNAL_PIDFILE=str(pidfile),
                  HEADPRUNE_HOME=str(tmp_path / "home"))
    _wait_for(pidfile.exists, 60, "the comparison worker starting", proc, tmp_path)
    worker = int(pidfile.read_text())
    assert [p.name for p in temps.iterdir() if p.name.startswith("headprune-smp-compare-")]
    groups |= _groups_under(proc.pid)
    _signal_and_check(proc, signum, groups, tmp_path)
    assert _gone(worker)
    assert not [p.name for p in temps.iterdir() if p.name.startswith("headprune-smp-compare-")]
