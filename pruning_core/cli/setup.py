"""``headprune`` setup commands: prepare (build a prepared model) and app (start the dashboard as a
supervised child, on loopback unless ``--host`` says otherwise)."""
from __future__ import annotations

import sys
from pathlib import Path

from pruning_core.cli.common import progress_bars
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.runtime.serving import DATA_DIRS_ENV, LOOPBACK, is_loopback


def add_prepare(sub) -> None:
    """Add ``prepare`` to the sub-commands ``sub``."""
    from pruning_core.modeling.sources import catalog
    p = sub.add_parser("prepare", help="fetch and build a prepared model (the default classifier unless --model)")
    p.add_argument("--model", default="default", metavar="NAME",
                   help=f"which prepared model to build: {', '.join(catalog.names())} (--list says what each is and "
                        "costs); default: the embedded MiniLM-L6 classifier")
    p.add_argument("--list", action="store_true", help="list the prepared models, whether each is ready, and stop")
    p.add_argument("--force", action="store_true", help="redo everything, even if a valid cache exists")
    p.add_argument("--runtime", choices=["llama-cpp"], default=None,
                   help="install another runtime instead of a model: llama-cpp compiles llama.cpp's Python binding "
                        "(llama-cpp-python) for `headprune export --format gguf` checks; about 6 minutes on two quiet cores")
    p.set_defaults(func=cmd_prepare)


def add_app(sub) -> None:
    """Add ``app`` to the sub-commands ``sub``."""
    p = sub.add_parser("app", help="start the dashboard")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--host", default=LOOPBACK, metavar="ADDR",
                   help="address to listen on (default 127.0.0.1: this machine only); another address, such as "
                        "0.0.0.0, exposes the dashboard to the network on purpose")
    p.add_argument("--data-dir", action="append", default=[], metavar="DIR",
                   help="on an exposed server, a folder whose files and model folders users may open by path "
                        "(repeatable; without it only uploads, hub ids and the default work)")
    p.set_defaults(func=cmd_app)


def cmd_prepare(args) -> None:
    from pruning_core.modeling.sources import catalog
    if args.runtime == "llama-cpp":
        from pruning_core.bench.export import llama_cpp
        print(llama_cpp.install(force=args.force))
        return
    if args.list:
        for name in catalog.names():
            entry = catalog.get(name)
            state = "prepared" if entry.is_prepared() else f"not prepared ({entry.cost})"
            print(f"{name:<14} {entry.title}\n{'':<14} task {entry.task}; {state}")
        return
    report = catalog.get(args.model).run_prepare(force=args.force, progress=progress_bars())
    print(report.summary() if hasattr(report, "summary") else report)


def app_command(args, entry: Path) -> tuple[list[str], dict[str, str]]:
    """The ``streamlit run`` command line for ``headprune app`` and the variables added to its environment.

    The server listens on ``args.host`` (127.0.0.1 unless given). On any other address the
    dashboard opens local paths only inside the ``--data-dir`` folders (``HEADPRUNE_DATA_DIRS``,
    set even when empty); on loopback it is left as the operator's environment has it.
    """
    import os
    cmd = [sys.executable, "-m", "streamlit", "run", str(entry), "--server.port", str(args.port),
           "--server.address", args.host]
    if is_loopback(args.host):
        if args.data_dir:
            print("headprune: note: --data-dir only matters with --host (the dashboard is on this machine only)",
                  file=sys.stderr)
        return cmd, {}
    dirs = []
    for d in args.data_dir:
        folder = Path(d).expanduser().resolve()
        if not folder.is_dir():
            raise HeadpruneError(f"--data-dir {d!r} is not a folder; give an existing folder of data files or models.")
        dirs.append(str(folder))
    return cmd, {DATA_DIRS_ENV: os.pathsep.join(dirs)}


def cmd_app(args) -> None:
    import os

    from pruning_core.core.runtime.children import run_child
    root = Path(__file__).resolve().parents[2]
    entry = root / "dashboard.py"
    if not entry.is_file():
        raise HeadpruneError(f"The dashboard is not installed next to the library (looked for {entry}).")
    cmd, env = app_command(args, entry)
    if env:
        print(f"headprune: the dashboard listens on {args.host} and opens local files only inside: "
              f"{', '.join(args.data_dir) or '(no folder; uploads only)'}", file=sys.stderr)
    # the server runs as a supervised child: stopping `headprune app` (Ctrl-C, SIGTERM) stops it too
    raise SystemExit(run_child(cmd, cwd=root, env={**os.environ, **env} if env else None))
