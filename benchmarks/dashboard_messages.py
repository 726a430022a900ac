"""What the dashboard server sends a browser per Head map click: websocket messages, deltas, bytes.

    .venv/bin/python benchmarks/dashboard_messages.py       # writes benchmarks/results/dashboard_messages.json
    .venv/bin/python benchmarks/dashboard_messages.py --clicks 3 --out /tmp/messages.json

One dashboard server on the embedded default (``--model``, ``--task``, ``--limit`` as in
``dashboard_timings.py``), one Chromium page on the Head map; ``--clicks`` head clicks, each after the
server is idle, each followed until the page is idle again (metric, history, latency drawn). Every
message the server sends (a Streamlit ``ForwardMsg``) is decoded and counted per click.

What it measures and writes, in full: benchmarks/README.md, ``dashboard_messages.py``.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from browser_helpers import (DashboardServer, chromium_browser, chromium_path, click_point,  # noqa: E402
                             head_points, process_cpu_s, wait_idle, wait_live)
from dashboard_timings import (RESULTS, _kept, _load, _spread, browsers_cpu_s, open_head_map,  # noqa: E402
                               settle)

METRIC_LINE = " · loss **"           # app.headmap.panel.strip_text once the metric is known


def decode(payload: bytes):
    """A websocket frame's ``ForwardMsg``."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    msg = ForwardMsg()
    msg.ParseFromString(payload)
    return msg


def delta_type(msg) -> str:
    """``markdown``, ``plotly_chart``, ``add_block``, ... for a delta message."""
    kind = msg.delta.WhichOneof("type")
    if kind == "new_element":
        return msg.delta.new_element.WhichOneof("type")
    return kind


class Recorder:
    """Every frame the server sends to one page, decoded, with the time it arrived."""

    def __init__(self, page) -> None:
        self.frames: list[tuple[float, bytes]] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        if isinstance(payload, (bytes, bytearray)):
            self.frames.append((time.perf_counter(), bytes(payload)))

    def since(self, n: int) -> list:
        return [decode(p) for _, p in self.frames[n:]]


def describe(msg) -> str:
    """One line for a delta: its place on the page, its type and the start of its text."""
    kind = delta_type(msg)
    element = msg.delta.new_element
    text = ""
    if kind in ("markdown", "metric", "progress", "alert", "button", "html"):
        inner = getattr(element, kind)
        text = next((str(getattr(inner, f)) for f in ("body", "label", "text") if hasattr(inner, f)), "")
    return f"{list(msg.metadata.delta_path)} {kind} {text[:70]!r}"


def summarise(msgs: list, previous: dict[tuple, str]) -> tuple[dict, dict[tuple, str]]:
    """Counts of one click's messages; ``previous``: the last click's delta hashes by page position."""
    types: collections.Counter = collections.Counter()
    kinds: collections.Counter = collections.Counter()
    repeated_types: collections.Counter = collections.Counter()
    sent: dict[tuple, str] = {}
    deltas = repeated = nbytes = 0
    before_metric = None
    sequence = []
    for msg in msgs:
        nbytes += msg.ByteSize()
        kinds[msg.WhichOneof("type")] += 1
        if msg.WhichOneof("type") != "delta":
            continue
        deltas += 1
        kind = delta_type(msg)
        types[kind] += 1
        where = tuple(msg.metadata.delta_path)
        digest = hashlib.sha256(msg.delta.SerializeToString(deterministic=True)).hexdigest()
        same = previous.get(where) == digest
        if same:
            repeated += 1
            repeated_types[kind] += 1
        sequence.append(("= " if same else "  ") + describe(msg))
        sent[where] = digest
        if before_metric is None and kind == "markdown" and METRIC_LINE in msg.delta.new_element.markdown.body:
            before_metric = deltas - 1
    return {"messages": len(msgs), "bytes": nbytes, "deltas": deltas, "before_metric": before_metric,
            "repeated": repeated, "by_type": dict(types.most_common()), "repeated_by_type": dict(
                repeated_types.most_common()), "by_message": dict(kinds.most_common()),
            "sequence": sequence}, sent


def quiet(page, pid: int) -> None:
    """:func:`dashboard_timings.settle` waiting in Playwright, which delivers the frames that arrive meanwhile."""
    settle(pid, wait=lambda seconds: page.wait_for_timeout(seconds * 1000))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--task", default="movie-sentiment")
    parser.add_argument("--limit", type=int, default=128)
    parser.add_argument("--clicks", type=int, default=4)
    parser.add_argument("--out", default=str(RESULTS / "dashboard_messages.json"))
    args = parser.parse_args(argv)
    from pruning_core.core.io import storage

    path = chromium_path()
    if path is None:
        print("Chromium is not installed: run `make browser` (apt-get install chromium).", file=sys.stderr)
        return 2
    log = ROOT / "test-artifacts" / "dashboard_messages-streamlit.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {"HEADPRUNE_APP_MODEL": args.model, "HEADPRUNE_APP_TASK": args.task, "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "HEADPRUNE_APP_DEVICE": "cpu",
           "HEADPRUNE_APP_EVAL_LIMIT": str(args.limit)}
    clicks, previous = [], {}
    with DashboardServer(env, log) as srv, chromium_browser(path) as browser:
        recorders: list[Recorder] = []
        page = open_head_map(browser, srv.url, before=lambda p: recorders.append(Recorder(p)))
        recorder = recorders[0]
        for i in range(args.clicks):
            quiet(page, srv.proc.pid)
            kept = _kept(page)
            n, cpu0, browser0 = len(recorder.frames), process_cpu_s(srv.proc.pid), browsers_cpu_s()
            click_point(page, head_points(page).nth(3 + i))
            wait_live(page, f"{kept - 1} / ", 600)
            cpu1, browser1 = process_cpu_s(srv.proc.pid), browsers_cpu_s()
            page.wait_for_timeout(500)
            wait_idle(page, 600_000)
            quiet(page, srv.proc.pid)
            counts, previous = summarise(recorder.since(n), previous if i else {})
            counts["server_cpu_s"] = round(process_cpu_s(srv.proc.pid) - cpu0, 3)
            counts["server_cpu_to_metric_s"] = round(cpu1 - cpu0, 3)
            counts["browser_cpu_s"] = round(browsers_cpu_s() - browser0, 3)
            counts["browser_cpu_to_metric_s"] = round(browser1 - browser0, 3)
            clicks.append(counts)
            print(f"click {i}: {dict((k, v) for k, v in counts.items() if k != 'sequence')}", flush=True)
        page.context.close()
    later = clicks[1:] or clicks                           # the first click has no previous click to repeat
    result = {"kind": "dashboard_messages", "model": args.model, "task": args.task, "limit": args.limit,
              "what": "websocket messages the server sends one Chromium page per Head map click (metric, history "
                      "and latency drawn; no other session)", "clicks": clicks,
              "median": {k: statistics.median(c[k] for c in later if c[k] is not None) for k in
                         ("messages", "bytes", "deltas", "before_metric", "repeated")},
              **{k: _spread([c[k] for c in clicks]) for k in ("server_cpu_s", "server_cpu_to_metric_s", "browser_cpu_s",
                                                               "browser_cpu_to_metric_s")},
              "load_average_1min": _load(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    storage.write_json(Path(args.out), result)
    print(f"median over clicks 2..: {result['median']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
