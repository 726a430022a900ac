"""Dashboard timings on the embedded default (MiniLM-L6) in Debian's Chromium: warm page renders,
toggle -> metric and toggle -> latency on the Head map.

    .venv/bin/python benchmarks/dashboard_timings.py            # writes benchmarks/results/dashboard_timings.json
    .venv/bin/python benchmarks/dashboard_timings.py --model /path/to/folder --task sst2 --out other.json

Needs the prepared default (`headprune prepare`) or --model, Chromium (`make browser`) and
Playwright. Runs twice: as the machine is found, then with --busy (default 2) extra busy loops
spinning, and records the 1-minute load average with every toggle. Numbers depend on the machine
and its load; they are a description of one run, never a test threshold.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser_helpers import (DashboardServer, chromium_browser, chromium_path, click_point, head_points,  # noqa: E402
                             metric_value, new_page, process_cpu_s, wait_idle, wait_metric)

RESULTS = ROOT / "benchmarks" / "results"


UPDATING_METRIC = "metric and loss: updating"
UPDATING_LATENCY = "latency: updating"


def _gone(page, text: str, timeout_s: float = 300) -> None:
    """Wait until no element of the page shows ``text`` (an "updating…" placeholder)."""
    page.wait_for_function("t => !document.body.innerText.includes(t)", arg=text, timeout=timeout_s * 1000)


def _spread(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"median": round(statistics.median(ordered), 3), "min": round(ordered[0], 3), "max": round(ordered[-1], 3),
            "n": len(ordered)}


def measure(browser, model: str, task: str, log: Path, toggles: int = 5) -> dict:
    """Open the dashboard on ``model``: warm render of three pages, then ``toggles`` head clicks, each
    timed until the new metric is drawn and until the new latency is drawn."""
    env = {"HEADPRUNE_APP_MODEL": model, "HEADPRUNE_APP_TASK": task, "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "HEADPRUNE_APP_DEVICE": "cpu"}
    with DashboardServer(env, log) as srv:
        page = new_page(browser, height=1400)
        page.goto(f"{srv.url}/head_map")                     # cold: loads, scores, evaluates, times
        wait_metric(page, "heads kept", lambda v: " / " in v, timeout_s=600)
        wait_idle(page, 600_000)
        renders = {}
        for name in ("model_data", "head_map", "curves"):
            page.goto(f"{srv.url}/{'' if name == 'model_data' else name}")
            wait_idle(page, 900_000)
            started = time.perf_counter()
            page.reload()
            wait_idle(page)
            renders[name] = round(time.perf_counter() - started, 3)
        page.goto(f"{srv.url}/head_map")
        wait_idle(page)
        clicks = []
        for i in range(toggles):
            kept_before = metric_value(page, "heads kept")
            started, cpu0 = time.perf_counter(), process_cpu_s(srv.proc.pid)
            click_point(page, head_points(page).nth(3 + 2 * i))
            wait_metric(page, "heads kept", lambda v: v != kept_before)      # the cheap numbers come first
            _gone(page, UPDATING_METRIC)                                      # the new metric is drawn
            to_metric, cpu1 = time.perf_counter() - started, process_cpu_s(srv.proc.pid)
            _gone(page, UPDATING_LATENCY)                                     # the new latency is drawn
            to_latency = time.perf_counter() - started
            wait_idle(page)
            clicks.append({"to_metric_s": round(to_metric, 3), "server_cpu_to_metric_s": round(cpu1 - cpu0, 3),
                           "to_latency_s": round(to_latency, 3),
                           "server_cpu_to_latency_s": round(process_cpu_s(srv.proc.pid) - cpu0, 3),
                           "load_average_1min": round(os.getloadavg()[0], 2)})
        kept_after = metric_value(page, "heads kept")
        page.context.close()
    return {"warm_render_s": renders, "toggles": clicks, "heads_kept_after": kept_after,
            "toggle_to_metric_s": _spread([c["to_metric_s"] for c in clicks]),
            "toggle_to_latency_s": _spread([c["to_latency_s"] for c in clicks])}


def busy_loops(n: int) -> list[subprocess.Popen]:
    """``n`` processes that spin on a CPU each (the "loaded" condition); the caller stops them."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="'default' (prepared) or a local model folder")
    parser.add_argument("--task", default="movie-sentiment")
    parser.add_argument("--toggles", type=int, default=5)
    parser.add_argument("--busy", type=int, default=2, help="busy loops of the loaded run (0: quiet run only)")
    parser.add_argument("--out", default=str(RESULTS / "dashboard_timings.json"))
    args = parser.parse_args(argv)
    from pruning_core import storage
    from pruning_core.models import default_model_dir
    from pruning_core.results import versions

    if args.model == "default" and not (default_model_dir() / "config.json").is_file():
        print("The embedded default is not prepared: run `headprune prepare` first.", file=sys.stderr)
        return 2
    path = chromium_path()
    if path is None:
        print("Chromium is not installed: run `make browser` (apt-get install chromium).", file=sys.stderr)
        return 2
    log = ROOT / "test-artifacts" / "dashboard_timings-streamlit.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    runs = []
    with chromium_browser(path) as browser:
        for busy in ([0, args.busy] if args.busy else [0]):
            loops = busy_loops(busy)
            try:
                before = os.getloadavg()[0]
                run = measure(browser, args.model, args.task, log, args.toggles)
            finally:
                for proc in loops:                    # only the processes started here
                    proc.kill()
                    proc.wait()
            run["condition"] = (f"loaded: {busy} extra busy loops (python -c 'while True: pass') while measuring"
                                if busy else "as found (no extra load from this script)")
            run["load_average_1min_before"] = round(before, 2)
            run["load_average_1min_after"] = round(os.getloadavg()[0], 2)
            runs.append(run)
            print(json.dumps(run, indent=1), flush=True)
    result = {"format": "headprune.dashboard_timings/2", "model": args.model, "task": args.task,
              "what": "seconds from a head click in Chromium until the new metric is drawn (to_metric) and until "
                      "the new latency is drawn (to_latency), on the Head map; median, min and max over toggles",
              "runs": runs, "cpu_threads": os.cpu_count(), "versions": versions(),
              "command": "python benchmarks/dashboard_timings.py", "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    storage.write_json(Path(args.out), result)
    print(f"wrote {args.out}")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
